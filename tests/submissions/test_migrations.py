"""Migration 0006_every_run_in_shards: a run queued or running on the earlier unsharded
path becomes a run of one shard that carries its state, so the one run path (and the
reaper) go on with it after the upgrade."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

BEFORE = [("submissions", "0005_operator_wall_time")]
AFTER = [("submissions", "0006_every_run_in_shards")]


@pytest.fixture(autouse=True)
def _latest_migrations_after_the_test(db):
    """Leave the test database at the latest migrations (the test stops at 0006): later
    tests on this process would otherwise miss every column added since."""
    yield
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())


@pytest.mark.django_db(transaction=True)
def test_unfinished_unsharded_runs_get_one_shard_with_their_state(catalogue, user):
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    old = executor.loader.project_state(BEFORE).apps
    Submission = old.get_model("submissions", "Submission")
    EvaluationRun = old.get_model("submissions", "EvaluationRun")
    submission = Submission.objects.create(
        owner_id=user.pk,
        title="before the upgrade",
        suite_version_id=catalogue.pk,
        hardware_id=old.get_model("leaderboard", "HardwareProfile").objects.first().pk,
        status="running",
    )
    beat = timezone.now() - timedelta(seconds=5)
    running = EvaluationRun.objects.create(
        submission=submission,
        attempt=1,
        status="running",
        queue="eval.cpu-dev",
        worker="gpu-node-7:4242",
        shapes_total=9,
        shapes_done=4,
        started_at=beat,
        heartbeat_at=beat,
        dispatched_at=beat,
        dispatch_count=2,
    )
    finished = EvaluationRun.objects.create(
        submission=submission, attempt=2, status="succeeded", queue="eval.cpu-dev"
    )

    executor = MigrationExecutor(connection)
    executor.migrate(AFTER)
    new = executor.loader.project_state(AFTER).apps
    Shard = new.get_model("submissions", "Shard")
    run = new.get_model("submissions", "EvaluationRun").objects.get(pk=running.pk)
    shard = Shard.objects.get(run_id=run.pk)
    assert run.shard_count == 1 and run.seed is not None
    assert (shard.index, shard.attempt, shard.status, shard.worker) == (
        0,
        1,
        "running",
        "gpu-node-7:4242",
    )
    assert (shard.heartbeat_at, shard.dispatched_at, shard.dispatch_count) == (beat, beat, 2)
    assert (shard.shapes_total, shard.shapes_done) == (9, 4)
    assert shard.operators == [op["slug"] for op in catalogue.definition["operators"]]
    # A finished run keeps no shard: nothing is left to run.
    assert not Shard.objects.filter(run_id=finished.pk).exists()
    fields = {f.name for f in new.get_model("submissions", "EvaluationRun")._meta.fields}
    assert not fields & {"heartbeat_at", "dispatched_at", "dispatch_count"}
