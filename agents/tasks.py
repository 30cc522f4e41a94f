"""Celery tasks: thin wrappers that take an id and call a service."""

from __future__ import annotations

from celery import shared_task

from . import services


@shared_task(name=services.CAMPAIGN_TASK, acks_late=True, reject_on_worker_lost=True)
def run_campaign(campaign_id: int) -> None:
    """Run one queued agent campaign on the evaluation queue of its hardware."""
    services.campaign_execute(campaign_id=campaign_id)
