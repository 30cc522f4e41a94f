"""The reaper and the idempotent task, against the real database, on runs that are not
split (one shard each): lost workers' shards are re-queued as new attempts, lost messages
re-sent, live shards left alone, finished ones never run twice, and past the attempt cap
the submission fails with a refunded platform error."""

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

from submissions import evaluation, services, shards
from submissions.models import EvaluationRun, OperatorResult, Shard, Submission
from submissions.quotas import submissions_counted
from submissions.reaper import runs_reap
from tests.factories import WorkerNodeFactory

pytestmark = pytest.mark.django_db

Status = Submission.Status
RunStatus = EvaluationRun.Status
ShardStatus = Shard.Status
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
    """A new submission's queued run, one shard (its message is not sent: on_commit does
    not run)."""

    def make(upload=None) -> EvaluationRun:
        submission = services.submission_create(owner=user, upload=upload or _upload())
        assert submission.status == Status.QUEUED
        run = submission.runs.get()
        assert run.shard_count == 1 and run.shards.get().status == ShardStatus.QUEUED
        return run

    return make


@pytest.fixture
def serving_worker(catalogue):
    """A worker for the CPU profile, online: the queue is served, so a shard nobody takes
    means its message was lost."""
    return WorkerNodeFactory()


def _running(run: EvaluationRun, *, worker: str, heartbeat_age_s: float) -> Shard:
    """Claim the run's shard (as its message would), then make it look held by ``worker``,
    last heard of that long ago."""
    claimed = shards.shard_claim(run_id=run.pk)
    assert claimed is not None and claimed.status == ShardStatus.RUNNING
    assert EvaluationRun.objects.get(pk=run.pk).status == RunStatus.RUNNING
    Shard.objects.filter(pk=claimed.pk).update(
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
    shard = _running(queued(), worker="gpu-node-7:4242", heartbeat_age_s=stale_s + 5)
    with django_capture_on_commit_callbacks(execute=False) as sent:
        report = runs_reap()
    assert report.requeued == [shard.pk] and not report.failed
    shard.refresh_from_db()
    assert shard.status == ShardStatus.LOST and shard.error_code == "platform:worker-lost"
    assert "gpu-node-7:4242" in shard.error_message
    submission = Submission.objects.get(pk=shard.run.submission_id)
    # The run goes on: its one shard is tried again as a new attempt.
    assert submission.status == Status.RUNNING
    retry = Shard.objects.get(run=shard.run_id, index=0, attempt=2)
    assert retry.status == ShardStatus.QUEUED and retry.dispatch_count == 1
    assert len(sent) == 1  # the new attempt's run id goes to the queue once committed
    assert _history(submission)[-1:] == ["queued>running"]


def test_run_with_a_fresh_heartbeat_is_left_alone(queued):
    shard = _running(queued(), worker="gpu-node-7:4242", heartbeat_age_s=0)
    report = runs_reap()
    assert not (report.requeued or report.resent or report.failed)
    shard.refresh_from_db()
    assert shard.status == ShardStatus.RUNNING and shard.run.status == RunStatus.RUNNING


def test_attempt_cap_fails_the_submission_with_a_refunded_platform_error(queued, settings, user):
    settings.ATREX = {**settings.ATREX, "MAX_ATTEMPTS": 2}
    run = queued()
    for _ in range(2):
        _running(run, worker="gpu-node-7:4242", heartbeat_age_s=3600)
        runs_reap()
    submission = Submission.objects.get(pk=run.submission_id)
    assert submission.status == Status.FAILED
    assert submission.error_code == "platform:worker-lost"
    assert "does not count against your quota" in submission.error_message
    assert list(run.shards.order_by("attempt").values_list("status", flat=True)) == [
        "lost",
        "lost",
    ]
    assert submission.runs.get().status == RunStatus.FAILED
    assert not submissions_counted(owner=user).filter(pk=submission.pk).exists()


def test_queued_run_whose_message_was_lost_is_sent_again(
    queued, settings, django_capture_on_commit_callbacks, serving_worker
):
    run = queued()
    grace_s = settings.ATREX["QUEUED_GRACE_S"]
    run.shards.update(dispatched_at=timezone.now() - timedelta(seconds=grace_s + 1))
    with django_capture_on_commit_callbacks(execute=False) as sent:
        report = runs_reap()
    shard = run.shards.get()
    assert report.resent == [shard.pk]
    run.refresh_from_db()
    assert run.status == RunStatus.QUEUED and shard.dispatch_count == 2 and len(sent) == 1


def test_queued_run_waiting_behind_an_older_live_run_is_not_sent_again(queued, settings):
    older = queued()
    _running(older, worker="gpu-node-7:4242", heartbeat_age_s=0)
    waiting = queued()
    waiting.shards.update(
        dispatched_at=timezone.now() - timedelta(seconds=settings.ATREX["QUEUED_GRACE_S"] + 1)
    )
    assert runs_reap().resent == []


def test_queued_run_that_no_worker_takes_fails_at_the_cap(queued, settings, serving_worker):
    run = queued()
    run.shards.update(
        dispatch_count=settings.ATREX["MAX_ATTEMPTS"],
        dispatched_at=timezone.now() - timedelta(seconds=settings.ATREX["QUEUED_GRACE_S"] + 1),
    )
    report = runs_reap()
    submission = Submission.objects.get(pk=run.submission_id)
    assert report.failed == [submission.pk]
    assert submission.status == Status.FAILED and submission.error_code == "platform:queue-lost"
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED


def test_a_queue_no_worker_serves_keeps_its_runs_waiting_and_tells_the_owner_once(
    queued, settings, user, mailoutbox
):
    user.email = "researcher@example.org"
    user.save()
    run = queued()
    long_ago = timezone.now() - timedelta(seconds=settings.ATREX["NO_WORKER_NOTICE_S"] + 60)
    EvaluationRun.objects.filter(pk=run.pk).update(created_at=long_ago)
    run.shards.update(
        dispatch_count=settings.ATREX["MAX_ATTEMPTS"],
        dispatched_at=timezone.now() - timedelta(seconds=settings.ATREX["QUEUED_GRACE_S"] + 1),
    )
    report = runs_reap()
    # Past the resend cap, yet not failed as lost: nobody could take it.
    assert report.failed == [] and report.resent == []
    assert report.unserved == [run.submission_id]
    submission = Submission.objects.get(pk=run.submission_id)
    assert submission.status == Status.QUEUED
    note = submission.history.last().note
    assert note.startswith("waiting: no worker for this hardware is online (CPU development")
    assert len(mailoutbox) == 1 and mailoutbox[0].to == ["researcher@example.org"]
    assert f"#{submission.pk}" in mailoutbox[0].subject
    assert runs_reap().unserved == [] and len(mailoutbox) == 1  # told once


def test_a_new_submission_without_a_worker_is_not_told_before_the_notice_time(queued):
    run = queued()
    assert runs_reap().unserved == []
    assert not run.submission.history.filter(note__startswith="waiting: no worker").exists()


def test_redelivered_message_for_a_finished_run_does_nothing(queued):
    run = queued()
    shard = shards.shard_claim(run_id=run.pk)
    Shard.objects.filter(pk=shard.pk).update(status=ShardStatus.SUCCEEDED)
    EvaluationRun.objects.filter(pk=run.pk).update(status=RunStatus.SUCCEEDED)
    assert shards.shard_claim(run_id=run.pk) is None
    assert shards.shard_claim(shard_id=shard.pk) is None
    assert Submission.objects.get(pk=run.submission_id).runs.count() == 1
    assert run.shards.count() == 1


def test_redelivered_message_for_a_run_a_live_worker_holds_does_nothing(queued):
    shard = _running(queued(), worker="gpu-node-7:4242", heartbeat_age_s=0)
    assert shards.shard_claim(run_id=shard.run_id) is None
    shard.refresh_from_db()
    assert shard.status == ShardStatus.RUNNING and shard.worker == "gpu-node-7:4242"


def test_redelivered_message_for_a_run_whose_worker_died_takes_it_over(queued):
    # Fresh heartbeat, but the holder was a process of this host that no longer exists.
    dead = f"{socket.gethostname()}:{_dead_pid()}"
    shard = _running(queued(), worker=dead, heartbeat_age_s=0)
    taken = shards.shard_claim(run_id=shard.run_id)
    assert taken is not None and taken.pk != shard.pk and taken.attempt == 2
    assert taken.status == ShardStatus.RUNNING and taken.worker == services.worker_identity()
    shard.refresh_from_db()
    assert shard.status == ShardStatus.LOST
    submission = Submission.objects.get(pk=shard.run.submission_id)
    assert submission.status == Status.RUNNING
    assert _history(submission)[-1:] == ["queued>running"]


def test_heartbeat_writes_progress_and_stops_a_run_that_was_replaced(queued):
    shard = _running(queued(), worker="gpu-node-7:4242", heartbeat_age_s=100)
    beat = shards.ShardHeartbeat(shard)
    beat({"event": "start", "shapes_total": 3})
    shard.refresh_from_db()
    assert shard.shapes_total == 3 and shard.run.shapes_total == 3
    assert (timezone.now() - shard.heartbeat_at).total_seconds() < 5
    Shard.objects.filter(pk=shard.pk).update(status=ShardStatus.LOST)
    with pytest.raises(services.RunTakenOver):
        beat({"event": "shape", "shapes_done": 1})


def test_results_of_a_replaced_run_are_not_stored(queued):
    shard = _running(queued(), worker="gpu-node-7:4242", heartbeat_age_s=3600)
    runs_reap()  # declared lost: attempt 2 is queued
    late = evaluation.EvaluatorOutcome(
        returncode=0,
        results={"operators": [{"operator": "silu_and_mul", "status": "ok", "shapes": []}]},
        log_tail="",
    )
    shards.shard_store(shard, late)  # the old worker comes back with results
    shard.refresh_from_db()
    assert shard.status == ShardStatus.LOST and shard.results is None
    assert not OperatorResult.objects.filter(run__submission_id=shard.run.submission_id).exists()
    submission = Submission.objects.get(pk=shard.run.submission_id)
    assert submission.status == Status.RUNNING
    assert Shard.objects.get(run=shard.run_id, attempt=2).status == ShardStatus.QUEUED


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
    assert "1 lost shards re-queued" in out.getvalue()


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_task_for_a_dead_workers_run_evaluates_a_new_attempt_to_the_end(
    catalogue, user, example_zip, held_messages
):
    submission = services.submission_create(
        owner=user, upload=example_zip("triton-baseline", only=["rms_norm.py"])
    )
    shard = _running(
        submission.runs.get(),
        worker=f"{socket.gethostname()}:{_dead_pid()}",
        heartbeat_age_s=0,
    )
    shards.shard_execute(run_id=shard.run_id)  # the redelivered message
    submission.refresh_from_db()
    assert submission.status == Status.PUBLISHED, submission.error_message
    tries = list(shard.run.shards.order_by("attempt").values_list("attempt", "status"))
    assert tries == [(1, "lost"), (2, "succeeded")]
    assert submission.score.run == shard.run and shard.run.shards.get(attempt=2).results
    assert (
        OperatorResult.objects.filter(run__submission=submission, operator="rms_norm").count() == 1
    )


def _fake_evaluator(calls: list):
    """Stands in for the evaluator's child: records the job and returns one operator's
    results (the task's routing is under test here, not the evaluator)."""

    def run_evaluator(job, on_progress=None):
        calls.append(job)
        on_progress({"event": "start", "shapes_total": 1})
        shape = {"shape_id": "0", "status": "runtime_error", "weight": 1.0, "error": "boom"}
        return evaluation.EvaluatorOutcome(
            returncode=0,
            results={
                "operators": [{"operator": "silu_and_mul", "status": "ok", "shapes": [shape]}],
                "environment": {"hostname": "here"},
                "harness_version": "test",
            },
            log_tail="child output",
        )

    return run_evaluator


@pytest.mark.parametrize("message", ["run", "shard"])
def test_either_tasks_message_gets_a_run_evaluated_through_its_shard(queued, monkeypatch, message):
    from submissions import tasks

    calls: list = []
    monkeypatch.setattr(evaluation, "run_evaluator", _fake_evaluator(calls))
    run = queued()
    if message == "run":
        tasks.evaluate_run(run.pk)  # what this site sends: the run's id
    else:
        tasks.evaluate_shard(run.shards.get().pk)  # what earlier versions sent
    run.refresh_from_db()
    submission = Submission.objects.get(pk=run.submission_id)
    assert submission.status == Status.PUBLISHED, submission.error_message
    assert run.status == RunStatus.SUCCEEDED and run.log_tail == "child output"
    assert run.environment == {"hostname": "here"}  # one shard: the document as written
    assert run.shards.get().status == ShardStatus.SUCCEEDED
    assert "--operators" in calls[0].extra_args and str(run.seed) in calls[0].extra_args
    # The same message again does nothing.
    tasks.evaluate_run(run.pk)
    assert len(calls) == 1 and submission.history.filter(to_status=Status.PUBLISHED).count() == 1
