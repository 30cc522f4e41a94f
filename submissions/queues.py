"""Honest queues: for each hardware profile, whether workers serve it now, how many runs
wait or run on it, and when a new or waiting submission can expect to start, estimated
from the measured wall time of its recent runs. The submit form, the submission page and
the API read these, so a submission never sits at "Queued" with nobody saying why."""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass
from typing import Any

from django.conf import settings

from catalogue.models import HardwareProfile
from fleet.services import worker_nodes_online

from .models import EvaluationRun

# How many recent finished runs of a queue its estimate uses.
RECENT_RUNS = 20


@dataclass(frozen=True)
class QueueState:
    """One hardware profile's queue as a submitter sees it."""

    hardware: str
    name: str
    workers_online: int
    waiting: int  # runs queued, not yet taken
    running: int
    median_run_s: float | None  # of its last RECENT_RUNS finished runs; None: no history
    runs_measured: int

    @property
    def serves(self) -> bool:
        return self.workers_online > 0

    def wait_s(self, *, ahead: int) -> float | None:
        """Seconds until a run with ``ahead`` queued runs before it starts: None without a
        worker or without any measured run; 0 when a worker is free for it."""
        if not self.serves:
            return None
        busy = self.running + ahead
        if busy < self.workers_online:
            return 0.0
        if self.median_run_s is None:
            return None
        rounds = math.ceil((busy - self.workers_online + 1) / self.workers_online)
        return rounds * self.median_run_s

    def to_dict(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "serves": self.serves,
            "new_wait_s": self.wait_s(ahead=self.waiting),
        }


def _median_run_s(queue: str) -> tuple[float | None, int]:
    finished = (
        EvaluationRun.objects.filter(
            queue=queue,
            status=EvaluationRun.Status.SUCCEEDED,
            started_at__isnull=False,
            finished_at__isnull=False,
        )
        .order_by("-finished_at")
        .values_list("started_at", "finished_at")[:RECENT_RUNS]
    )
    seconds = [(end - start).total_seconds() for start, end in finished]
    return (statistics.median(seconds) if seconds else None), len(seconds)


def queue_state(*, hardware: HardwareProfile) -> QueueState:
    """The queue of ``hardware`` now."""
    queue = hardware.queue
    runs = EvaluationRun.objects.filter(queue=queue)
    median, measured = _median_run_s(queue)
    return QueueState(
        hardware=hardware.slug,
        name=hardware.name,
        workers_online=worker_nodes_online(
            hardware_profile=hardware.slug, lost_after_s=settings.ATREX["FLEET_LOST_AFTER_S"]
        ),
        waiting=runs.filter(status=EvaluationRun.Status.QUEUED).count(),
        running=runs.filter(status=EvaluationRun.Status.RUNNING).count(),
        median_run_s=median,
        runs_measured=measured,
    )


def queue_states() -> list[QueueState]:
    """Every enabled hardware profile's queue, in the form's order."""
    return [queue_state(hardware=h) for h in HardwareProfile.objects.filter(enabled=True)]


def run_queue_position(*, run: EvaluationRun) -> tuple[int, QueueState] | None:
    """Where a queued run stands: its place among its queue's waiting runs (1 = next) and
    the queue's state (``state.wait_s(ahead=place - 1)`` estimates its start); None unless
    it is queued."""
    if run.status != EvaluationRun.Status.QUEUED:
        return None
    ahead = (
        EvaluationRun.objects.filter(
            queue=run.queue, status=EvaluationRun.Status.QUEUED, created_at__lt=run.created_at
        )
        .exclude(pk=run.pk)
        .count()
    )
    return ahead + 1, queue_state(hardware=run.submission.hardware)


def wait_in_words(seconds: float | None, state: QueueState) -> str:
    """``about 12 min`` / ``should start within a minute`` / why there is no estimate."""
    if not state.serves:
        return f"no worker for {state.name} is online: it waits until one starts"
    if seconds is None:
        return "no estimate yet (no run on this hardware has finished)"
    if seconds < 60:
        return "should start within a minute"
    minutes = math.ceil(seconds / 60)
    return f"about {minutes} min (median run {math.ceil(state.median_run_s / 60)} min)"
