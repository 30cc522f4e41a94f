"""Reads for the fleet status page and its JSON: the workers, their heartbeat age, and
the depth of every queue, read from the broker through kombu."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from celery import current_app
from django.conf import settings
from django.utils import timezone

from catalogue.models import HardwareProfile

from .models import WorkerNode
from .services import EVALUATION_QUEUE_PREFIX

if TYPE_CHECKING:
    from celery import Celery

logger = logging.getLogger(__name__)

SITE_QUEUE = "site"


@dataclass(frozen=True)
class WorkerView:
    node: WorkerNode
    heartbeat_age_s: float
    # ``lost`` as soon as the heartbeat is too old, even before anyone marked it so.
    effective_status: str


@dataclass(frozen=True)
class QueueDepth:
    queue: str
    hardware_profile: str
    # Messages waiting (not yet taken by a worker); None when the broker did not answer.
    waiting: int | None
    workers_online: int
    error: str = ""


def worker_views(*, now: datetime | None = None) -> list[WorkerView]:
    """Every registered worker with its heartbeat age and effective status."""
    now = now or timezone.now()
    lost_after = settings.ATREX["FLEET_LOST_AFTER_S"]
    views = []
    for node in WorkerNode.objects.all():
        age = max(0.0, (now - node.last_heartbeat_at).total_seconds())
        status = node.status
        if status in (WorkerNode.Status.ONLINE, WorkerNode.Status.STARTING) and age > lost_after:
            status = WorkerNode.Status.LOST
        views.append(WorkerView(node=node, heartbeat_age_s=age, effective_status=status))
    return views


def known_queues(*, workers: list[WorkerView]) -> list[str]:
    """The site queue, every enabled hardware profile's queue, and every queue a
    registered worker consumes."""
    queues = {SITE_QUEUE, settings.CELERY_TASK_DEFAULT_QUEUE}
    queues.update(profile.queue for profile in HardwareProfile.objects.filter(enabled=True))
    for view in workers:
        if view.effective_status != WorkerNode.Status.STOPPED:
            queues.update(view.node.queues or [])
    return sorted(queues)


def broker_queue_sizes(
    queues: list[str], *, app: Celery | None = None
) -> tuple[dict[str, int | None], str]:
    """Waiting messages per queue, asked of the broker through kombu (a passive declare:
    Redis LLEN of the queue's lists, a count of message files on the filesystem broker).
    An absent queue is empty. Returns the sizes and the broker error, if any."""
    sizes: dict[str, int | None] = {}
    try:
        with (app or current_app).connection_for_read() as conn:
            conn.ensure_connection(max_retries=1, timeout=2)
            channel = conn.default_channel
            for queue in queues:
                try:
                    sizes[queue] = channel.queue_declare(queue=queue, passive=True).message_count
                except conn.channel_errors:
                    # Redis keeps no key for an empty list: the queue exists and is empty.
                    sizes[queue] = 0
                    channel = conn.default_channel
    except Exception as exc:  # noqa: BLE001 - the page shows the broker is down
        logger.warning("broker did not answer for queue sizes: %s", exc)
        return {queue: None for queue in queues}, f"{type(exc).__name__}: {exc}"
    return sizes, ""


def queue_depths(*, workers: list[WorkerView]) -> list[QueueDepth]:
    """Depth of every known queue and how many online workers consume it."""
    queues = known_queues(workers=workers)
    sizes, error = broker_queue_sizes(queues)
    depths = []
    for queue in queues:
        online = sum(
            1
            for view in workers
            if view.effective_status == WorkerNode.Status.ONLINE
            and queue in (view.node.queues or [])
        )
        profile = (
            queue[len(EVALUATION_QUEUE_PREFIX) :]
            if queue.startswith(EVALUATION_QUEUE_PREFIX)
            else ""
        )
        depths.append(
            QueueDepth(
                queue=queue,
                hardware_profile=profile,
                waiting=sizes.get(queue),
                workers_online=online,
                error=error,
            )
        )
    return depths


def fleet_overview(*, now: datetime | None = None) -> dict[str, Any]:
    """The status page's data, as JSON-ready values."""
    now = now or timezone.now()
    workers = worker_views(now=now)
    depths = queue_depths(workers=workers)
    return {
        "generated_at": now.isoformat(),
        "broker": _broker_label(),
        "heartbeat_interval_s": settings.ATREX["FLEET_HEARTBEAT_S"],
        "lost_after_s": settings.ATREX["FLEET_LOST_AFTER_S"],
        "workers": [_worker_json(view) for view in workers],
        "queues": [
            {
                "queue": d.queue,
                "hardware_profile": d.hardware_profile,
                "waiting": d.waiting,
                "workers_online": d.workers_online,
                "error": d.error,
            }
            for d in depths
        ],
    }


def _broker_label() -> str:
    """The broker's URL without its password."""
    with current_app.connection_for_read() as conn:
        return conn.as_uri(include_password=False)


def _worker_json(view: WorkerView) -> dict[str, Any]:
    node = view.node
    return {
        "name": node.name,
        "hostname": node.hostname,
        "pid": node.pid,
        "status": view.effective_status,
        "recorded_status": node.status,
        "queues": node.queues,
        "hardware_profile": node.hardware_profile,
        "device": node.device,
        "cuda_visible_devices": node.cuda_visible_devices,
        "concurrency": node.concurrency,
        "gpu_name": node.gpu_name,
        "driver": node.driver,
        "clocks": node.clocks,
        "torch": node.torch_version,
        "triton": node.triton_version,
        "python": node.python_version,
        "harness_version": node.harness_version,
        "celery": node.celery_version,
        "ceilings_status": node.ceilings_status,
        "copy_bytes_per_s": node.copy_bytes_per_s,
        "bf16_gemm_flops_per_s": node.bf16_gemm_flops_per_s,
        "ceilings_error": node.ceilings_error,
        "started_at": node.started_at.isoformat(),
        "last_heartbeat_at": node.last_heartbeat_at.isoformat(),
        "heartbeat_age_s": round(view.heartbeat_age_s, 1),
        "stopped_at": node.stopped_at.isoformat() if node.stopped_at else None,
    }
