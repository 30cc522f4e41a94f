"""Celery tasks: thin wrappers that take an id and call a service."""

from __future__ import annotations

from celery import shared_task

from . import reaper, services, shards


@shared_task(name=services.EVALUATE_TASK, acks_late=True, reject_on_worker_lost=True)
def evaluate_run(run_id: int) -> None:
    """Evaluate one run. The message carries only the id; the row is the truth, so a
    redelivered or duplicate message does nothing to a finished or live run."""
    services.evaluation_run_execute(run_id=run_id)


@shared_task(name=shards.SHARD_TASK, acks_late=True, reject_on_worker_lost=True)
def evaluate_shard(shard_id: int) -> None:
    """Evaluate one shard of a run (its own operators); the last one merges the run. Like
    ``evaluate_run``, a redelivered or duplicate message does nothing."""
    shards.shard_execute(shard_id=shard_id)


@shared_task(name="submissions.reap_runs", acks_late=False)
def reap_runs() -> str:
    """Re-queue runs whose worker died and re-send queued runs the broker lost (beat)."""
    return str(reaper.runs_reap())
