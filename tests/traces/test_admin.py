"""The admin pages: upload (good and bad), a trace's report, the weights with charts, a
proposal with its diff against the base."""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from traces.models import Proposal, Trace

pytestmark = pytest.mark.django_db


def upload(admin_client, path, **fields):
    data = {"format": "auto", "notes": "recorded by the tests on the CPU", **fields}
    data["trace"] = SimpleUploadedFile(path.name, path.read_bytes())
    return admin_client.post(reverse("admin:traces_trace_upload"), data)


def test_trace_list_links_to_upload_and_weights(admin_client):
    page = admin_client.get(reverse("admin:traces_trace_changelist")).content.decode()
    assert reverse("admin:traces_trace_upload") in page
    assert reverse("admin:traces_trace_weights") in page


def test_upload_page_lists_formats_and_rules(admin_client):
    page = admin_client.get(reverse("admin:traces_trace_upload")).content.decode()
    assert "record_shapes=True" in page
    assert "_C::fused_add_rms_norm|sgl_kernel::fused_add_rmsnorm" in page


@pytest.mark.slow
def test_upload_import_report_weights_and_proposal_pages(admin_client, catalogue, vllm_moe_trace):
    response = upload(admin_client, vllm_moe_trace, new_application="qwen-moe", card_hours="80")
    trace = Trace.objects.get()
    assert response.status_code == 302
    assert response["Location"] == reverse("admin:traces_trace_change", args=[trace.pk])
    report = admin_client.get(response["Location"]).content.decode()
    assert 'id="mapped-table"' in report and "vllm::outplace_fused_experts" in report
    assert "aten::linear" in report  # unmapped time is listed
    assert f"({trace.coverage * 100:.1f}%)" in report or f"({trace.coverage * 100:.0f}%)" in report

    weights_url = reverse("admin:traces_trace_weights") + f"?traces={trace.pk}"
    page = admin_client.get(weights_url).content.decode()
    assert 'id="operators-figure"' in page and 'id="coverage-figure"' in page
    assert reverse("leaderboard:plotly-js") in page
    figure = json.loads(
        page.split('id="operators-figure" type="application/json">')[1].split("</script>")[0]
    )
    assert "fused_moe" in figure["data"][0]["x"]

    response = admin_client.post(
        weights_url,
        {
            "base": catalogue.pk,
            "version_label": "v0.1-trace",
            "coverage": "0.9",
            "snap_tolerance": "0.1",
            "unobserved": "keep",
        },
    )
    proposal = Proposal.objects.get()
    assert response.status_code == 302
    assert response["Location"] == reverse("admin:traces_proposal_change", args=[proposal.pk])
    page = admin_client.get(response["Location"]).content.decode()
    assert 'id="diff-summary"' in page and 'id="added-table"' in page
    assert f"{proposal.draft}" in page and "Publish" in page
    assert 'id="coverage-figure"' in page


def test_a_bad_upload_shows_the_reason_and_keeps_the_file_as_failed(admin_client, tmp_path):
    bad = tmp_path / "trace.json"
    bad.write_text(
        '{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", '
        '"ts": 1, "dur": 2, "args": {}}]}'
    )
    response = upload(admin_client, bad, new_application="chat", card_hours="5")
    assert response.status_code == 200
    page = response.content.decode()
    assert "record_shapes=True" in page and "trace:no-shapes" in page
    trace = Trace.objects.get()
    assert trace.status == Trace.Status.FAILED
    assert "was kept with status failed" in page
    report = admin_client.get(reverse("admin:traces_trace_change", args=[trace.pk]))
    assert 'id="trace-error"' in report.content.decode()


@pytest.mark.slow
def test_an_upload_with_a_bad_rules_file_is_refused_before_anything_is_stored(
    admin_client, tmp_path, plain_trace
):
    rules = SimpleUploadedFile("rules.json", b'[{"pattern": "x", "operator": "rms_norm"}]')
    response = upload(
        admin_client, plain_trace, new_application="chat", card_hours="5", rules=rules
    )
    assert response.status_code == 200
    assert "extractor None is unknown" in response.content.decode()
    assert not Trace.objects.exists()
