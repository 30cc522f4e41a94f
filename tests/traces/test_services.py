"""Imports into the database (command and services), failures that import nothing, and a
proposal that becomes a draft suite version, whose diff is right and which publishes."""

from __future__ import annotations

import gzip
import io

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from catalogue import services as curation
from catalogue.models import SuiteVersion
from traces import services
from traces.models import Application, Trace, TraceRow, UnmappedTime
from traces.proposal import Parameters

pytestmark = pytest.mark.django_db


def test_record_then_import_with_the_command(vllm_moe_trace, capsys):
    call_command("import_trace", str(vllm_moe_trace), application="qwen-moe-chat", card_hours=120.0)
    trace = Trace.objects.get()
    assert trace.status == Trace.Status.IMPORTED and trace.time_basis == "cpu-ops"
    assert trace.application == Application.objects.get(name="qwen-moe-chat", card_hours=120.0)
    assert trace.provenance["recording"]["model"] == "qwen3-30b-a3b"
    mapped = sum(r.time_us for r in trace.rows.all())
    unmapped = sum(u.time_us for u in trace.unmapped.all())
    assert mapped == pytest.approx(trace.mapped_time_us)
    assert mapped + unmapped == pytest.approx(trace.total_time_us)
    assert 0 < trace.coverage < 1
    assert trace.rows.filter(operator="fused_moe").exists()
    assert trace.unmapped.filter(name="aten::linear").exists()
    out = capsys.readouterr().out
    assert f"trace #{trace.pk} moe.json.gz" in out
    assert f"= {100 * trace.coverage:.1f}%" in out


def test_the_command_fails_on_a_file_that_is_not_a_trace(tmp_path, capsys):
    bad = tmp_path / "notes.txt"
    bad.write_text("nothing to see\n")
    with pytest.raises(CommandError, match="1 of 1 trace"):
        call_command("import_trace", str(bad), application="chat", card_hours=1)
    assert "neither JSON nor a trace CSV" in capsys.readouterr().err
    assert Trace.objects.get().status == Trace.Status.FAILED


def test_a_bad_trace_is_kept_as_failed_and_nothing_is_imported(vllm_moe_trace):
    application = services.application_upsert(name="chat", card_hours=10)
    cut = vllm_moe_trace.read_bytes()
    cut = gzip.compress(gzip.decompress(cut)[:-5000])
    with pytest.raises(services.TraceImportError) as caught:
        services.trace_upload(upload=io.BytesIO(cut), name="cut.json.gz", application=application)
    trace = caught.value.trace
    assert caught.value.code == "trace:truncated"
    trace.refresh_from_db()
    assert trace.status == Trace.Status.FAILED and trace.error_code == "trace:truncated"
    assert "ends early" in trace.error_message
    assert trace.upload.size == len(cut)  # the upload is kept
    assert not TraceRow.objects.exists() and not UnmappedTime.objects.exists()


def test_csv_rows_naming_an_unknown_application_or_operator_are_refused_whole():
    services.application_upsert(name="chat", card_hours=10)
    csv = (
        "application,operator,input_kwargs,calls,gpu_time_us\n"
        'chat,rms_norm,"{""token_count"": 8, ""hidden_size"": 4096}",1,10\n'
        'ghost,rms_norm,"{""token_count"": 8, ""hidden_size"": 4096}",1,10\n'
    )
    with pytest.raises(services.TraceImportError) as caught:
        services.trace_upload(upload=io.BytesIO(csv.encode()), name="t.csv", application=None)
    assert caught.value.code == "trace:no-application" and "ghost" in caught.value.message
    csv = 'operator,input_kwargs,calls,gpu_time_us\nwarp_drive,"{""n"": 1}",1,10\n'
    with pytest.raises(services.TraceImportError) as caught:
        services.trace_upload(
            upload=io.BytesIO(csv.encode()),
            name="u.csv",
            application=Application.objects.get(name="chat"),
        )
    assert caught.value.code == "trace:unknown-operator" and "warp_drive" in caught.value.message
    assert set(Trace.objects.values_list("status", flat=True)) == {"failed"}
    assert not TraceRow.objects.exists()
    with pytest.raises(services.TraceImportError, match="give its card-hours"):
        services.application_upsert(name="new-app", card_hours=None)


@pytest.mark.slow
def test_a_proposal_is_a_draft_with_new_shapes_whose_diff_is_shown_and_which_publishes(
    catalogue, vllm_moe_trace, user
):
    application = services.application_upsert(name="qwen-moe-chat", card_hours=120)
    with vllm_moe_trace.open("rb") as stream:
        trace = services.trace_upload(upload=stream, name="moe.json.gz", application=application)
    proposal = services.proposal_create(
        base=catalogue,
        traces=[trace],
        version_label="v0.1-trace",
        parameters=Parameters(coverage=1.0, snap_tolerance=0.1),
        actor=user,
    )
    draft = proposal.draft
    assert draft.status == SuiteVersion.Status.DRAFT and draft.parent == catalogue
    # The tiny trace's norms are far from v0.1's shapes: all new, with the work model's W/Q.
    norm = draft.shapes.get(
        operator__slug="rms_norm", input_kwargs={"token_count": 24, "hidden_size": 256}
    )
    assert norm.shape_id.startswith("t") and norm.source == f"trace #{trace.pk}"
    assert norm.w_flops == {"bf16": 3 * 24 * 256 + 24}
    assert (norm.q_read, norm.q_write) == (2 * 24 * 256 + 2 * 256, 2 * 24 * 256)
    assert norm.weight > 0
    # Operators the base lacks (fused_moe, ...) are reported, not added.
    assert "fused_moe" in proposal.summary["not_in_base"]
    diff = curation.suite_version_diff(draft=draft, against=catalogue)
    added = {(s["operator"], s["shape_id"]) for s in diff["shapes"]["added"]}
    assert ("rms_norm", norm.shape_id) in added
    assert diff["summary"]["shapes_added"] == len(proposal.summary["added"])
    # The base's full shapes of the three observed operators are no longer in the draft.
    assert diff["summary"]["shapes_removed"] == catalogue.shapes.filter(smoke=False).count()
    importance = {c["operator"]: c["changes"]["importance"] for c in diff["operators"]["changed"]}
    assert set(importance) <= {"rms_norm", "fused_add_rms_norm", "silu_and_mul"}
    published = curation.suite_version_publish(draft=draft, actor=user)
    assert published.is_published
    assert published.definition["content_hash"] == published.content_hash


def test_demo_loader_imports_once_and_proposes_once(catalogue, vllm_moe_trace, tmp_path):
    from traces.demo import demo_traces_load

    listed = [{"file": "moe.json.gz", "application": "moe chat", "card_hours": 50.0}]
    assert demo_traces_load(directory=tmp_path, traces=listed, base_slug=catalogue.slug) is None
    (tmp_path / "moe.json.gz").write_bytes(vllm_moe_trace.read_bytes())
    first = demo_traces_load(
        directory=tmp_path, traces=listed, base_slug=catalogue.slug, label="v0.1-demo"
    )
    again = demo_traces_load(
        directory=tmp_path, traces=listed, base_slug=catalogue.slug, label="v0.1-demo"
    )
    assert first is not None and again == first
    assert Trace.objects.count() == 1 and first.draft.version == "v0.1-demo"
    assert "card-hours illustrative" in Trace.objects.get().provenance["notes"]
