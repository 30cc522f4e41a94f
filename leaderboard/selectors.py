"""Reads for the board. One ranking selector (``board``) serves the page, the API, the
downloads and the command-line client; the ranking rule itself is ``ranking``."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from typing import Any

from django.core.paginator import Page, Paginator
from django.db.models import (
    BooleanField,
    Case,
    Count,
    Exists,
    F,
    FloatField,
    IntegerField,
    Max,
    Min,
    OuterRef,
    QuerySet,
    Value,
    When,
    Window,
)
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Cast, RowNumber

from catalogue.models import HardwareProfile, SuiteVersion
from catalogue.selectors import suite_versions_published
from submissions.models import Score
from submissions.querysets import board_q
from submissions.selectors import scores_on_board

from .ranking import NoiseFloor, RankKey, noise_floor, rank_keys, rank_label

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
    included (``submission.is_baseline``); ``board`` lists them unranked.
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


BOARD_PAGE_SIZE = 50

BOARD_VIEWS = ("best", "all")
"""``best``: one row per submitter, their best result (the default, as on competition boards);
``all``: every submission. Baselines are listed in both, each on its own."""
DEFAULT_VIEW = "best"


def view_parse(view: str | None) -> str:
    """``view`` if it is one of ``BOARD_VIEWS``, else the default (``best``)."""
    return view if view in BOARD_VIEWS else DEFAULT_VIEW


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


def _ranking_order() -> list:
    return _order_by(DEFAULT_SORT)[1:]


def best_per_submitter(rows: QuerySet[Score]) -> QuerySet[Score]:
    """``rows`` narrowed to each submitter's best (highest aggregate, then the earlier
    published): a window numbers each owner's rows in the ranking order and the first is
    kept, in the same query. A baseline is a submitter of its own (the examples account
    owns several)."""
    submitter = Case(
        When(submission__is_baseline=True, then=-F("submission_id")),
        default=F("submission__owner_id"),
        output_field=IntegerField(),
    )
    position = Window(RowNumber(), partition_by=[submitter], order_by=_ranking_order())
    return rows.annotate(submitter_position=position).filter(submitter_position=1)


def board_noise_floor(*, suite: SuiteVersion, hardware: HardwareProfile) -> NoiseFloor:
    """The board's noise floor (``ranking.noise_floor``): the hardware profile's, or wider
    where the same bundle (same upload digest) was run more than once on this board and its
    runs differ by more. One aggregate query over the whole board, whatever the filters."""
    repeats = (
        scores_on_board(suite=suite, hardware=hardware)
        .exclude(submission__upload_sha256="")
        .order_by()
        .values("submission__upload_sha256")
        .annotate(runs=Count("pk"), low=Min("aggregate"), high=Max("aggregate"))
        .filter(runs__gte=2)
        .values_list("low", "high")
    )
    return noise_floor(device_kind=hardware.device_kind, repeat_ranges=list(repeats))


@dataclass(frozen=True)
class BoardRow:
    """One row of the board: its score (submission and owner loaded), its rank (None for
    a baseline) and whether it is tied."""

    score: Score
    rank: int | None
    tied: bool

    @property
    def baseline(self) -> bool:
        return self.score.submission.is_baseline

    @property
    def rank_label(self) -> str:
        return rank_label(self.rank, self.tied)


@dataclass
class Board:
    """The board as every surface shows it. ``rows``: this page's rows in the sort order,
    baselines at their place among them (all rows when not paginated); ``count``: rows on
    the whole board; ``page``: the page (None when not paginated); ranks are over the whole
    board (every row matching the filters in this view), not this page."""

    rows: list[BoardRow]
    count: int
    page: Page | None
    view: str
    sort: str
    noise_floor: NoiseFloor


def board(
    *,
    suite: SuiteVersion,
    hardware: HardwareProfile,
    view: str | None = None,
    sort: str | None = None,
    filters: BoardFilters | None = None,
    operators: list[str] | None = None,
    page: str | int | None = None,
    per_page: int | None = None,
) -> Board:
    """The one ranking selector: the page, the API, the CSV/JSON downloads and ``atrex board``
    (through the API) all read the board here, so they show the same rows and ranks.

    Three queries whatever the size of the board: the narrow ``RankKey`` columns of every
    row (ranks and page bounds; per submitter, a window picks each one's best in the same
    query), the board's noise floor, then the full rows (submission, owner, campaign) of
    this page only. ``per_page`` None (the downloads): every row, full, in one query, and
    the noise floor. ``page`` out of range or invalid: the
    nearest valid page (``Paginator.get_page``). ``sort`` changes the order of the rows,
    never their ranks; ``operators`` (the suite's slugs) lets ``sort`` name ``op:<slug>``."""
    view = view_parse(view)
    sort = sort_key_parse(sort, operators=operators)
    rows = leaderboard_rows(suite=suite, hardware=hardware, sort=sort, filters=filters)
    if view == "best":
        rows = best_per_submitter(rows)
    rows = rows.annotate(ranking_position=Window(RowNumber(), order_by=_ranking_order()))
    floor = board_noise_floor(suite=suite, hardware=hardware)
    board_page: Page | None = None
    if per_page is None:
        # Every row (the downloads): the full rows in one query, their keys read off them.
        full_rows = list(rows)
        keys = [
            RankKey(
                row.pk,
                row.aggregate,
                row.aggregate_ci_low,
                row.aggregate_ci_high,
                row.submission.is_baseline,
                row.ranking_position,
            )
            for row in full_rows
        ]
        full: dict[int, Score] = {row.pk: row for row in full_rows}
        shown = keys
    else:
        keys = [RankKey(*values) for values in rows.values_list(*RANK_KEY_FIELDS)]
        board_page = Paginator(keys, per_page).get_page(page)
        shown = list(board_page.object_list)
        wanted = [key.pk for key in shown]
        full = (
            {
                row.pk: row
                for row in Score.objects.filter(pk__in=wanted).select_related(
                    "submission", "submission__owner", "submission__campaign"
                )
            }
            if wanted
            else {}
        )
    ranks = rank_keys(keys, floor=floor.relative)
    return Board(
        rows=[
            BoardRow(full[key.pk], *ranks.get(key.pk, (None, False)))
            for key in shown
            if key.pk in full
        ],
        count=len(keys),
        page=board_page,
        view=view,
        sort=sort,
        noise_floor=floor,
    )


def operator_best(
    *,
    suite: SuiteVersion,
    hardware: HardwareProfile,
    operators: list[str],
    filters: BoardFilters | None = None,
) -> dict[str, float]:
    """Operator slug -> the best operator score among the board's rows matching ``filters``
    (0.0 when none), computed by the database in one aggregate query: which operator
    columns have results. Over every submission, whatever the view (the window that picks
    each submitter's best would double the query's cost for a column order)."""
    if not operators:
        return {}
    rows = leaderboard_rows(suite=suite, hardware=hardware, filters=filters)
    best = rows.order_by().aggregate(
        **{
            f"op_{index}": Max(Cast(KeyTextTransform(slug, "operator_scores"), FloatField()))
            for index, slug in enumerate(operators)
        }
    )
    return {slug: best[f"op_{index}"] or 0.0 for index, slug in enumerate(operators)}


def _has_results(**board: Any) -> Exists:
    """Whether the board (``suite_version`` and ``hardware``, one an ``OuterRef``) has a row:
    an EXISTS on the board's index, stopped at the first row."""
    return Exists(
        Score.objects.filter(board_q(prefix="submission__"), **board).order_by().values("pk")
    )


def hardware_choices(*, suite: SuiteVersion | None) -> QuerySet[HardwareProfile]:
    """Enabled hardware profiles, each with ``has_results``: whether its board for ``suite``
    has a row (False: an empty board, marked so in the picker). One query."""
    profiles = HardwareProfile.objects.filter(enabled=True)
    if suite is None:
        return profiles.annotate(has_results=Value(False, output_field=BooleanField()))
    return profiles.annotate(has_results=_has_results(suite_version=suite, hardware=OuterRef("pk")))


def suite_choices(*, hardware: HardwareProfile | None) -> QuerySet[SuiteVersion]:
    """Published suite versions, each with ``has_results`` on ``hardware``. One query."""
    suites = suite_versions_published()
    if hardware is None:
        return suites.annotate(has_results=Value(False, output_field=BooleanField()))
    return suites.annotate(
        has_results=_has_results(suite_version=OuterRef("pk"), hardware=hardware)
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
