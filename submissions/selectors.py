"""Reads for submissions, with visibility applied in one place."""

from __future__ import annotations

from django.contrib.auth.models import AnonymousUser, User
from django.db.models import Count, F, Q, QuerySet, Sum

from catalogue.models import HardwareProfile, Shape, SuiteVersion
from catalogue.shape_words import suite_shape_arguments

from . import querysets
from .models import EvaluationRun, OperatorResult, Score, ShapeResult, Submission
from .queues import run_queue_position, wait_in_words
from .result_tables import ResultTables, result_tables


def submissions_visible_to(*, user: User | AnonymousUser) -> QuerySet[Submission]:
    """Public submissions, plus the user's own; staff see everything (the rule is
    ``querysets.visible_q``). A submission an admin hid is seen by its owner and staff only.
    """
    return Submission.objects.visible_to(user).select_related("owner", "suite_version", "hardware")


def submission_can_see_files(*, submission: Submission, user: User | AnonymousUser) -> bool:
    """The upload itself and the logs: owner and staff only."""
    return querysets.can_see_files(user=user, submission=submission)


def _hidden_rows_q(*, suite_version_id: int) -> Q:
    """Result rows of the suite version's hidden shapes (``Q()`` when it has none): one
    query."""
    hidden = Shape.objects.filter(
        suite_version_id=suite_version_id, visibility=Shape.Visibility.HIDDEN
    ).values_list("operator__slug", "shape_id")
    hidden_rows = Q()
    for operator, shape_id in hidden:
        hidden_rows |= Q(operator=operator, shape_id=shape_id)
    return hidden_rows


def shape_results_visible_to(
    *, run: EvaluationRun, user: User | AnonymousUser
) -> QuerySet[ShapeResult]:
    """The run's per-shape rows. Rows of the suite's hidden shapes are shown to staff only:
    hidden shapes are scored but never shown, and their rows would reveal them."""
    rows = run.shape_results.all()
    if querysets.is_staff(user):
        return rows
    hidden_rows = _hidden_rows_q(suite_version_id=run.submission.suite_version_id)
    return rows.exclude(hidden_rows) if hidden_rows else rows


def shape_results_of_runs_visible_to(
    *, runs: list[EvaluationRun], suite_version_id: int, user: User | AnonymousUser
) -> QuerySet[ShapeResult]:
    """``shape_results_visible_to`` of several runs of one suite version at once: their
    rows in one query, the suite's hidden shapes looked up once (not once per run)."""
    rows = ShapeResult.objects.filter(run_id__in=[run.pk for run in runs])
    if querysets.is_staff(user):
        return rows
    hidden_rows = _hidden_rows_q(suite_version_id=suite_version_id)
    return rows.exclude(hidden_rows) if hidden_rows else rows


def submission_latest_run(*, submission: Submission) -> EvaluationRun | None:
    return submission.runs.order_by("-attempt").first()


def submission_queue(*, submission: Submission, run: EvaluationRun | None) -> dict | None:
    """While queued: its place in its hardware's queue, the workers serving it and the
    estimated wait, with a sentence for the page; None otherwise."""
    if run is None or submission.status != Submission.Status.QUEUED:
        return None
    place = run_queue_position(run=run)
    if place is None:
        return None
    position, state = place
    wait_s = state.wait_s(ahead=position - 1)
    workers = state.workers_online
    where = f"Number {position} in the queue for {state.name}"
    if not state.serves:
        note = f"{where} · no worker for it is online: it waits until one starts"
    else:
        note = (
            f"{where} · {workers} worker{'s' if workers != 1 else ''} online · "
            f"{wait_in_words(wait_s, state)}"
        )
    return {"position": position, "workers_online": workers, "wait_s": wait_s, "note": note}


def submission_progress(*, submission: Submission) -> dict:
    """What the live status box shows: status, progress of the latest run, the error, and
    while queued where it stands in its queue."""
    run = submission_latest_run(submission=submission)
    done = run.shapes_done if run else 0
    total = run.shapes_total if run else 0
    return {
        "queue": submission_queue(submission=submission, run=run),
        "id": submission.pk,
        "status": submission.status,
        "status_display": submission.get_status_display(),
        "final": submission.is_final,
        "shapes_done": done,
        "shapes_total": total,
        "percent": round(100.0 * done / total, 1) if total else 0.0,
        "error_code": submission.error_code,
        "error_message": submission.error_message,
    }


def scores_on_board(*, suite: SuiteVersion, hardware: HardwareProfile) -> QuerySet[Score]:
    """Published, public scores of one (suite version, hardware), in ranking order (best
    aggregate first, then the earlier published). Private, hidden and hacked submissions
    never appear, whoever asks (the rule is ``querysets.board_q``); baselines do."""
    return Score.objects.filter(
        querysets.board_q(prefix="submission__"), suite_version=suite, hardware=hardware
    ).order_by(F("aggregate").desc(nulls_last=True), "published_at", "pk")


def submission_review_signals(*, submission: Submission) -> list[dict]:
    """The signs of deception (``evaluator.verdicts.hold_signals``) in the latest run's
    results, each with its operator, shape, code, label and evidence: what an admin reviews
    before releasing or rejecting a held submission. Empty when there is no run."""
    from evaluator.verdicts import hold_signals

    run = submission_latest_run(submission=submission)
    if run is None or not run.results:
        return []
    return hold_signals(run.results.get("operators") or [])


def submission_results_withheld(
    *, submission: Submission, user: User | AnonymousUser | None
) -> bool:
    """Whether ``user`` may not see the figures of ``submission`` yet: a submission held for
    review publishes nothing until staff release it; its owner and staff see them."""
    if submission.status != Submission.Status.HELD_FOR_REVIEW:
        return False
    if (
        user is not None
        and user.is_authenticated
        and (user.is_staff or submission.owner_id == user.pk)
    ):
        return False
    return True


def _reported_verdicts(
    *, run: EvaluationRun, operator_results: list[OperatorResult], score: Score | None
) -> dict[str, str]:
    """operator -> verdict where the scoring stored one: a ``verdict`` on the operator's
    row, the published score's ``operator_verdicts``, or the run's results document
    (in that order). Empty where none is stored: the page then derives the verdict."""
    verdicts: dict[str, str] = {}
    for entry in (run.results or {}).get("operators") or []:
        if isinstance(entry, dict) and entry.get("verdict"):
            verdicts[str(entry.get("operator"))] = str(entry["verdict"])
    stored = getattr(score, "operator_verdicts", None)
    if isinstance(stored, dict):
        verdicts.update({str(op): str(verdict) for op, verdict in stored.items() if verdict})
    for result in operator_results:
        verdict = getattr(result, "verdict", "")
        if verdict:
            verdicts[result.operator] = str(verdict)
    return verdicts


def _status_counts(run: EvaluationRun) -> dict[tuple[str, str], tuple[int, float]]:
    """(operator, shape status) -> (shapes, their summed weight) over every shape of the
    run, hidden ones included: from the results document the rows were stored from (no
    query), else (a run stored without one) from its rows in one grouped query."""
    counts: dict[tuple[str, str], tuple[int, float]] = {}
    operators = (run.results or {}).get("operators")
    if isinstance(operators, list) and operators:
        for entry in operators:
            for shape in entry.get("shapes") or []:
                key = (str(entry.get("operator")), str(shape.get("status", "")))
                count, weight = counts.get(key, (0, 0.0))
                counts[key] = (count + 1, weight + float(shape.get("weight") or 0.0))
        return counts
    for row in (
        run.shape_results.order_by()
        .values("operator", "status")
        .annotate(shapes=Count("pk"), weight=Sum("weight"))
    ):
        counts[(row["operator"], row["status"])] = (row["shapes"], row["weight"] or 0.0)
    return counts


def _coded_operators(run: EvaluationRun) -> tuple[set[str], set[str]]:
    """Operators of ``run`` with a shape whose verdict codes say a wrong result, and those
    with one that says a sign of deception (``evaluator.verdicts``): from the results
    document (no query), else from the rows that carry codes."""
    from evaluator.verdicts import HOLD_CODES, WRONG_CODES, shape_codes

    wrong: set[str] = set()
    held: set[str] = set()

    def note(operator: str, codes: list[str]) -> None:
        if WRONG_CODES.intersection(codes):
            wrong.add(operator)
        if HOLD_CODES.intersection(codes):
            held.add(operator)

    operators = (run.results or {}).get("operators")
    if isinstance(operators, list) and operators:
        for entry in operators:
            for shape in entry.get("shapes") or []:
                note(str(entry.get("operator")), shape_codes(shape))
        return wrong, held
    for operator, codes in run.shape_results.exclude(codes=[]).values_list("operator", "codes"):
        note(operator, [str(code) for code in codes or []])
    return wrong, held


def submission_result_tables(
    *,
    submission: Submission,
    run: EvaluationRun,
    score: Score | None,
    operator_results: list[OperatorResult],
    shape_results: list[ShapeResult],
    status_filter: str,
) -> ResultTables:
    """The submission page's per-operator summary and per-shape groups of ``run``.

    ``shape_results``: the rows the reader may see (``shape_results_visible_to``);
    ``score``: the published score, if any. The verdicts and weight shares count every
    shape of the run, so they do not depend on who reads; the shapes' arguments come from
    the suite version's definition (loaded with the submission). No query of its own when
    the run has its results document."""
    wrong, held = _coded_operators(run)
    return result_tables(
        operator_results=operator_results,
        shape_results=shape_results,
        status_counts=_status_counts(run),
        reported_verdicts=_reported_verdicts(
            run=run, operator_results=operator_results, score=score
        ),
        arguments=suite_shape_arguments(submission.suite_version.definition.get("shapes", [])),
        status_filter=status_filter,
        wrong_operators=wrong,
        held_operators=held,
    )
