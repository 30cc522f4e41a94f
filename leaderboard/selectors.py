"""Reads for the board. One ranking query serves the pages and the API."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date
from typing import Any

from django.core.paginator import Page, Paginator
from django.db.models import F, FloatField, Max, QuerySet, Window
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Cast, RowNumber

from catalogue.models import HardwareProfile, SuiteVersion
from submissions.models import Score
from submissions.selectors import scores_on_board

# Sort keys of the board (``?sort=KEY`` ascending, ``?sort=-KEY`` descending) -> field.
# ``op:<slug>`` sorts by that operator's score.
SORT_FIELDS: dict[str, str] = {
    "aggregate": "aggregate",
    "real_pass_rate": "real_pass_rate",
    "apparent_pass_rate": "apparent_pass_rate",
    "fallback_rate": "fallback_rate",
    "speedup": "geomean_speedup_eager",
    "speedup_compile": "geomean_speedup_compile",
    "date": "published_at",
    "submission": "submission__title",
    "kind": "submission__kind",
    "dsl": "submission__dsl",
}
DEFAULT_SORT = "-aggregate"


@dataclass(frozen=True)
class BoardFilters:
    """What the board's GET form narrows the rows to (empty: no filter)."""

    kind: str = ""
    dsl: str = ""
    date_from: date | None = None
    date_to: date | None = None


def sort_key_parse(sort: str | None, *, operators: list[str] | None = None) -> str:
    """``sort`` if it names a known column (``op:<slug>`` for a listed operator), else the
    default ``-aggregate``."""
    if not sort:
        return DEFAULT_SORT
    key = sort.removeprefix("-")
    if key in SORT_FIELDS:
        return sort
    if key.startswith("op:") and (operators is None or key[3:] in operators):
        return sort
    return DEFAULT_SORT


def _order_by(sort: str) -> list:
    descending = sort.startswith("-")
    key = sort.removeprefix("-")
    expression: Cast | F
    if key.startswith("op:"):
        expression = Cast(KeyTextTransform(key[3:], "operator_scores"), FloatField())
    else:
        expression = F(SORT_FIELDS[key])
    primary = expression.desc(nulls_last=True) if descending else expression.asc(nulls_last=True)
    # Ties broken by the ranking order, so that equal values keep a stable order.
    return [primary, F("aggregate").desc(), F("published_at").asc(), F("pk").asc()]


def leaderboard_rows(
    *,
    suite: SuiteVersion,
    hardware: HardwareProfile,
    sort: str | None = None,
    filters: BoardFilters | None = None,
) -> QuerySet[Score]:
    """Published, public scores for one (suite version, hardware), best first.

    Private, hidden and hacked submissions never appear, whoever asks (the rule is
    ``submissions.selectors.scores_on_board``). ``sort`` (a ``SORT_FIELDS`` key or
    ``op:<slug>``, ``-`` for descending; unknown keys fall back to ``-aggregate``) and
    ``filters`` are optional; without them this is the ranking order. Baselines are
    included (``submission.is_baseline``); pages show them apart and unranked.
    """
    rows = scores_on_board(suite=suite, hardware=hardware)
    if filters is not None:
        if filters.kind:
            rows = rows.filter(submission__kind=filters.kind)
        if filters.dsl:
            rows = rows.filter(submission__dsl__iexact=filters.dsl)
        if filters.date_from:
            rows = rows.filter(published_at__date__gte=filters.date_from)
        if filters.date_to:
            rows = rows.filter(published_at__date__lte=filters.date_to)
    # submission__campaign: an agent row's provenance (rounds, wall time, tokens, cost) in
    # the same query (a LEFT JOIN; bundles have none).
    return rows.select_related("submission", "submission__owner", "submission__campaign").order_by(
        *_order_by(sort_key_parse(sort))
    )


@dataclass
class RankedRow:
    """One board row with its rank; ``tied`` when its interval overlaps a neighbour's."""

    score: Score
    rank: int | None
    tied: bool = False


@dataclass(frozen=True)
class RankKey:
    """What ranking needs of a board row (no submission, owner or operator scores)."""

    pk: int
    aggregate: float
    aggregate_ci_low: float | None
    aggregate_ci_high: float | None
    is_baseline: bool
    # Position in the ranking order (aggregate high to low, then older first, then pk):
    # a row number computed by the database, or that tuple itself.
    order: Any


# The narrow columns of ``RankKey``, in its field order, for ``values_list`` (``order`` is
# the ``ranking_position`` window annotation: no timestamps to parse per row).
RANK_KEY_FIELDS = (
    "pk",
    "aggregate",
    "aggregate_ci_low",
    "aggregate_ci_high",
    "submission__is_baseline",
    "ranking_position",
)


def _intervals_overlap(a: Score | RankKey, b: Score | RankKey) -> bool:
    a_low = a.aggregate if a.aggregate_ci_low is None else a.aggregate_ci_low
    a_high = a.aggregate if a.aggregate_ci_high is None else a.aggregate_ci_high
    b_low = b.aggregate if b.aggregate_ci_low is None else b.aggregate_ci_low
    b_high = b.aggregate if b.aggregate_ci_high is None else b.aggregate_ci_high
    return a_low <= b_high and b_low <= a_high


def rank_keys(keys: Iterable[RankKey]) -> dict[int, tuple[int, bool]]:
    """Score pk -> (rank, tied) for non-baseline rows, ranked by aggregate.

    Rows are taken best first; a row whose 95% interval overlaps the previous row's
    shares its rank (shown "=N"), so a chain of overlapping neighbours is one tie group.
    Ranks skip after a group (=1, =1, 3). Rows without an interval tie only on equal
    aggregates.
    """
    ranked = sorted(
        (key for key in keys if not key.is_baseline),
        key=lambda key: key.order,
    )
    result: dict[int, tuple[int, bool]] = {}
    previous: RankKey | None = None
    rank = 0
    for position, key in enumerate(ranked, start=1):
        if previous is not None and _intervals_overlap(previous, key):
            result[previous.pk] = (rank, True)
            result[key.pk] = (rank, True)
        else:
            rank = position
            result[key.pk] = (rank, False)
        previous = key
    return result


def rank_rows(rows: list[Score]) -> dict[int, tuple[int, bool]]:
    """``rank_keys`` for full rows (``submission`` loaded)."""
    return rank_keys(
        RankKey(
            row.pk,
            row.aggregate,
            row.aggregate_ci_low,
            row.aggregate_ci_high,
            row.submission.is_baseline,
            (-row.aggregate, row.published_at, row.pk),
        )
        for row in rows
    )


def operator_best(rows: QuerySet[Score], *, operators: list[str]) -> dict[str, float]:
    """Operator slug -> the best operator score among ``rows`` (0.0 when none), computed
    by the database in one aggregate query (the heat map's reference per column)."""
    if not operators:
        return {}
    best = rows.order_by().aggregate(
        **{
            f"op_{index}": Max(Cast(KeyTextTransform(slug, "operator_scores"), FloatField()))
            for index, slug in enumerate(operators)
        }
    )
    return {slug: best[f"op_{index}"] or 0.0 for index, slug in enumerate(operators)}


BOARD_PAGE_SIZE = 50


@dataclass
class BoardPage:
    """One page of the board: ``rows`` are the page's ranked rows in the sort order,
    ``baselines`` all baseline rows (unranked, pinned), ``ranks`` cover the whole board
    (every row matching the filters, not only this page), ``page`` the ``RankKey`` page."""

    rows: list[Score]
    baselines: list[Score]
    ranks: dict[int, tuple[int, bool]]
    page: Page


def board_page(
    *,
    suite: SuiteVersion,
    hardware: HardwareProfile,
    sort: str | None = None,
    filters: BoardFilters | None = None,
    page: str | int | None = None,
    per_page: int = BOARD_PAGE_SIZE,
) -> BoardPage:
    """A page of ``leaderboard_rows`` in two queries: the narrow ``RankKey`` columns of every
    row (ranks and page bounds), then the full rows (submission, owner, operator scores)
    of this page and of the baselines only. ``page`` out of range or invalid: the nearest
    valid page (``Paginator.get_page``)."""
    rows = leaderboard_rows(suite=suite, hardware=hardware, sort=sort, filters=filters)
    ranking = Window(RowNumber(), order_by=_order_by(DEFAULT_SORT)[1:])
    keys = [
        RankKey(*values)
        for values in rows.annotate(ranking_position=ranking).values_list(*RANK_KEY_FIELDS)
    ]
    shown = Paginator([key for key in keys if not key.is_baseline], per_page).get_page(page)
    baseline_pks = [key.pk for key in keys if key.is_baseline]
    wanted = [key.pk for key in shown.object_list] + baseline_pks
    full = {row.pk: row for row in rows.filter(pk__in=wanted)} if wanted else {}
    return BoardPage(
        rows=[full[key.pk] for key in shown.object_list if key.pk in full],
        baselines=[full[pk] for pk in baseline_pks if pk in full],
        ranks=rank_keys(keys),
        page=shown,
    )


def board_dsls(*, suite: SuiteVersion, hardware: HardwareProfile) -> list[str]:
    """The DSLs of the board's rows, for the filter's choices."""
    return sorted(
        leaderboard_rows(suite=suite, hardware=hardware)
        .exclude(submission__dsl="")
        .order_by()
        .values_list("submission__dsl", flat=True)
        .distinct()
    )


@dataclass
class History:
    """A board's aggregates over time, oldest first; each item ``{"at", "aggregate",
    "title", "submission"}``. ``records``: the submissions that set a new best;
    ``results``: every published submission; ``baselines``: the baseline rows."""

    records: list[dict[str, Any]]
    results: list[dict[str, Any]]
    baselines: list[dict[str, Any]]


def aggregate_history(*, suite: SuiteVersion, hardware: HardwareProfile) -> History:
    """The board's rows by publication date (the board's own query), split into new bests,
    every result and the baselines. Baselines are never a "best" (they are not ranked) but
    are shown: a board whose rows are all baselines (the demo's) still has a history."""
    history = History(records=[], results=[], baselines=[])
    best: float | None = None
    for row in leaderboard_rows(suite=suite, hardware=hardware, sort="date"):
        item = {
            "at": row.published_at,
            "aggregate": row.aggregate,
            "title": row.submission.title,
            "submission": row.submission,
        }
        if row.submission.is_baseline:
            history.baselines.append(item)
            continue
        history.results.append(item)
        if best is None or row.aggregate > best:
            best = row.aggregate
            history.records.append(item)
    return history
