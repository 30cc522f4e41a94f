"""Site work of the registry (the ``site`` queue)."""

from __future__ import annotations

from celery import shared_task
from django.conf import settings

from . import services

MARK_LOST_TASK = "fleet.mark_lost_workers"


@shared_task(name=MARK_LOST_TASK, ignore_result=True)
def mark_lost_workers() -> int:
    """Mark workers without a recent heartbeat as lost; a periodic (beat) task."""
    return services.worker_nodes_mark_lost(lost_after_s=settings.ATREX["FLEET_LOST_AFTER_S"])
