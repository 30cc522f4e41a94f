"""End to end through a real Celery worker process and the real broker."""

from __future__ import annotations

import pytest
from django.conf import settings

from leaderboard.selectors import leaderboard_rows
from submissions import services
from submissions.models import Submission
from tests.conftest import wait_for_status

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_worker_picks_up_a_submission_and_publishes_it(
    catalogue, user, example_zip, celery_worker_process
):
    submission = services.submission_create(
        owner=user, upload=example_zip("triton-baseline", only=["fused_add_rms_norm.py"])
    )
    assert submission.status == Submission.Status.QUEUED
    wait_for_status(submission, Submission.FINAL_STATUSES)
    worker_log = celery_worker_process.read_text(errors="replace")
    assert submission.status == Submission.Status.PUBLISHED, (
        submission.error_message,
        worker_log[-3000:],
    )
    history = list(submission.history.values_list("to_status", flat=True))
    assert history == ["received", "validating", "queued", "running", "scoring", "published"]
    run = submission.runs.get()
    assert run.worker and run.shapes_done == run.shapes_total > 0
    assert run.shape_results.filter(operator="fused_add_rms_norm", status="pass").count() == 3
    rows = list(leaderboard_rows(suite=submission.suite_version, hardware=submission.hardware))
    assert [row.submission_id for row in rows] == [submission.pk]
    # The worker really consumed the message from the configured broker.
    assert f"{services.EVALUATE_TASK}[" in worker_log
    print(f"worker integration used broker {settings.CELERY_BROKER_URL}")
