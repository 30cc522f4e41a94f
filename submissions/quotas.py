"""Per-user limits on new submissions: per hour, per day, and how many may wait at once.

Staff are exempt. What counts is a submission that is or was evaluated: an upload refused
by the bundle check (``rejected``: nothing was evaluated), a submission its owner cancelled
and one that failed on the platform's side (``platform:*`` error code: a lost worker, a
crashed evaluator) are refunded. Limits come from ``settings.ATREX`` (``QUOTA_PER_HOUR``,
``QUOTA_PER_DAY``, ``QUOTA_ACTIVE``; 0 is no limit). ``quota_status`` says what is left, for
the submit page, the API and the client.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone

from evaluator.errors import UserError

from .models import Submission

Status = Submission.Status
ACTIVE_STATUSES = (
    Status.RECEIVED,
    Status.VALIDATING,
    Status.QUEUED,
    Status.RUNNING,
    Status.SCORING,
)
# How soon to try again when the limit is on submissions waiting (none ends on a clock).
ACTIVE_RETRY_AFTER_S = 60


class QuotaExceeded(UserError):
    """A new submission over one of its owner's limits (HTTP 429)."""

    code = "quota:exceeded"

    def __init__(self, message: str, *, code: str, retry_after_s: int) -> None:
        super().__init__(message, code=code)
        self.retry_after_s = retry_after_s


def _in_words(seconds: int) -> str:
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 2 * 3600:
        return f"{math.ceil(seconds / 60)} min"
    return f"{seconds / 3600:.1f} h"


REFUNDED_STATUSES = (Status.REJECTED, Status.CANCELLED)


def submissions_counted(*, owner):
    """The owner's submissions that count against the limits: rejected uploads, cancelled
    submissions and platform failures are refunded."""
    return (
        Submission.objects.filter(owner=owner)
        .exclude(status__in=REFUNDED_STATUSES)
        .exclude(error_code__startswith="platform:")
    )


@dataclass(frozen=True)
class QuotaWindow:
    """One limit as its owner sees it. ``limit`` 0 means no limit (``left`` is then None)."""

    name: str  # "per_hour", "per_day" or "active"
    limit: int
    used: int
    left: int | None
    frees_at: datetime | None  # when the next slot frees (None: not full, or not on a clock)


def _window_times(counted, *, window_s: int, now: datetime) -> list[datetime]:
    return list(
        counted.filter(created_at__gte=now - timedelta(seconds=window_s))
        .order_by("created_at")
        .values_list("created_at", flat=True)
    )


WINDOW_SECONDS = {"per_hour": 3600, "per_day": 86400}


def _windows(owner, now: datetime) -> list[QuotaWindow]:
    """Each limit of a non-staff ``owner`` now: per hour, per day (on a clock: the slot
    frees when enough of the oldest counted submissions leave the window) and at once."""
    limits = settings.ATREX
    counted = submissions_counted(owner=owner)
    windows = []
    for name, limit in (
        ("per_hour", limits.get("QUOTA_PER_HOUR", 0)),
        ("per_day", limits.get("QUOTA_PER_DAY", 0)),
    ):
        window_s = WINDOW_SECONDS[name]
        times = _window_times(counted, window_s=window_s, now=now)
        frees_at = None
        if limit and len(times) >= limit:
            frees_at = times[len(times) - limit] + timedelta(seconds=window_s)
        left = max(limit - len(times), 0) if limit else None
        windows.append(QuotaWindow(name, limit, len(times), left, frees_at))
    active_limit = limits.get("QUOTA_ACTIVE", 0)
    active = counted.filter(status__in=ACTIVE_STATUSES).count()
    left = max(active_limit - active, 0) if active_limit else None
    windows.append(QuotaWindow("active", active_limit, active, left, None))
    return windows


def quota_status(*, owner) -> dict[str, Any]:
    """What ``owner`` may still submit: each window's limit, use and what is left; staff
    (exempt) get ``exempt: True`` and no windows."""
    if owner.is_staff:
        return {"exempt": True, "windows": []}
    windows = _windows(owner, timezone.now())
    return {"exempt": False, "windows": [asdict(window) for window in windows]}


def quota_summary(status: dict[str, Any]) -> str:
    """One line for a page: 'This hour: 8 of 10 left · today: 28 of 30 · at once: 5 of 5'."""
    if status["exempt"]:
        return "Staff accounts have no submission limits."
    labels = {"per_hour": "this hour", "per_day": "today", "active": "at once"}
    parts = [
        f"{labels[w['name']]}: {w['left']} of {w['limit']} left"
        for w in status["windows"]
        if w["limit"]
    ]
    return ("Submissions " + " · ".join(parts) + ".") if parts else "No submission limits."


def quota_check(*, owner) -> None:
    """Raise ``QuotaExceeded`` when ``owner`` may not submit now; say when they may."""
    if owner.is_staff:
        return
    now = timezone.now()
    by_name = {window.name: window for window in _windows(owner, now)}
    active = by_name["active"]
    if active.limit and active.used >= active.limit:
        raise QuotaExceeded(
            f"You have {active.used} submissions waiting or being evaluated (the limit is "
            f"{active.limit} at a time). Submit again when one of them has finished.",
            code="quota:active",
            retry_after_s=ACTIVE_RETRY_AFTER_S,
        )
    for name, label in (("per_hour", "hour"), ("per_day", "day")):
        window = by_name[name]
        if window.frees_at is None:
            continue
        retry_after_s = max(1, math.ceil((window.frees_at - now).total_seconds()))
        raise QuotaExceeded(
            f"You have made {window.used} submissions in the last {label}; the limit is "
            f"{window.limit} per {label} (rejected uploads, cancelled submissions and "
            "failures on our side are not counted). "
            f"Try again in {_in_words(retry_after_s)}.",
            code=f"quota:per-{label}",
            retry_after_s=retry_after_s,
        )
