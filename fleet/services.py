"""Writes of the worker registry. A worker writes its own row: on start (registration), at
every heartbeat, when its ceilings are measured and when it stops. Status moves are
conditional updates: a heartbeat never brings back a worker that stopped, and a lost one
comes back online with its next heartbeat."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Case, Value, When
from django.utils import timezone

from .models import WorkerNode

Status = WorkerNode.Status
EVALUATION_QUEUE_PREFIX = "eval."


@dataclass
class WorkerFacts:
    """What a worker process knows about itself when it starts (no torch needed)."""

    name: str
    hostname: str
    pid: int
    queues: list[str]
    device: str
    cuda_visible_devices: str = ""
    concurrency: int | None = None
    python_version: str = ""
    harness_version: str = ""
    celery_version: str = ""
    torch_version: str = ""
    triton_version: str = ""
    hardware_profile: str = field(init=False)

    def __post_init__(self) -> None:
        self.hardware_profile = hardware_profile_of_queues(self.queues)


def hardware_profile_of_queues(queues: list[str]) -> str:
    """The hardware profile a worker serves: the slug of its ``eval.<slug>`` queue(s)."""
    slugs = sorted(
        {q[len(EVALUATION_QUEUE_PREFIX) :] for q in queues if q.startswith(EVALUATION_QUEUE_PREFIX)}
    )
    return ",".join(slugs)


def ceilings_fields(document: dict[str, Any]) -> dict[str, Any]:
    """Model fields from an ``atrex-ceilings/1`` document (``python -m evaluator ceilings``)."""
    environment = document.get("environment") or {}
    return {
        "ceilings_status": WorkerNode.CeilingsStatus.MEASURED,
        "ceilings": document,
        "ceilings_error": "",
        "copy_bytes_per_s": document.get("copy_bytes_per_s"),
        "bf16_gemm_flops_per_s": document.get("bf16_gemm_flops_per_s"),
        "gpu_name": (document.get("device_name") or "")[:200],
        "driver": environment.get("driver") or "",
        "clocks": environment.get("clocks_start"),
        # The evaluator's interpreter may differ from the worker's: its versions count.
        "torch_version": environment.get("torch") or "",
        "triton_version": environment.get("triton") or "",
        "harness_version": document.get("harness_version") or "",
    }


def worker_node_register(
    *, facts: WorkerFacts, ceilings: dict[str, Any] | None = None, status: str = Status.STARTING
) -> WorkerNode:
    """Create or replace the row of the worker ``facts.name`` (a restarted worker keeps its
    name and starts afresh). ``ceilings`` are model fields from :func:`ceilings_fields`."""
    now = timezone.now()
    values: dict[str, Any] = {
        **{k: v for k, v in asdict(facts).items() if k != "name"},
        "status": status,
        "started_at": now,
        "last_heartbeat_at": now,
        "stopped_at": None,
        "ceilings_status": WorkerNode.CeilingsStatus.PENDING,
        "ceilings": None,
        "ceilings_error": "",
        "copy_bytes_per_s": None,
        "bf16_gemm_flops_per_s": None,
    }
    if ceilings:
        values.update(ceilings)
    node, _ = WorkerNode.objects.update_or_create(name=facts.name, defaults=values)
    return node


def worker_node_record_ceilings(*, name: str, fields: dict[str, Any]) -> bool:
    """Store what the ceilings measurement gave (or why it failed); False if no row."""
    return bool(WorkerNode.objects.filter(name=name).update(**fields))


def worker_node_mark_online(*, name: str) -> bool:
    """The worker's consumer is up: it takes tasks from now on."""
    now = timezone.now()
    return bool(
        WorkerNode.objects.filter(name=name)
        .exclude(status=Status.STOPPED)
        .update(status=Status.ONLINE, last_heartbeat_at=now)
    )


def worker_node_heartbeat(*, name: str) -> bool:
    """Record that the worker is alive. A worker marked lost comes back online; one still
    starting stays starting. False when there is no row (someone deleted it): the caller
    registers again."""
    return bool(
        WorkerNode.objects.filter(name=name)
        .exclude(status=Status.STOPPED)
        .update(
            last_heartbeat_at=timezone.now(),
            status=Case(
                When(status=Status.STARTING, then=Value(Status.STARTING)),
                default=Value(Status.ONLINE),
            ),
        )
    )


def worker_node_stop(*, name: str) -> bool:
    """The worker shut down cleanly."""
    now = timezone.now()
    return bool(
        WorkerNode.objects.filter(name=name)
        .exclude(status=Status.STOPPED)
        .update(status=Status.STOPPED, stopped_at=now, last_heartbeat_at=now)
    )


def worker_nodes_online(*, hardware_profile: str, lost_after_s: float) -> int:
    """How many worker processes serve ``hardware_profile`` now: online, with a heartbeat
    younger than ``lost_after_s``."""
    cutoff = timezone.now() - timedelta(seconds=lost_after_s)
    return WorkerNode.objects.filter(
        hardware_profile=hardware_profile, status=Status.ONLINE, last_heartbeat_at__gte=cutoff
    ).count()


def worker_nodes_mark_lost(*, lost_after_s: float, now: datetime | None = None) -> int:
    """Mark workers whose last heartbeat is older than ``lost_after_s`` as lost (killed,
    host down, network cut); return how many. A heartbeat brings one back."""
    cutoff = (now or timezone.now()) - timedelta(seconds=lost_after_s)
    return WorkerNode.objects.filter(
        status__in=[Status.STARTING, Status.ONLINE], last_heartbeat_at__lt=cutoff
    ).update(status=Status.LOST)
