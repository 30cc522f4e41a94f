"""Celery tasks: thin wrappers that take an id and call a service."""

from __future__ import annotations

from celery import shared_task

from . import reaper, services, shards


@shared_task(name=services.EVALUATE_TASK, acks_late=True, reject_on_worker_lost=True)
def evaluate_run(run_id: int) -> None:
    """Evaluate one shard of the run (a run that is not split is one shard); the last one
    merges the run. The message carries only the id; the rows are the truth, so a
    redelivered or duplicate message does nothing to a finished or live shard."""
    shards.shard_execute(run_id=run_id)


@shared_task(name=shards.SHARD_TASK, acks_late=True, reject_on_worker_lost=True)
def evaluate_shard(shard_id: int) -> None:
    """Evaluate the given shard (messages sent by earlier versions); like ``evaluate_run``."""
    shards.shard_execute(shard_id=shard_id)


@shared_task(name="submissions.reap_runs", acks_late=False)
def reap_runs() -> str:
    """Re-queue shards whose worker died and re-send queued runs the broker lost (beat)."""
    return str(reaper.runs_reap())
