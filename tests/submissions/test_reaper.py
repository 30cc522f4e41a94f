"""The reaper and the idempotent task, against the real database: lost workers' runs are
re-queued as new attempts, lost messages re-sent, live runs left alone, finished runs never
run twice, and past the attempt cap the submission fails with a refunded platform error."""

from __future__ import annotations

import io
import os
import socket
import subprocess
import sys
import zipfile
from datetime import timedelta
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.utils import timezone

from submissions import evaluation, services
from submissions.models import EvaluationRun, OperatorResult, Submission
from submissions.quotas import submissions_counted
from submissions.reaper import runs_reap

pytestmark = pytest.mark.django_db

Status = Submission.Status
RunStatus = EvaluationRun.Status
MODULE = (
    "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x\n"
)


def _upload() -> SimpleUploadedFile:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("silu_and_mul.py", MODULE)
    return SimpleUploadedFile("kernels.zip", buffer.getvalue(), "application/zip")


@pytest.fixture
def queued(catalogue, user):
    """A new submission's queued run (its message is not sent: on_commit does not run)."""

    def make(upload=None) -> EvaluationRun:
        submission = services.submission_create(owner=user, upload=upload or _upload())
        assert submission.status == Status.QUEUED
        return submission.runs.get()

    return make


def _running(run: EvaluationRun, *, worker: str, heartbeat_age_s: float) -> EvaluationRun:
    """Claim the run, then make it look held by ``worker``, last heard of that long ago."""
    claimed = services.evaluation_run_claim(run_id=run.pk)
    assert claimed is not None and claimed.status == RunStatus.RUNNING
    EvaluationRun.objects.filter(pk=claimed.pk).update(
        worker=worker, heartbeat_at=timezone.now() - timedelta(seconds=heartbeat_age_s)
    )
    claimed.refresh_from_db()
    return claimed


def _dead_pid() -> int:
    finished = subprocess.Popen([sys.executable, "-c", "pass"])  # noqa: S603
    finished.wait()
    return finished.pid


def _history(submission: Submission) -> list[str]:
    return [f"{c.from_status}>{c.to_status}" for c in submission.history.all()]


def test_stale_run_is_declared_lost_and_requeued_as_a_new_attempt(
    queued, settings, django_capture_on_commit_callbacks
):
    stale_s = settings.ATREX["HEARTBEAT_STALE_S"]
    run = _running(queued(), worker="gpu-node-7:4242", heartbeat_age_s=stale_s + 5)
    with django_capture_on_commit_callbacks(execute=False) as sent:
        report = runs_reap()
    assert report.requeued == [run.pk] and not report.failed
    run.refresh_from_db()
    assert run.status == RunStatus.LOST and run.error_code == "platform:worker-lost"
    assert "gpu-node-7:4242" in run.error_message
    submission = Submission.objects.get(pk=run.submission_id)
    assert submission.status == Status.QUEUED
    retry = submission.runs.get(attempt=2)
    assert retry.status == RunStatus.QUEUED and retry.dispatch_count == 1
    assert len(sent) == 1  # the new attempt's id goes to the queue once committed
    assert _history(submission)[-2:] == ["queued>running", "running>queued"]


def test_run_with_a_fresh_heartbeat_is_left_alone(queued):
    run = _running(queued(), worker="gpu-node-7:4242", heartbeat_age_s=0)
    report = runs_reap()
    assert not (report.requeued or report.resent or report.failed)
    run.refresh_from_db()
    assert run.status == RunStatus.RUNNING


def test_attempt_cap_fails_the_submission_with_a_refunded_platform_error(queued, settings, user):
    settings.ATREX = {**settings.ATREX, "MAX_ATTEMPTS": 2}
    run = queued()
    for _ in range(2):
        _running(run, worker="gpu-node-7:4242", heartbeat_age_s=3600)
        runs_reap()
        run = Submission.objects.get(pk=run.submission_id).runs.order_by("-attempt").first()
    submission = Submission.objects.get(pk=run.submission_id)
    assert submission.status == Status.FAILED
    assert submission.error_code == "platform:worker-lost"
    assert "does not count against your quota" in submission.error_message
    assert list(submission.runs.values_list("status", flat=True)) == ["lost", "lost"]
    assert not submissions_counted(owner=user).filter(pk=submission.pk).exists()


def test_queued_run_whose_message_was_lost_is_sent_again(
    queued, settings, django_capture_on_commit_callbacks
):
    run = queued()
    grace_s = settings.ATREX["QUEUED_GRACE_S"]
    EvaluationRun.objects.filter(pk=run.pk).update(
        dispatched_at=timezone.now() - timedelta(seconds=grace_s + 1)
    )
    with django_capture_on_commit_callbacks(execute=False) as sent:
        report = runs_reap()
    assert report.resent == [run.pk]
    run.refresh_from_db()
    assert run.status == RunStatus.QUEUED and run.dispatch_count == 2 and len(sent) == 1


def test_queued_run_waiting_behind_an_older_live_run_is_not_sent_again(queued, settings):
    older = queued()
    _running(older, worker="gpu-node-7:4242", heartbeat_age_s=0)
    waiting = queued()
    EvaluationRun.objects.filter(pk=waiting.pk).update(
        dispatched_at=timezone.now() - timedelta(seconds=settings.ATREX["QUEUED_GRACE_S"] + 1)
    )
    assert runs_reap().resent == []


def test_queued_run_that_no_worker_takes_fails_at_the_cap(queued, settings):
    run = queued()
    EvaluationRun.objects.filter(pk=run.pk).update(
        dispatch_count=settings.ATREX["MAX_ATTEMPTS"],
        dispatched_at=timezone.now() - timedelta(seconds=settings.ATREX["QUEUED_GRACE_S"] + 1),
    )
    report = runs_reap()
    submission = Submission.objects.get(pk=run.submission_id)
    assert report.failed == [submission.pk]
    assert submission.status == Status.FAILED and submission.error_code == "platform:queue-lost"
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED


def test_redelivered_message_for_a_finished_run_does_nothing(queued):
    run = queued()
    services.evaluation_run_claim(run_id=run.pk)
    EvaluationRun.objects.filter(pk=run.pk).update(status=RunStatus.SUCCEEDED)
    assert services.evaluation_run_claim(run_id=run.pk) is None
    assert Submission.objects.get(pk=run.submission_id).runs.count() == 1


def test_redelivered_message_for_a_run_a_live_worker_holds_does_nothing(queued):
    run = _running(queued(), worker="gpu-node-7:4242", heartbeat_age_s=0)
    assert services.evaluation_run_claim(run_id=run.pk) is None
    run.refresh_from_db()
    assert run.status == RunStatus.RUNNING and run.worker == "gpu-node-7:4242"


def test_redelivered_message_for_a_run_whose_worker_died_takes_it_over(queued):
    # Fresh heartbeat, but the holder was a process of this host that no longer exists.
    dead = f"{socket.gethostname()}:{_dead_pid()}"
    run = _running(queued(), worker=dead, heartbeat_age_s=0)
    taken = services.evaluation_run_claim(run_id=run.pk)
    assert taken is not None and taken.pk != run.pk and taken.attempt == 2
    assert taken.status == RunStatus.RUNNING and taken.worker == services.worker_identity()
    run.refresh_from_db()
    assert run.status == RunStatus.LOST
    submission = Submission.objects.get(pk=run.submission_id)
    assert submission.status == Status.RUNNING
    assert _history(submission)[-3:] == ["queued>running", "running>queued", "queued>running"]


def test_heartbeat_writes_progress_and_stops_a_run_that_was_replaced(queued):
    run = _running(queued(), worker="gpu-node-7:4242", heartbeat_age_s=100)
    beat = services.RunHeartbeat(run)
    beat({"event": "start", "shapes_total": 3})
    run.refresh_from_db()
    assert run.shapes_total == 3
    assert (timezone.now() - run.heartbeat_at).total_seconds() < 5
    EvaluationRun.objects.filter(pk=run.pk).update(status=RunStatus.LOST)
    with pytest.raises(services.RunTakenOver):
        beat({"event": "shape", "shapes_done": 1})


def test_results_of_a_replaced_run_are_not_stored(queued):
    run = _running(queued(), worker="gpu-node-7:4242", heartbeat_age_s=3600)
    runs_reap()  # declared lost: attempt 2 is queued
    late = evaluation.EvaluatorOutcome(
        returncode=0,
        results={"operators": [{"operator": "silu_and_mul", "status": "ok", "shapes": []}]},
        log_tail="",
    )
    services._run_store_and_score(run, late)  # the old worker comes back with results
    run.refresh_from_db()
    assert run.status == RunStatus.LOST
    assert not OperatorResult.objects.filter(run__submission_id=run.submission_id).exists()
    assert Submission.objects.get(pk=run.submission_id).status == Status.QUEUED


def _processes_in(folder: Path) -> list[int]:
    found = []
    for cwd in Path("/proc").glob("[0-9]*/cwd"):
        try:
            if Path(os.readlink(cwd)).resolve() == folder.resolve():
                found.append(int(cwd.parent.name))
        except OSError:
            continue
    return found


def test_evaluator_child_is_stopped_when_the_heartbeat_says_the_run_is_lost(catalogue, tmp_path):
    bundle = tmp_path / "silu_and_mul.py"
    bundle.write_text(MODULE)
    job = evaluation.EvaluatorJob(
        bundle_path=bundle,
        suite_definition=catalogue.definition,
        hardware_slug="cpu-dev",
        device="cpu",
        work_dir=tmp_path / "run",
        timeout_s=120,
    )

    def lost(event: dict) -> None:
        if event.get("event") == "heartbeat":
            raise services.RunTakenOver("replaced")

    with pytest.raises(services.RunTakenOver):
        evaluation.run_evaluator(job, on_progress=lost)
    assert _processes_in(job.work_dir) == []


def test_reap_runs_command_reports_what_it_did(queued):
    _running(queued(), worker="gpu-node-7:4242", heartbeat_age_s=3600)
    out = io.StringIO()
    call_command("reap_runs", stdout=out)
    assert "1 lost runs re-queued" in out.getvalue()


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_task_for_a_dead_workers_run_evaluates_a_new_attempt_to_the_end(
    catalogue, user, example_zip, held_messages
):
    submission = services.submission_create(
        owner=user, upload=example_zip("triton-baseline", only=["rms_norm.py"])
    )
    run = _running(
        submission.runs.get(),
        worker=f"{socket.gethostname()}:{_dead_pid()}",
        heartbeat_age_s=0,
    )
    services.evaluation_run_execute(run_id=run.pk)  # the redelivered message
    submission.refresh_from_db()
    assert submission.status == Status.PUBLISHED, submission.error_message
    runs = list(submission.runs.order_by("attempt").values_list("attempt", "status"))
    assert runs == [(1, "lost"), (2, "succeeded")]
    assert submission.score.run.attempt == 2
    assert (
        OperatorResult.objects.filter(run__submission=submission, operator="rms_norm").count() == 1
    )
