"""Per-user limits on new submissions: per hour, per day, and how many may wait at once.

Staff are exempt. A submission that failed on the platform's side (``platform:*`` error
code: a lost worker, a crashed evaluator) is refunded: it does not count. Limits come from
``settings.ATREX`` (``QUOTA_PER_HOUR``, ``QUOTA_PER_DAY``, ``QUOTA_ACTIVE``; 0 is no limit).
"""

from __future__ import annotations

import math
from datetime import timedelta

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


def submissions_counted(*, owner):
    """The owner's submissions that count against the limits (platform failures refunded)."""
    return Submission.objects.filter(owner=owner).exclude(error_code__startswith="platform:")


def quota_check(*, owner) -> None:
    """Raise ``QuotaExceeded`` when ``owner`` may not submit now; say when they may."""
    if owner.is_staff:
        return
    limits = settings.ATREX
    counted = submissions_counted(owner=owner)
    active_limit = limits.get("QUOTA_ACTIVE", 0)
    if active_limit:
        active = counted.filter(status__in=ACTIVE_STATUSES).count()
        if active >= active_limit:
            raise QuotaExceeded(
                f"You have {active} submissions waiting or being evaluated (the limit is "
                f"{active_limit} at a time). Submit again when one of them has finished.",
                code="quota:active",
                retry_after_s=ACTIVE_RETRY_AFTER_S,
            )
    now = timezone.now()
    for label, window_s, limit in (
        ("hour", 3600, limits.get("QUOTA_PER_HOUR", 0)),
        ("day", 86400, limits.get("QUOTA_PER_DAY", 0)),
    ):
        if not limit:
            continue
        times = list(
            counted.filter(created_at__gte=now - timedelta(seconds=window_s))
            .order_by("created_at")
            .values_list("created_at", flat=True)
        )
        if len(times) < limit:
            continue
        # The slot frees when enough of the oldest ones leave the window.
        frees_at = times[len(times) - limit] + timedelta(seconds=window_s)
        retry_after_s = max(1, math.ceil((frees_at - now).total_seconds()))
        raise QuotaExceeded(
            f"You have made {len(times)} submissions in the last {label}; the limit is "
            f"{limit} per {label} (failures on our side are not counted). "
            f"Try again in {_in_words(retry_after_s)}.",
            code=f"quota:per-{label}",
            retry_after_s=retry_after_s,
        )
