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
    skipped = [w for w in submission.manifest["warnings"] if " skipped: " in w]
    assert any(w.startswith("mrope.py skipped") for w in skipped)
    assert all("not an operator of this suite" in w for w in skipped)


def test_the_submission_page_lists_the_skipped_files(client, catalogue, user, example_zip):
    submission = services.submission_create(owner=user, upload=example_zip("triton-baseline"))
    client.force_login(user)
    page = client.get(f"/submissions/{submission.pk}/").content.decode()
    assert "Warnings from the bundle check" in page
    assert "mrope.py skipped" in page
