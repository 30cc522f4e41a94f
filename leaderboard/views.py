"""Public pages: the board (sortable, filterable, downloadable), operator pages, the
history of the best score, the suite definition download, and plotly's JavaScript."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import date
from functools import cache
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from django.core.paginator import Page
from django.core.serializers.json import DjangoJSONEncoder
from django.http import (
    FileResponse,
    Http404,
    HttpRequest,
    HttpResponse,
    JsonResponse,
)
from django.shortcuts import render
from django.views.decorators.http import require_GET

from atrex_site import charts
from atrex_site.csv_export import write_rows
from catalogue import selectors as catalogue_selectors
from catalogue.models import HardwareProfile, SuiteVersion
from catalogue.operator_groups import OperatorGroup, operator_group
from evaluator.figures import significant
from evaluator.hardware import HardwareProfile as HardwareSpec
from evaluator.roofline import t_sol_seconds
from submissions.models import ShapeResult, Submission

from . import selectors
from .ranking import NoiseFloor
from .templatetags.figures import heat_colours

# ------------------------------------------------------------------ shared request parsing


def _suite_and_hardware(request: HttpRequest) -> tuple[SuiteVersion | None, HardwareProfile | None]:
    suite = catalogue_selectors.suite_version_pick(slug=request.GET.get("suite"))
    hardware = catalogue_selectors.hardware_pick(slug=request.GET.get("hardware"))
    if (request.GET.get("suite") and suite is None) or (
        request.GET.get("hardware") and hardware is None
    ):
        raise Http404("No such suite version or hardware profile.")
    return suite, hardware


def _parse_date(text: str | None) -> date | None:
    try:
        return date.fromisoformat(text) if text else None
    except ValueError:
        return None


def _filters(request: HttpRequest) -> selectors.BoardFilters:
    kind = request.GET.get("kind", "")
    return selectors.BoardFilters(
        kind=kind if kind in Submission.Kind.values else "",
        dsl=request.GET.get("dsl", "").strip()[:40],
        date_from=_parse_date(request.GET.get("from")),
        date_to=_parse_date(request.GET.get("to")),
    )


# ------------------------------------------------------------------ the board


@dataclass
class Column:
    """A sortable board column header."""

    key: str
    label: str
    numeric: bool
    url: str
    aria_sort: str  # "ascending", "descending" or "none"
    title: str = ""


# Sortable headers after Rank, in board order: (sort key, label, numeric). The first two
# (Submission, Score) stay in place when the table scrolls sideways (static/css/board.css).
BOARD_COLUMNS: list[tuple[str, str, bool]] = [
    ("submission", "Submission", False),
    ("aggregate", "Score (95% interval)", True),
    ("real_pass_rate", "Real pass", True),
    ("apparent_pass_rate", "Apparent pass", True),
    ("fallback_rate", "Fallback", True),
    ("speedup", "Speedup vs eager", True),
    ("speedup_compile", "Speedup vs torch.compile", True),
    ("kind", "Kind", False),
    ("dsl", "DSL", False),
]

# How the operator columns are laid out (``?ops=``): the first is the default.
OPS_LAYOUTS: dict[str, str] = {
    "results": "operators with results first",
    "weight": "by weight",
    "group": "grouped by family",  # families with results first
    "compact": "one column per family",
}
# Heat-map legend stops (shares of the roofline).
LEGEND_STOPS = (0.0, 0.25, 0.5, 0.75, 1.0)


def _url_with(request: HttpRequest, **params: str | int) -> str:
    """This page's query with ``params`` set; a new sort starts again on page 1."""
    query = request.GET.copy()
    query.pop("page", None)
    for name, value in params.items():
        query[name] = str(value)
    return f"?{query.urlencode()}"


def _sort_url(request: HttpRequest, sort: str) -> str:
    return _url_with(request, sort=sort)


def _column(request: HttpRequest, current: str, key: str, label: str, numeric: bool) -> Column:
    active = current.removeprefix("-") == key
    descending = current.startswith("-")
    if active:
        next_sort = key if descending else f"-{key}"
        aria = "descending" if descending else "ascending"
    else:
        # Figures read best-first (descending); text columns A to Z.
        next_sort = f"-{key}" if numeric else key
        aria = "none"
    return Column(key, label, numeric, _sort_url(request, next_sort), aria)


def _pagination(request: HttpRequest, page: Page) -> dict[str, Any]:
    """Links of the page navigation (plain links: works without JavaScript)."""
    numbers = page.paginator.get_elided_page_range(page.number, on_each_side=2, on_ends=1)
    return {
        "page": page,
        "first_url": _url_with(request, page=1),
        "previous_url": _url_with(request, page=page.previous_page_number())
        if page.has_previous()
        else None,
        "next_url": _url_with(request, page=page.next_page_number()) if page.has_next() else None,
        "last_url": _url_with(request, page=page.paginator.num_pages),
        "numbers": [
            (number, _url_with(request, page=number) if isinstance(number, int) else None)
            for number in numbers
        ],
    }


@dataclass
class OperatorColumn:
    """An operator's column (or, in the compact layout, a family's)."""

    header: Column
    slugs: list[str]  # the operators it shows (one, or a family's)
    weights: list[float]  # their importance
    importance: float
    group: OperatorGroup
    has_results: bool
    label_parts: list[str]  # the label split at underscores (the header may wrap there)
    operator_slug: str = ""  # "" for a family column

    def cell(self, operator_scores: dict[str, float]) -> float | None:
        """The column's value for a row: the operator's score, or for a family the
        importance-weighted mean of its operators' scores (as the aggregate weighs them)."""
        if self.operator_slug:
            return operator_scores.get(self.operator_slug)
        if not self.importance:
            return None
        total = sum(
            weight * (operator_scores.get(slug) or 0.0)
            for slug, weight in zip(self.slugs, self.weights, strict=True)
        )
        return total / self.importance


def _operator_columns(
    request: HttpRequest, sort: str, operators: list, best: dict[str, float], layout: str
) -> tuple[list[OperatorColumn], list[tuple[OperatorGroup, int]]]:
    """The operator columns in the layout's order, and for the grouped layout the family
    headers over them (family, number of columns)."""
    columns = []
    for op in operators:  # most important first
        slug = op.operator.slug
        header = _column(request, sort, f"op:{slug}", slug, True)
        header.title = f"importance {op.importance:.3f}"
        has_results = best.get(slug, 0.0) > 0
        if not has_results:
            header.title += "; no result above 0 on this board"
        columns.append(
            OperatorColumn(
                header=header,
                slugs=[slug],
                weights=[op.importance],
                importance=op.importance,
                group=operator_group(slug),
                has_results=has_results,
                label_parts=slug.split("_"),
                operator_slug=slug,
            )
        )
    if layout == "results":
        columns.sort(key=lambda column: not column.has_results)  # stable: weight within
        return columns, []
    if layout == "weight":
        return columns, []
    families: dict[str, list[OperatorColumn]] = {}
    for column in columns:
        families.setdefault(column.group.slug, []).append(column)
    # Families with a result first (as the default layout puts operators), each part by
    # the family's total importance.
    ordered = sorted(
        families.values(),
        key=lambda members: (
            not any(c.has_results for c in members),
            -sum(c.importance for c in members),
        ),
    )
    if layout == "group":
        # Within a family too, the operators with results first (each part by weight).
        ordered = [sorted(members, key=lambda c: not c.has_results) for members in ordered]
        flat = [column for members in ordered for column in members]
        return flat, [(members[0].group, len(members)) for members in ordered]
    compact = []
    for members in ordered:
        group = members[0].group
        header = Column(f"group:{group.slug}", group.label, True, "", "none")
        header.title = ", ".join(column.operator_slug for column in members)
        compact.append(
            OperatorColumn(
                header=header,
                slugs=[column.operator_slug for column in members],
                weights=[column.importance for column in members],
                importance=sum(column.importance for column in members),
                group=group,
                has_results=any(column.has_results for column in members),
                label_parts=[group.label],
            )
        )
    return compact, []


def _table_item(row: selectors.BoardRow, op_columns: list[OperatorColumn]) -> dict[str, Any]:
    score = row.score
    return {
        "score": score,
        "submission": score.submission,
        "rank": row.rank,
        "tied": row.tied,
        "rank_label": row.rank_label,
        # (value, whether its column has any result above 0 on this board)
        "cells": [
            (column.cell(score.operator_scores), column.has_results) for column in op_columns
        ],
        # An agent row's campaign (selected with the row; bundles have none).
        "campaign": getattr(score.submission, "campaign", None),
    }


def _noise_floor_text(floor: NoiseFloor, hardware: HardwareProfile) -> str:
    text = f"{floor.profile * 100:g}% for {hardware.device_kind.upper()} profiles"
    if floor.measured is not None:
        bundles = "bundle" if floor.repeats == 1 else "bundles"
        text += (
            f"; {floor.repeats} {bundles} run more than once on this board differ by up to "
            f"{significant(floor.measured * 100, 2)}%"
        )
    return text


def _board_context(request: HttpRequest, *, paginate: bool = True) -> dict[str, Any]:
    """The board's context from ``selectors.board`` (the one ranking selector). Paginated
    (the page): ``BOARD_PAGE_SIZE`` rows of ``?page=N``; not paginated (the downloads): all
    rows. Ranks are over every row of the board in this view and these filters."""
    suite, hardware = _suite_and_hardware(request)
    operators = catalogue_selectors.suite_operators(suite=suite) if suite else []
    slugs = [op.operator.slug for op in operators]
    view = selectors.view_parse(request.GET.get("view"))
    layout = request.GET.get("ops", "")
    layout = layout if layout in OPS_LAYOUTS else next(iter(OPS_LAYOUTS))
    filters = _filters(request)
    sort = selectors.sort_key_parse(request.GET.get("sort"), operators=slugs)
    board = None
    best = dict.fromkeys(slugs, 0.0)
    if suite and hardware:
        board = selectors.board(
            suite=suite,
            hardware=hardware,
            view=view,
            sort=sort,
            filters=filters,
            operators=slugs,
            page=request.GET.get("page"),
            per_page=selectors.BOARD_PAGE_SIZE if paginate else None,
        )
        if board.count and paginate:
            best = selectors.operator_best(
                suite=suite, hardware=hardware, operators=slugs, filters=filters
            )
    op_columns, op_groups = _operator_columns(request, sort, operators, best, layout)
    columns = [_column(request, sort, key, label, numeric) for key, label, numeric in BOARD_COLUMNS]
    date_column = _column(request, sort, "date", "Date", True)
    labels = {
        column.key: column.label
        for column in [*columns, *(c.header for c in op_columns), date_column]
    }
    sort_key = sort.removeprefix("-")
    sort_label = labels.get(sort_key, sort_key) + (" score" if sort_key.startswith("op:") else "")
    sort_label += ", high to low" if sort.startswith("-") else ", low to high"
    query = request.GET.copy()
    query.pop("page", None)
    # The pickers and the DSL choices are the page's (the downloads need none).
    hardware_profiles = list(selectors.hardware_choices(suite=suite)) if paginate else []
    suites = list(selectors.suite_choices(hardware=hardware)) if paginate else []
    return {
        "suite": suite,
        "hardware": hardware,
        "suites": suites,
        "hardware_profiles": hardware_profiles,
        # Boards with results to point to from an empty one.
        "boards_elsewhere": [
            (suite, profile) for profile in hardware_profiles if profile.has_results
        ]
        + [(other, hardware) for other in suites if other.has_results and other != suite],
        "operators": operators,
        "board": board,
        "view": view,
        "view_urls": {name: _url_with(request, view=name) for name in selectors.BOARD_VIEWS},
        "layout": layout,
        "layouts": [
            (name, label, _url_with(request, ops=name)) for name, label in OPS_LAYOUTS.items()
        ],
        "empty_operators": sum(1 for column in op_columns if not column.has_results),
        "sort": sort,
        "sort_label": sort_label,
        "filters": filters,
        "kinds": Submission.Kind.choices,
        "dsls": selectors.board_dsls(suite=suite, hardware=hardware)
        if suite and hardware and paginate
        else [],
        "columns": columns,
        "op_columns": op_columns,
        "op_groups": op_groups,
        "date_column": date_column,
        "column_count": 2 + len(columns) + len(op_columns),
        # The downloads write the operator scores themselves: no heat-map cells to compute.
        "table": [_table_item(row, op_columns if paginate else []) for row in board.rows]
        if board
        else [],
        "noise_floor": _noise_floor_text(board.noise_floor, hardware) if board and hardware else "",
        "legend": [(stop, heat_colours(stop, 1.0)) for stop in LEGEND_STOPS],
        "pagination": _pagination(request, board.page) if board and board.page else None,
        "query": query.urlencode(),
    }


def board(request: HttpRequest) -> HttpResponse:
    """The leaderboard of one (suite version, hardware) with sorting and filters."""
    return render(request, "leaderboard/board.html", _board_context(request))


BOARD_FIELDS = [
    "rank",
    "tied",
    "baseline",
    "submission",
    "title",
    "owner",
    "kind",
    "dsl",
    "model",
    "agent",
    "verified",
    "aggregate",
    "aggregate_ci_low",
    "aggregate_ci_high",
    "real_pass_rate",
    "apparent_pass_rate",
    "fallback_rate",
    "geomean_speedup_eager",
    "geomean_speedup_compile",
    "published_at",
]


def _board_records(context: dict[str, Any]) -> list[dict[str, Any]]:
    records = []
    for item in context["table"]:
        score, submission = item["score"], item["submission"]
        records.append(
            {
                "rank": item["rank"],
                "tied": item["tied"],
                "baseline": submission.is_baseline,
                "submission": submission.pk,
                "title": submission.title,
                "owner": submission.owner.username,
                "kind": submission.kind,
                "dsl": submission.dsl,
                "model": submission.model_name,
                "agent": submission.agent_name,
                "verified": submission.verified,
                "aggregate": score.aggregate,
                "aggregate_ci_low": score.aggregate_ci_low,
                "aggregate_ci_high": score.aggregate_ci_high,
                "real_pass_rate": score.real_pass_rate,
                "apparent_pass_rate": score.apparent_pass_rate,
                "fallback_rate": score.fallback_rate,
                "geomean_speedup_eager": score.geomean_speedup_eager,
                "geomean_speedup_compile": score.geomean_speedup_compile,
                "published_at": score.published_at,
                "operator_scores": score.operator_scores,
            }
        )
    return records


def _attachment(response: HttpResponse, filename: str) -> HttpResponse:
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


@require_GET
def board_download(request: HttpRequest, fmt: str) -> HttpResponse:
    """The board as CSV or JSON: the same selector, view, sort and filters as the page."""
    if fmt not in ("csv", "json"):
        raise Http404("Downloads are .csv or .json.")
    context = _board_context(request, paginate=False)
    if context["suite"] is None or context["hardware"] is None:
        raise Http404("No suite or hardware.")
    records = _board_records(context)
    stem = f"leaderboard-{context['suite'].slug}-{context['hardware'].slug}"
    slugs = [op.operator.slug for op in context["operators"]]
    if fmt == "json":
        body = {
            "suite": context["suite"].slug,
            "hardware": context["hardware"].slug,
            "view": context["view"],
            "sort": context["sort"],
            "noise_floor": context["board"].noise_floor.relative,
            "results": records,
        }
        response = JsonResponse(body, encoder=DjangoJSONEncoder)
        return _attachment(response, f"{stem}.json")
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    header = BOARD_FIELDS + [f"op:{slug}" for slug in slugs]
    write_rows(
        response,
        [header]
        + [
            [record[field] for field in BOARD_FIELDS]
            + [record["operator_scores"].get(slug) for slug in slugs]
            for record in records
        ],
    )
    return _attachment(response, f"{stem}.csv")


# ------------------------------------------------------------------ operator pages


def _hardware_spec(hardware: HardwareProfile) -> HardwareSpec:
    return HardwareSpec(
        slug=hardware.slug,
        name=hardware.name,
        peak_flops=dict(hardware.peak_flops),
        hbm_bytes_per_s=hardware.hbm_bytes_per_s,
        source=hardware.source,
        device_kind=hardware.device_kind,
    )


def operator_detail(request: HttpRequest, slug: str) -> HttpResponse:
    """What an operator computes, its public shapes (weight, W/Q, T_sol on the chosen
    hardware), the best result per shape and the spread of its score across submissions."""
    suite, hardware = _suite_and_hardware(request)
    if suite is None or hardware is None:
        raise Http404("No suite or hardware.")
    entry = next((op for op in suite.definition["operators"] if op["slug"] == slug), None)
    if entry is None:
        raise Http404(f"{slug} is not in {suite.slug}.")
    spec = _hardware_spec(hardware)
    rows = list(selectors.leaderboard_rows(suite=suite, hardware=hardware))
    ranked = [row for row in rows if not row.submission.is_baseline]
    # Hidden shapes are scored but never shown; the public page lists public shapes only.
    shapes = [
        shape
        for shape in suite.definition["shapes"]
        if shape["operator"] == slug and shape.get("visibility", "public") == "public"
    ]
    smoke_only = hardware.device_kind == HardwareProfile.DeviceKind.CPU
    shapes = [shape for shape in shapes if bool(shape.get("smoke")) == smoke_only] or shapes
    best: dict[str, ShapeResult] = {}
    results = ShapeResult.objects.filter(
        run_id__in=[row.run_id for row in rows], operator=slug, status="pass"
    ).select_related("run__submission")
    for result in results:
        current = best.get(result.shape_id)
        if current is None or (result.roofline_fraction or 0) > (current.roofline_fraction or 0):
            best[result.shape_id] = result
    table = []
    for shape in shapes:
        flops, moved = charts.shape_work(shape)
        try:
            t_sol_ms = 1e3 * t_sol_seconds(
                w_flops=shape.get("w_flops") or {},
                q_read=shape["q_read"],
                q_write=shape["q_write"],
                hardware=spec,
            )
        except Exception:  # noqa: BLE001 - a path this profile lacks: shown as unknown
            t_sol_ms = None
        table.append(
            {
                "shape": shape,
                "flops": flops,
                "bytes": moved,
                "intensity": flops / moved if moved else None,
                "t_sol_ms": t_sol_ms,
                "best": best.get(str(shape["shape_id"])),
            }
        )
    scores = [row.operator_scores.get(slug, 0.0) for row in ranked]
    context = {
        "suite": suite,
        "hardware": hardware,
        "operator": entry,
        "shapes": table,
        "scores": sorted(
            ((row.submission, row.operator_scores.get(slug, 0.0)) for row in ranked),
            key=lambda pair: -pair[1],
        ),
        "chart": charts.distribution_figure(operator=slug, scores=scores) if scores else None,
    }
    return render(request, "leaderboard/operator.html", context)


# ------------------------------------------------------------------ history


def history(request: HttpRequest) -> HttpResponse:
    """The best aggregate over time for one (suite version, hardware)."""
    suite, hardware = _suite_and_hardware(request)
    points = (
        selectors.best_aggregate_history(suite=suite, hardware=hardware)
        if suite and hardware
        else []
    )
    title = f"Best aggregate over time: {suite} on {hardware}" if suite and hardware else ""
    context = {
        "suite": suite,
        "hardware": hardware,
        "suites": catalogue_selectors.suite_versions_published(),
        "hardware_profiles": HardwareProfile.objects.filter(enabled=True),
        "points": points,
        "chart": charts.history_figure(points=points, title=title) if points else None,
    }
    return render(request, "leaderboard/history.html", context)


# ------------------------------------------------------------------ suite definition


@require_GET
def suite_definition(request: HttpRequest, slug: str) -> HttpResponse:
    """A published suite file as JSON; hidden shapes are left out except for staff."""
    suite = catalogue_selectors.suite_version_pick(slug=slug)
    if suite is None:
        raise Http404("No such published suite version.")
    definition = dict(suite.definition)
    if not request.user.is_staff:
        definition["shapes"] = [
            shape for shape in definition["shapes"] if shape.get("visibility", "public") == "public"
        ]
        definition["hidden_shapes_left_out"] = len(suite.definition["shapes"]) - len(
            definition["shapes"]
        )
    response = HttpResponse(
        json.dumps(definition, indent=1, sort_keys=True), content_type="application/json"
    )
    return _attachment(response, f"{suite.slug}.json")


# ------------------------------------------------------------------ plotly's JavaScript


@cache
def _plotly_js_path() -> Path:
    spec = find_spec("plotly")
    if spec is None or not spec.submodule_search_locations:
        raise Http404("plotly is not installed.")
    return Path(next(iter(spec.submodule_search_locations))) / "package_data" / "plotly.min.js"


@require_GET
def plotly_js(request: HttpRequest) -> FileResponse:
    """plotly.min.js from the installed plotly package (the site needs no CDN)."""
    path = _plotly_js_path()
    if not path.is_file():
        raise Http404("plotly.min.js is missing from the plotly package.")
    response = FileResponse(path.open("rb"), content_type="text/javascript")
    response["Cache-Control"] = "public, max-age=86400"
    return response
