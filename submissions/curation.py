"""Admin curation of submissions: hide, verify, mark hacked, re-run, release or reject.

Every action here needs an actor and a reason and writes one ``CurationLog`` row in the
same transaction as its change, so the submission's history always says who did what and
why. Status moves go through ``services.submission_transition`` (compare-and-set); flags
are set with a conditional update, so a repeated action is refused instead of logged twice.
"""

from __future__ import annotations

from django.db import transaction

from evaluator.errors import UserError
from evaluator.scoring import operator_verdict, summarize

from . import services
from .models import CurationLog, EvaluationRun, Submission
from .scores import score_publish

Action = CurationLog.Action
Status = Submission.Status

# Flag actions: action -> (field, value it sets).
FLAG_ACTIONS: dict[str, tuple[str, bool]] = {
    Action.HIDE: ("hidden", True),
    Action.UNHIDE: ("hidden", False),
    Action.VERIFY: ("verified", True),
    Action.UNVERIFY: ("verified", False),
    Action.MARK_HACKED: ("hacked", True),
    Action.CLEAR_HACKED: ("hacked", False),
}
RERUN_FROM = frozenset({Status.PUBLISHED, Status.FAILED})


class CurationRefused(UserError):
    """A curation action that does not apply to the submission as it is now."""

    code = "curation:refused"


def _require_reason(reason: str) -> str:
    reason = (reason or "").strip()
    if not reason:
        raise CurationRefused("Say why: every curation action is logged with its reason.")
    return reason


def _log(*, submission: Submission, actor, action: str, reason: str) -> CurationLog:
    return CurationLog.objects.create(
        submission=submission,
        actor=actor if getattr(actor, "pk", None) else None,
        action=action,
        reason=reason,
    )


def submission_flag_set(*, submission: Submission, actor, action: str, reason: str) -> CurationLog:
    """Hide/unhide, verify/unverify, mark/clear hacked; refused when already so."""
    if action not in FLAG_ACTIONS:
        raise CurationRefused(f"{action!r} is not a flag action.")
    reason = _require_reason(reason)
    field, value = FLAG_ACTIONS[action]
    with transaction.atomic():
        changed = (
            Submission.objects.filter(pk=submission.pk)
            .exclude(**{field: value})
            .update(**{field: value})
        )
        if not changed:
            raise CurationRefused(
                f"Submission {submission.pk} is already {'' if value else 'not '}{field}."
            )
        setattr(submission, field, value)
        return _log(submission=submission, actor=actor, action=action, reason=reason)


def submission_rerun(*, submission: Submission, actor, reason: str) -> EvaluationRun:
    """Queue a new evaluation run on the current harness (from published or failed).

    The submission leaves the board while it runs (it is no longer ``published``); the
    new run's results replace its row when they are published.
    """
    reason = _require_reason(reason)
    submission.refresh_from_db(fields=["status"])
    if submission.status not in RERUN_FROM:
        raise CurationRefused(
            f"Submission {submission.pk} is {submission.status}; only published or failed "
            "submissions can be re-run."
        )
    if not submission.upload:
        raise CurationRefused(
            f"Submission {submission.pk} has no upload (its results were imported); "
            "there is nothing to re-run."
        )
    with transaction.atomic():
        try:
            run = services.submission_enqueue(
                submission=submission,
                from_status=submission.status,
                note=f"re-run by an admin: {reason}",
            )
        except services.IllegalTransition as error:
            raise CurationRefused(error.message) from error
        _log(submission=submission, actor=actor, action=Action.RERUN, reason=reason)
    return run


def _held_run(submission: Submission) -> EvaluationRun:
    run = submission.runs.order_by("-attempt").first()
    if run is None or not run.results or "scores" not in run.results:
        raise CurationRefused(f"Submission {submission.pk} has no scored run to release.")
    return run


def submission_release(*, submission: Submission, actor, reason: str) -> CurationLog:
    """Publish results that were held for review, with the run's stored scores."""
    reason = _require_reason(reason)
    with transaction.atomic():
        run = _held_run(submission)
        if not services.submission_transition(
            submission=submission,
            from_status=Status.HELD_FOR_REVIEW,
            to_status=Status.PUBLISHED,
            note=f"released by an admin: {reason}",
        ):
            raise CurationRefused(f"Submission {submission.pk} is not held for review.")
        operators = run.results.get("operators", [])
        verdicts = {op["operator"]: operator_verdict(op.get("shapes") or []) for op in operators}
        # The stored block's importance is the suite version's; the figures are recomputed
        # from the shapes under today's rules (a run scored before they existed included).
        importance = {
            op["slug"]: op["importance"] for op in submission.suite_version.definition["operators"]
        }
        score_publish(
            run=run,
            scores=summarize(operators=operators, importance=importance),
            operator_scores={slug: v["score"] for slug, v in verdicts.items()},
            operator_verdicts={slug: v["verdict"] for slug, v in verdicts.items()},
        )
        return _log(submission=submission, actor=actor, action=Action.RELEASE, reason=reason)


def submission_reject_held(*, submission: Submission, actor, reason: str) -> CurationLog:
    """Refuse results that were held for review; the owner sees the reason."""
    reason = _require_reason(reason)
    with transaction.atomic():
        if not services.submission_transition(
            submission=submission,
            from_status=Status.HELD_FOR_REVIEW,
            to_status=Status.REJECTED,
            note=f"rejected after review: {reason}",
            error=UserError(reason, code="review:rejected"),
        ):
            raise CurationRefused(f"Submission {submission.pk} is not held for review.")
        return _log(submission=submission, actor=actor, action=Action.REJECT, reason=reason)


def curation_apply(*, submission: Submission, actor, action: str, reason: str) -> object:
    """Dispatch one curation ``action`` (a ``CurationLog.Action`` value)."""
    if action in FLAG_ACTIONS:
        return submission_flag_set(submission=submission, actor=actor, action=action, reason=reason)
    if action == Action.RERUN:
        return submission_rerun(submission=submission, actor=actor, reason=reason)
    if action == Action.RELEASE:
        return submission_release(submission=submission, actor=actor, reason=reason)
    if action == Action.REJECT:
        return submission_reject_held(submission=submission, actor=actor, reason=reason)
    raise CurationRefused(f"Unknown curation action {action!r}.")
