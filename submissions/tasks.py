"""Celery tasks: thin wrappers that take an id and call a service."""

from __future__ import annotations

from celery import shared_task

from . import services


@shared_task(name=services.EVALUATE_TASK, acks_late=True, reject_on_worker_lost=True)
def evaluate_run(run_id: int) -> None:
    """Evaluate one queued run. The message carries only the id; the row is the truth."""
    services.evaluation_run_execute(run_id=run_id)
