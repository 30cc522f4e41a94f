"""Check only: every static check of an upload, against the chosen suite and every
published one, with nothing stored, no quota used and no worker: on the site, in the API
and with ``atrex check``."""

from __future__ import annotations

import io
import zipfile

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from rest_framework.test import APIClient

from catalogue.services import suite_version_import
from evaluator.suite import load_suite
from submissions.checks import bundle_check
from submissions.models import Submission

pytestmark = pytest.mark.django_db

MODEL = "import torch\n\nclass Model(torch.nn.Module):\n    pass\n"


def _zip(files: dict[str, str]) -> SimpleUploadedFile:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    return SimpleUploadedFile("kernels.zip", buffer.getvalue(), "application/zip")


@pytest.fixture
def both_suites(catalogue):
    """v0.1 (3 operators, the default) and v1 (30 operators), both published."""
    return catalogue, suite_version_import(suite=load_suite("atrex-bench-v1"))


def test_a_good_bundle_checks_ok_and_names_what_would_be_evaluated(catalogue):
    result = bundle_check(upload=_zip({"rms_norm.py": MODEL}), suite_version=None)
    assert result.ok and result.suite == "atrex-bench-v0.1"
    assert result.operators == {"rms_norm": "rms_norm.py"}
    assert set(result.missing) == {"silu_and_mul", "fused_add_rms_norm"}
    assert Submission.objects.count() == 0  # nothing stored


def test_a_bad_bundle_gets_the_code_and_text_a_submission_would_get(catalogue):
    result = bundle_check(upload=_zip({"rms_norm.py": "def broken(:\n"}), suite_version=None)
    assert not result.ok and result.code == "bundle:syntax-error"
    assert "rms_norm.py, line 1" in result.detail and "^" in result.detail


def test_the_check_proposes_the_suite_that_evaluates_most_of_the_bundle(both_suites, example_zip):
    v01, v1 = both_suites
    result = bundle_check(upload=example_zip("triton-baseline"), suite_version=v01)
    assert result.ok and len(result.operators) == 3
    assert result.best_suite == "atrex-bench-v1"
    assert [fit.suite for fit in result.fits] == ["atrex-bench-v1", "atrex-bench-v0.1"]
    assert len(result.fits[0].operators) == 14 and result.fits[0].suite_operators == 30
    # Against v1 itself nothing better is proposed.
    assert bundle_check(upload=example_zip("triton-baseline"), suite_version=v1).best_suite == (
        "atrex-bench-v1"
    )


def test_check_only_on_the_form_stores_nothing_and_keeps_the_fields(client, both_suites, user):
    client.force_login(user)
    response = client.post(
        reverse("submissions:new"),
        {
            "bundle": _zip({"rms_norm.py": MODEL, "mrope.py": MODEL}),
            "title": "my try",
            "visibility": "public",
            "action": "check",
        },
    )
    assert response.status_code == 200
    page = response.content.decode()
    assert "Check of kernels.zip against atrex-bench-v0.1" in page
    assert "It can be submitted: 1 operator would be evaluated (rms_norm)" in page
    assert "Skipped 1 kernel file for operators this suite does not have: mrope.py" in page
    assert "This bundle fits atrex-bench-v1 better" in page
    assert 'value="my try"' in page  # the title stays in the form
    assert Submission.objects.count() == 0


def test_check_api_answers_200_with_the_verdict_and_uses_no_quota(both_suites, user, settings):
    settings.ATREX = {**settings.ATREX, "QUOTA_PER_HOUR": 1}
    api = APIClient()
    bundle = {"bundle": _zip({"silu_and_mul.py": "class Kernel: pass\n"})}
    assert api.post("/api/submissions/check/", bundle, format="multipart").status_code in (401, 403)
    api.force_authenticate(user)
    for _ in range(3):  # over the hourly limit of 1, were checks counted
        body = api.post(
            "/api/submissions/check/",
            {
                "bundle": _zip({"silu_and_mul.py": "class Kernel: pass\n"}),
                "suite": "atrex-bench-v1",
            },
            format="multipart",
        ).json()
        assert body["ok"] is False and body["code"] == "bundle:missing-model"
        assert body["suite"] == "atrex-bench-v1"
    assert Submission.objects.count() == 0
    good = {"bundle": _zip({"silu_and_mul.py": MODEL})}
    assert api.post("/api/submissions/", good, format="multipart").status_code == 201
