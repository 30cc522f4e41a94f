"""Who may see which submission: the one rule, used by every page, download and API entry.

* A **public** submission that no admin hid is seen by everyone.
* A **private** or **hidden** submission is seen by its owner and by staff only.
* Its files (the upload, the evaluation log) are seen by its owner and staff only, public
  or not.
* The **board** (and what is computed from it: ranks, operator pages, history, the
  comparison chart, the downloads) lists published public submissions that are neither
  hidden nor hacked, whoever asks: private results are never ranked.

``visible_q`` and ``board_q`` take a ``prefix`` so that rows of other models (scores,
runs, results) can be filtered through their submission with the same rule.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.db import models
from django.db.models import Q

if TYPE_CHECKING:
    from .models import Submission

PUBLIC = "public"
PUBLISHED = "published"


def is_staff(user) -> bool:
    return bool(user is not None and user.is_authenticated and user.is_staff)


def public_q(*, prefix: str = "") -> Q:
    """Submissions everyone may see (public and not hidden)."""
    return Q(**{f"{prefix}visibility": PUBLIC, f"{prefix}hidden": False})


def visible_q(*, user, prefix: str = "") -> Q:
    """Submissions ``user`` may see; ``Q()`` (everything) for staff."""
    if is_staff(user):
        return Q()
    if user is not None and user.is_authenticated:
        return public_q(prefix=prefix) | Q(**{f"{prefix}owner": user.pk})
    return public_q(prefix=prefix)


def board_q(*, prefix: str = "") -> Q:
    """Submissions the public board ranks: published, public, not hidden, not hacked."""
    return public_q(prefix=prefix) & Q(**{f"{prefix}status": PUBLISHED, f"{prefix}hacked": False})


def can_see_files(*, user, submission: Submission) -> bool:
    """The upload itself and the logs: owner and staff only."""
    if user is None or not user.is_authenticated:
        return False
    return user.is_staff or submission.owner_id == user.pk


class SubmissionQuerySet(models.QuerySet):
    def visible_to(self, user) -> SubmissionQuerySet:
        """What ``user`` (anonymous, a researcher or staff) may see."""
        return self.filter(visible_q(user=user))

    def on_board(self) -> SubmissionQuerySet:
        """What the public board ranks."""
        return self.filter(board_q())
