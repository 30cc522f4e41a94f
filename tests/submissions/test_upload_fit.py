"""An upload meets the researcher halfway: kernel files for operators the chosen suite
lacks are skipped with a warning and the rest evaluated, as when the README's example
bundle (written for v1's 30 operators) is uploaded with the form's default suite, v0.1."""

from __future__ import annotations

import pytest

from submissions import services
from submissions.models import Submission

pytestmark = pytest.mark.django_db


def test_the_v1_example_bundle_uploaded_to_v01_queues_v01s_operators(catalogue, user, example_zip):
    submission = services.submission_create(owner=user, upload=example_zip("triton-baseline"))
    assert submission.status == Submission.Status.QUEUED
    assert set(submission.manifest["operators"]) == {
        "fused_add_rms_norm",
        "rms_norm",
        "silu_and_mul",
    }
    (skipped,) = [w for w in submission.manifest["warnings"] if w.startswith("Skipped ")]
    assert "for operators this suite does not have" in skipped
    files = skipped.split(": ", 1)[1].split(". ", 1)[0].split(", ")
    assert "mrope.py" in files and len(files) == 11
    assert not {"rms_norm.py", "silu_and_mul.py", "fused_add_rms_norm.py"} & set(files)


def test_the_submission_page_lists_the_skipped_files(client, catalogue, user, example_zip):
    submission = services.submission_create(owner=user, upload=example_zip("triton-baseline"))
    client.force_login(user)
    page = client.get(f"/submissions/{submission.pk}/").content.decode()
    assert "Warnings from the bundle check" in page
    assert "Skipped 11 kernel files" in page and "mrope.py" in page
