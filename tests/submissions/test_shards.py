"""Shards: a run's operators split over several workers, each shard retried alone, merged
once into one published run. Against the real database, the real evaluator and (slow
tests) real Celery worker processes on the real broker."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import connection
from django.utils import timezone

from atrex_site.celery import app as celery_app
from submissions import evaluation, planning, run_split, services, shards
from submissions.models import (
    EvaluationRun,
    OperatorResult,
    Score,
    Shard,
    StatusChange,
    Submission,
)
from submissions.quotas import submissions_counted
from submissions.reaper import runs_reap
from tests.conftest import _database_url, wait_for_status
from tests.factories import WorkerNodeFactory

Status = Submission.Status
ShardStatus = Shard.Status
SUITE_OPERATORS = ["fused_add_rms_norm", "rms_norm", "silu_and_mul"]
TWO_OPERATORS = ["fused_add_rms_norm.py", "rms_norm.py"]


@pytest.fixture
def sharded(settings):
    settings.ATREX = {**settings.ATREX, "SHARDS_PER_RUN": 2}


def _submit(user, example_zip) -> Submission:
    submission = services.submission_create(
        owner=user, upload=example_zip("triton-baseline", only=TWO_OPERATORS)
    )
    assert submission.status == Status.QUEUED, submission.error_message
    return submission


# --- The split ------------------------------------------------------------------------------


def test_plan_balances_shards_by_shape_count():
    costs = {"a": 5, "b": 3, "c": 3, "d": 2, "e": 0}
    plan = planning.shard_plan(operators=list(costs), costs=costs, count=2)
    assert sorted(op for shard in plan for op in shard) == sorted(costs)
    loads = sorted(sum(costs[op] for op in shard) for shard in plan)
    assert loads == [6, 7]
    # Each shard keeps the given order; one shard is everything; never an empty shard.
    assert all(shard == sorted(shard) for shard in plan)
    assert planning.shard_plan(operators=list(costs), costs=costs, count=1) == [list(costs)]
    assert len(planning.shard_plan(operators=["a", "b"], costs=costs, count=8)) == 2


@pytest.mark.django_db
def test_auto_shards_follow_the_free_workers_of_the_hardware(
    catalogue, user, example_zip, settings
):
    from fleet.models import WorkerNode

    settings.ATREX = {**settings.ATREX, "SHARDS_PER_RUN": "auto"}
    three = [f"{op}.py" for op in SUITE_OPERATORS]

    def submit() -> EvaluationRun:
        submission = services.submission_create(
            owner=user, upload=example_zip("triton-baseline", only=three)
        )
        assert submission.status == Status.QUEUED, submission.error_message
        return submission.runs.get()

    first = submit()  # no worker registered: one shard
    assert first.shard_count == 1
    now = timezone.now()
    hardware = first.submission.hardware.slug

    def worker(name: str, **fields) -> None:
        values = {
            "hostname": "node",
            "hardware_profile": hardware,
            "started_at": now,
            "last_heartbeat_at": now,
            "status": WorkerNode.Status.ONLINE,
            **fields,
        }
        WorkerNode.objects.create(name=name, **values)

    for index in range(5):
        worker(f"gpu{index}@node")
    worker("stale@node", last_heartbeat_at=now - timedelta(hours=1))  # none of these count
    worker("stopped@node", status=WorkerNode.Status.STOPPED)
    worker("other@node", hardware_profile="some-other-gpu")
    # Five online, the first run still queued for one of them: four free, three operators.
    second = submit()
    assert second.shard_count == 3
    assert sorted(op for part in second.shards.all() for op in part.operators) == sorted(
        SUITE_OPERATORS
    )
    # Now the first run and the three shards wait for four of the five: one free, one shard.
    assert submit().shard_count == 1
    assert run_split.free_workers(hardware_profile=hardware, queue=first.queue) == 0


@pytest.mark.django_db
def test_shards_are_balanced_by_each_operators_measured_wall_time(
    catalogue, user, example_zip, settings
):
    three = [f"{op}.py" for op in SUITE_OPERATORS]

    def plan() -> list[list[str]]:
        settings.ATREX = {**settings.ATREX, "SHARDS_PER_RUN": 2}
        submission = services.submission_create(
            owner=user, upload=example_zip("triton-baseline", only=three)
        )
        assert submission.status == Status.QUEUED, submission.error_message
        return [part.operators for part in submission.runs.get().shards.order_by("index")]

    # No history: three operators of 3 smoke shapes each, split by shape count.
    assert plan() == [["fused_add_rms_norm", "silu_and_mul"], ["rms_norm"]]
    # History on this queue and suite version: fused_add_rms_norm is the slow one, so it
    # gets a shard of its own (the median of its runs counts, not one outlier).
    settings.ATREX = {**settings.ATREX, "SHARDS_PER_RUN": 1}
    for wall in (40.0, 45.0, 1.0):
        earlier = services.submission_create(
            owner=user, upload=example_zip("triton-baseline", only=three)
        ).runs.get()
        for operator, factor in (("fused_add_rms_norm", 1.0), ("rms_norm", 0.2)):
            OperatorResult.objects.create(
                run=earlier, operator=operator, status="ok", wall_s=wall * factor
            )
    assert plan() == [["fused_add_rms_norm"], ["rms_norm", "silu_and_mul"]]
    # silu_and_mul has no history: its shape count at the others' median seconds per shape.
    costs = run_split.operator_costs(
        queue=earlier.queue,
        suite_version_id=earlier.submission.suite_version_id,
        shapes={"fused_add_rms_norm": 3, "rms_norm": 3, "silu_and_mul": 6},
    )
    assert costs["fused_add_rms_norm"] == 40.0 and costs["rms_norm"] == pytest.approx(8.0)
    assert costs["silu_and_mul"] == pytest.approx(6 * (40.0 / 3 + 8.0 / 3) / 2)
    # Another queue's history does not count there.
    assert run_split.operator_costs(
        queue="eval.elsewhere",
        suite_version_id=earlier.submission.suite_version_id,
        shapes={"rms_norm": 3, "silu_and_mul": 6},
    ) == {"rms_norm": 3.0, "silu_and_mul": 6.0}


@pytest.mark.django_db
def test_enqueue_splits_the_run_into_shards_of_every_suite_operator(
    catalogue, user, example_zip, sharded
):
    run = _submit(user, example_zip).runs.get()
    parts = list(run.shards.order_by("index"))
    assert run.shard_count == len(parts) == 2
    operators = [op for part in parts for op in part.operators]
    assert sorted(operators) == sorted(SUITE_OPERATORS)  # each once
    # Balanced: each shard holds one of the two implemented operators (3 shapes each).
    assert all({"fused_add_rms_norm", "rms_norm"} & set(part.operators) for part in parts)
    assert run.seed is not None and run.shapes_total == 9
    assert all(p.status == ShardStatus.QUEUED and p.dispatch_count == 1 for p in parts)


@pytest.mark.django_db
def test_one_shard_per_run_is_one_shard_of_every_operator(
    catalogue, user, example_zip, settings, django_capture_on_commit_callbacks
):
    settings.ATREX = {**settings.ATREX, "SHARDS_PER_RUN": 1}
    with django_capture_on_commit_callbacks(execute=False) as sent:
        run = _submit(user, example_zip).runs.get()
    part = run.shards.get()
    assert run.shard_count == 1 and part.index == 0 and part.attempt == 1
    assert part.operators == SUITE_OPERATORS and part.shapes_total == run.shapes_total == 9
    assert run.seed is not None and len(sent) == 1  # one message, carrying the run's id


# --- Claims, redelivery, the reaper -----------------------------------------------------------


def _claim(shard: Shard, *, worker="elsewhere:1", heartbeat_age_s=0.0) -> Shard:
    claimed = shards.shard_claim(shard_id=shard.pk)
    assert claimed is not None and claimed.status == ShardStatus.RUNNING
    Shard.objects.filter(pk=shard.pk).update(
        worker=worker, heartbeat_at=timezone.now() - timedelta(seconds=heartbeat_age_s)
    )
    claimed.refresh_from_db()
    return claimed


@pytest.mark.django_db
def test_claim_moves_the_run_once_and_redelivered_messages_do_nothing(
    catalogue, user, example_zip, sharded
):
    submission = _submit(user, example_zip)
    first, second = submission.runs.get().shards.order_by("index")
    _claim(first)
    submission.refresh_from_db()
    assert submission.status == Status.RUNNING
    _claim(second)
    # Held by a live worker (elsewhere, fresh heartbeat): a duplicate message is a no-op.
    assert shards.shard_claim(shard_id=first.pk) is None
    Shard.objects.filter(pk=second.pk).update(status=ShardStatus.SUCCEEDED)
    assert shards.shard_claim(shard_id=second.pk) is None
    assert Shard.objects.filter(run=first.run_id).count() == 2
    history = list(submission.history.values_list("to_status", flat=True))
    assert history.count(Status.RUNNING) == 1
    # A message carrying the run's id finds no queued shard and no dead holder: nothing.
    assert shards.shard_claim(run_id=first.run_id) is None
    assert Shard.objects.filter(run=first.run_id).count() == 2


@pytest.mark.django_db
def test_reaper_redoes_only_the_stale_shard_then_fails_at_the_cap(
    catalogue, user, example_zip, sharded, settings
):
    settings.ATREX = {**settings.ATREX, "MAX_ATTEMPTS": 2}
    submission = _submit(user, example_zip)
    run = submission.runs.get()
    first, second = run.shards.order_by("index")
    _claim(first, heartbeat_age_s=3600)
    _claim(second)
    Shard.objects.filter(pk=second.pk).update(
        status=ShardStatus.SUCCEEDED, results={"operators": []}, finished_at=timezone.now()
    )
    second.refresh_from_db()

    report = runs_reap()
    assert report.requeued == [first.pk] and report.failed == []
    first.refresh_from_db()
    assert first.status == ShardStatus.LOST and first.error_code == services.WorkerLost.code
    retry = Shard.objects.get(run=run, index=first.index, attempt=2)
    assert retry.status == ShardStatus.QUEUED and retry.operators == first.operators
    kept = Shard.objects.get(pk=second.pk)
    assert (kept.status, kept.finished_at, kept.results) == (
        ShardStatus.SUCCEEDED,
        second.finished_at,
        second.results,
    )
    assert Shard.objects.filter(run=run, index=second.index).count() == 1
    submission.refresh_from_db()
    assert submission.status == Status.RUNNING

    # The second try dies too: past the cap the submission fails, refunded.
    _claim(retry, heartbeat_age_s=3600)
    report = runs_reap()
    assert report.failed == [submission.pk]
    submission.refresh_from_db()
    run.refresh_from_db()
    assert submission.status == Status.FAILED
    assert submission.error_code == services.WorkerLost.code
    assert run.status == EvaluationRun.Status.FAILED
    assert not submissions_counted(owner=user).filter(pk=submission.pk).exists()
    assert Shard.objects.filter(run=run).count() == 3  # no third try


@pytest.mark.django_db
def test_queued_shard_whose_message_was_lost_is_sent_again_then_fails(
    catalogue, user, example_zip, sharded, settings
):
    WorkerNodeFactory()  # the queue is served: a shard nobody takes lost its message
    submission = _submit(user, example_zip)
    first, second = submission.runs.get().shards.order_by("index")
    old = timezone.now() - timedelta(seconds=settings.ATREX["QUEUED_GRACE_S"] + 60)
    Shard.objects.filter(pk=first.pk).update(dispatched_at=old)
    report = runs_reap()
    assert report.resent == [first.pk]
    first.refresh_from_db()
    second.refresh_from_db()
    assert first.dispatch_count == 2 and second.dispatch_count == 1
    Shard.objects.filter(pk=first.pk).update(
        dispatched_at=old, dispatch_count=settings.ATREX["MAX_ATTEMPTS"]
    )
    report = runs_reap()
    assert report.failed == [submission.pk]
    submission.refresh_from_db()
    assert submission.status == Status.FAILED
    assert submission.error_code == services.QueueLost.code
    assert Shard.objects.get(pk=second.pk).status == ShardStatus.CANCELLED


@pytest.mark.django_db
def test_heartbeat_sums_progress_and_stops_a_replaced_shard(catalogue, user, example_zip, sharded):
    run = _submit(user, example_zip).runs.get()
    first, second = run.shards.order_by("index")
    _claim(first)
    _claim(second)
    shards.ShardHeartbeat(first)({"shapes_total": 6, "shapes_done": 2})
    shards.ShardHeartbeat(second)({"shapes_total": 3, "shapes_done": 1})
    run.refresh_from_db()
    assert (run.shapes_done, run.shapes_total) == (3, 9)
    Shard.objects.filter(pk=first.pk).update(status=ShardStatus.LOST)
    with pytest.raises(services.RunTakenOver):
        shards.ShardHeartbeat(first)({"shapes_done": 3})


@pytest.mark.django_db
def test_platform_failure_of_a_shard_retries_it_alone_and_a_bundle_error_fails_all(
    catalogue, user, example_zip, sharded
):
    submission = _submit(user, example_zip)
    run = submission.runs.get()
    first, second = (_claim(part) for part in run.shards.order_by("index"))
    crash = evaluation.EvaluatorCrashed("the evaluator exited with code -9")
    retry = shards.shard_retry(
        shard=first,
        from_status=ShardStatus.RUNNING,
        to_status=ShardStatus.FAILED,
        error=crash,
        reason=crash.message,
    )
    assert retry is not None and (retry.index, retry.attempt) == (first.index, 2)
    assert Shard.objects.get(pk=second.pk).status == ShardStatus.RUNNING
    submission.refresh_from_db()
    assert submission.status == Status.RUNNING
    # A bundle error (as the evaluator writes it in results.json) fails the submission, and
    # the other shards stop (their next heartbeat finds them cancelled).
    outcome = evaluation.EvaluatorOutcome(
        returncode=2,
        results={"error": {"code": "bundle:bad-archive", "message": "not a zip file"}},
        log_tail="",
    )
    shards.shard_store(second, outcome)
    submission.refresh_from_db()
    assert (submission.status, submission.error_code) == (Status.FAILED, "bundle:bad-archive")
    assert submissions_counted(owner=user).filter(pk=submission.pk).exists()  # not refunded
    assert Shard.objects.get(pk=retry.pk).status == ShardStatus.CANCELLED
    assert shards.shard_claim(shard_id=retry.pk) is None


# --- The merge ----------------------------------------------------------------------------


def _evaluate(shard: Shard, outcomes: dict, errors: list) -> None:
    from django.conf import settings  # the tests' ``settings`` fixture shadows the name

    try:
        run = shard.run
        job = evaluation.EvaluatorJob(
            bundle_path=run.submission.upload.path,
            suite_definition=run.submission.suite_version.definition,
            hardware_slug=run.submission.hardware.slug,
            device="cpu",
            work_dir=Path(run.submission.upload.path).parent / f"shard-{shard.index}",
            timeout_s=240,
            extra_args=[
                # The worker's per-shape budget (shard_execute), not the evaluator's 2 s.
                *["--time-budget-s", str(settings.ATREX["TIME_BUDGET_S"])],
                *["--operators", ",".join(shard.operators), "--seed", str(run.seed)],
            ],
        )
        outcomes[shard.pk] = evaluation.run_evaluator(job)
    except Exception as error:  # noqa: BLE001 - reported by the test
        errors.append(error)
    finally:
        connection.close()


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_two_shards_finishing_at_once_merge_and_publish_once(
    catalogue, user, example_zip, sharded, monkeypatch
):
    # The shards stay off the broker: this test claims them itself, and a worker of an
    # earlier test still shutting down must not take one first. What would be sent is kept.
    sent: list[int] = []
    monkeypatch.setattr(services, "evaluation_run_dispatch", lambda *, run: sent.append(run.pk))
    submission = _submit(user, example_zip)
    run = submission.runs.get()
    assert sent == [run.pk] * run.shards.count()  # the run's id once per shard
    parts = [_claim(part) for part in run.shards.order_by("index")]
    parts = [Shard.objects.select_related("run__submission").get(pk=p.pk) for p in parts]
    outcomes: dict = {}
    errors: list = []
    threads = [threading.Thread(target=_evaluate, args=(p, outcomes, errors)) for p in parts]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    barrier = threading.Barrier(len(parts))

    def store(shard: Shard) -> None:
        try:
            barrier.wait()
            shards.shard_store(shard, outcomes[shard.pk])
        except Exception as error:  # noqa: BLE001 - reported by the test
            errors.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=store, args=(p,)) for p in parts]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    submission.refresh_from_db()
    run.refresh_from_db()
    assert submission.status == Status.PUBLISHED, submission.error_message
    assert StatusChange.objects.filter(submission=submission, to_status=Status.SCORING).count() == 1
    assert Score.objects.filter(submission=submission, run=run).count() == 1
    assert (
        StatusChange.objects.filter(submission=submission, to_status=Status.PUBLISHED).count() == 1
    )
    assert run.status == EvaluationRun.Status.SUCCEEDED
    assert sorted(run.operator_results.values_list("operator", flat=True)) == SUITE_OPERATORS
    assert run.shapes_done == run.shapes_total == 9
    assert [s["index"] for s in run.environment["shards"]] == [0, 1]
    assert [e["operator"] for e in run.results["operators"]] == SUITE_OPERATORS
    assert run.results["scores"]["shapes_passed"] == 6
    assert _operator_table(run) == TWO_OPERATORS_TABLE
    # A late duplicate store (a retried commit) changes nothing.
    shards.shard_store(parts[0], outcomes[parts[0].pk])
    assert StatusChange.objects.filter(submission=submission, to_status=Status.SCORING).count() == 1


# --- Real workers -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def two_workers(
    django_db_setup, close_other_db_sessions_at_the_end, django_db_blocker, tmp_path_factory
):
    """Two real Celery worker processes on the CPU profile's queue (concurrency 1 each).
    Yields [(process, log path)]."""
    queue = "eval.cpu-dev"
    with django_db_blocker.unblock():
        url = _database_url()
    with celery_app.connection_for_write() as conn:
        try:
            conn.default_channel.queue_purge(queue)
        except Exception:  # noqa: BLE001 - an absent queue has nothing to purge
            pass
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "atrex_site.settings.test",
        "DATABASE_URL": url,
        "ATREX_TEST_REQUIRE_SERVICES": "0",
    }
    workers = []
    for number in range(2):
        log_path = tmp_path_factory.mktemp(f"shard-worker-{number}") / "worker.log"
        with log_path.open("wb") as log:
            process = subprocess.Popen(
                [sys.executable, "-m", "celery", "-A", "atrex_site", "worker", "-Q", queue,
                 "--concurrency", "1", "--loglevel", "INFO",
                 "-n", f"shard-test-{number}-{os.getpid()}@%h",
                 "--without-gossip", "--without-mingle", "--without-heartbeat"],
                env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        workers.append((process, log_path))
    time.sleep(2.0)
    for process, log_path in workers:
        if process.poll() is not None:
            raise RuntimeError(f"a Celery worker exited at once:\n{log_path.read_text()}")
    yield workers
    for process, _ in workers:
        os.killpg(process.pid, signal.SIGTERM)
    for process, _ in workers:
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def _logs(workers) -> str:
    return "\n".join(path.read_text(errors="replace") for _, path in workers)


# What a run of TWO_OPERATORS publishes, one shard or several: each operator's status and
# its shapes' (the suite's third operator is not in the bundle).
TWO_OPERATORS_TABLE = {
    "fused_add_rms_norm": ("ok", [(f"smoke-{i}", "pass") for i in range(3)]),
    "rms_norm": ("ok", [(f"smoke-{i}", "pass") for i in range(3)]),
    "silu_and_mul": ("missing", [(f"smoke-{i}", "missing") for i in range(3)]),
}


def _operator_table(run: EvaluationRun) -> dict:
    return {
        r.operator: (r.status, sorted(run.shape_results.filter(operator=r.operator).values_list(
            "shape_id", "status")))
        for r in run.operator_results.all()
    }  # fmt: skip


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_two_workers_run_two_shards_in_parallel_and_publish_what_one_task_does(
    catalogue, user, example_zip, sharded, two_workers
):
    split = _submit(user, example_zip)
    wait_for_status(split, Submission.FINAL_STATUSES, timeout_s=120)
    assert split.status == Status.PUBLISHED, (split.error_message, _logs(two_workers)[-3000:])
    run = split.runs.get()
    parts = list(run.shards.order_by("index"))
    assert [p.status for p in parts] == [ShardStatus.SUCCEEDED] * 2
    # Two workers, at the same time.
    assert parts[0].worker != parts[1].worker
    assert parts[0].started_at < parts[1].finished_at and parts[1].started_at < parts[0].finished_at
    # The same operators, statuses and shapes as one task's run: a run of one shard takes
    # the same path (tests/submissions/test_worker.py has a real worker publish one).
    assert _operator_table(run) == TWO_OPERATORS_TABLE
    assert run.shapes_done == run.shapes_total == 9

    # Redelivered messages (the run's, and shard ones of earlier versions) do nothing to
    # the finished shards or the run.
    before = [(p.status, p.finished_at, p.attempt) for p in parts]
    for part in parts:
        celery_app.send_task(services.EVALUATE_TASK, args=[run.pk], queue=run.queue)
        celery_app.send_task(shards.SHARD_TASK, args=[part.pk], queue=run.queue)
    # Taken off the queue by a worker (these two, or another test's worker on the same
    # queue), then given time to run.
    deadline = time.monotonic() + 30
    with celery_app.connection_for_write() as conn:
        while conn.default_channel.client.llen(run.queue) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert conn.default_channel.client.llen(run.queue) == 0
    time.sleep(3.0)
    after = [(p.status, p.finished_at, p.attempt) for p in run.shards.order_by("index")]
    assert after == before and run.shards.count() == 2
    split.refresh_from_db()
    assert split.status == Status.PUBLISHED
    assert StatusChange.objects.filter(submission=split, to_status=Status.SCORING).count() == 1


def _kill_worker_child(pid: int) -> None:
    """SIGKILL a worker's pool process and its evaluator (which runs in its own group)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:  # ppid
            try:
                os.killpg(int(fields[2]), signal.SIGKILL)  # its process group
            except ProcessLookupError:
                pass
    os.kill(pid, signal.SIGKILL)


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_shard_whose_worker_is_killed_is_redone_alone(
    catalogue, user, example_zip, sharded, two_workers
):
    submission = _submit(user, example_zip)
    run = submission.runs.get()
    victim, other = run.shards.order_by("index")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        victim.refresh_from_db()
        if victim.status == ShardStatus.RUNNING and victim.started_at < timezone.now() - timedelta(
            seconds=2
        ):
            break
        time.sleep(0.2)
    assert victim.status == ShardStatus.RUNNING, victim.status
    host, _, pid = victim.worker.rpartition(":")
    _kill_worker_child(int(pid))
    # Its heartbeat stops; the reaper (or the redelivered message) redoes it.
    Shard.objects.filter(pk=victim.pk, status=ShardStatus.RUNNING).update(
        heartbeat_at=timezone.now() - timedelta(hours=1)
    )
    runs_reap()
    try:
        wait_for_status(submission, Submission.FINAL_STATUSES, timeout_s=120)
    finally:
        print(list(run.shards.values_list("index", "attempt", "status", "worker")))
        print(_logs(two_workers)[-6000:])
    assert submission.status == Status.PUBLISHED, submission.error_message
    victim.refresh_from_db()
    assert victim.status == ShardStatus.LOST
    redone = Shard.objects.filter(run=run, index=victim.index).order_by("attempt")
    assert [s.status for s in redone][-1] == ShardStatus.SUCCEEDED and redone.count() == 2
    # The other shard ran once; its results are the ones merged.
    assert list(Shard.objects.filter(run=run, index=other.index)) == [other]
    other.refresh_from_db()
    assert other.status == ShardStatus.SUCCEEDED and other.attempt == 1
    run.refresh_from_db()
    merged = {s["index"]: s["attempt"] for s in run.environment["shards"]}
    assert merged == {victim.index: 2, other.index: 1}
    assert sorted(run.operator_results.values_list("operator", flat=True)) == SUITE_OPERATORS
