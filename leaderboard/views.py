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
from evaluator.hardware import HardwareProfile as HardwareSpec
from evaluator.roofline import t_sol_seconds
from submissions.models import Score, ShapeResult, Submission

from . import selectors

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


# Sortable headers in board order: (sort key, label, numeric, first click descending).
BOARD_COLUMNS: list[tuple[str, str, bool]] = [
    ("submission", "Submission", False),
    ("kind", "Kind", False),
    ("dsl", "DSL", False),
    ("aggregate", "Score (95% interval)", True),
    ("real_pass_rate", "Real pass", True),
    ("apparent_pass_rate", "Apparent pass", True),
    ("fallback_rate", "Fallback", True),
    ("speedup", "Speedup vs eager", True),
    ("speedup_compile", "Speedup vs torch.compile", True),
]


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


def _table_item(row: Score, ranks: dict[int, tuple[int, bool]], slugs, best) -> dict[str, Any]:
    rank, tied = ranks.get(row.pk, (None, False))
    return {
        "score": row,
        "submission": row.submission,
        "rank": rank,
        "tied": tied,
        "operator_cells": [(row.operator_scores.get(slug), best[slug]) for slug in slugs],
        # An agent row's campaign (selected with the row; bundles have none).
        "campaign": getattr(row.submission, "campaign", None),
    }


def _board_context(request: HttpRequest, *, paginate: bool = True) -> dict[str, Any]:
    """The board's context. Paginated (the page), ``BOARD_PAGE_SIZE`` ranked rows of
    ``?page=N`` with the baselines pinned on every page; ranks and the heat map's column
    best are over every row matching the filters. Not paginated (the downloads): all rows."""
    suite, hardware = _suite_and_hardware(request)
    operators = catalogue_selectors.suite_operators(suite=suite) if suite else []
    slugs = [op.operator.slug for op in operators]
    sort = selectors.sort_key_parse(request.GET.get("sort"), operators=slugs)
    filters = _filters(request)
    baselines: list[Score] = []
    ranked: list[Score] = []
    ranks: dict[int, tuple[int, bool]] = {}
    best = dict.fromkeys(slugs, 0.0)
    pagination = None
    if suite and hardware and paginate:
        board_page = selectors.board_page(
            suite=suite,
            hardware=hardware,
            sort=sort,
            filters=filters,
            page=request.GET.get("page"),
        )
        baselines, ranked, ranks = board_page.baselines, board_page.rows, board_page.ranks
        if baselines or ranked:
            best = selectors.operator_best(
                selectors.leaderboard_rows(suite=suite, hardware=hardware, filters=filters),
                operators=slugs,
            )
        pagination = _pagination(request, board_page.page)
    elif suite and hardware:
        rows = list(
            selectors.leaderboard_rows(suite=suite, hardware=hardware, sort=sort, filters=filters)
        )
        ranks = selectors.rank_rows(rows)
        best = {
            slug: max((row.operator_scores.get(slug) or 0.0 for row in rows), default=0.0)
            for slug in slugs
        }
        baselines = [row for row in rows if row.submission.is_baseline]
        ranked = [row for row in rows if not row.submission.is_baseline]
    columns = [_column(request, sort, key, label, numeric) for key, label, numeric in BOARD_COLUMNS]
    op_columns = []
    for op in operators:
        column = _column(request, sort, f"op:{op.operator.slug}", op.operator.slug, True)
        column.title = f"importance {op.importance:.3f}"
        op_columns.append(column)
    date_column = _column(request, sort, "date", "Date", True)
    labels = {column.key: column.label for column in [*columns, *op_columns, date_column]}
    sort_key = sort.removeprefix("-")
    sort_label = labels.get(sort_key, sort_key) + (" score" if sort_key.startswith("op:") else "")
    sort_label += ", high to low" if sort.startswith("-") else ", low to high"
    query = request.GET.copy()
    query.pop("page", None)
    return {
        "suite": suite,
        "hardware": hardware,
        "suites": catalogue_selectors.suite_versions_published(),
        "hardware_profiles": HardwareProfile.objects.filter(enabled=True),
        "operators": operators,
        "sort": sort,
        "sort_label": sort_label,
        "filters": filters,
        "kinds": Submission.Kind.choices,
        "dsls": selectors.board_dsls(suite=suite, hardware=hardware) if suite and hardware else [],
        "columns": columns,
        "op_columns": op_columns,
        "date_column": date_column,
        "baselines": [_table_item(row, ranks, slugs, best) for row in baselines],
        "table": [_table_item(row, ranks, slugs, best) for row in ranked],
        "pagination": pagination,
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
    for item in context["baselines"] + context["table"]:
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
    """The board as CSV or JSON: the same query, sort and filters as the page."""
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
            "sort": context["sort"],
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
    """The best aggregate over time for one (suite version, hardware), with every result
    and the baselines; a clear note instead of empty axes when there is nothing yet."""
    suite, hardware = _suite_and_hardware(request)
    history = (
        selectors.aggregate_history(suite=suite, hardware=hardware)
        if suite and hardware
        else selectors.History(records=[], results=[], baselines=[])
    )
    # The page's heading names the suite and the hardware; the chart's title stays short.
    title = "Best aggregate score over time"
    context = {
        "suite": suite,
        "hardware": hardware,
        "suites": catalogue_selectors.suite_versions_published(),
        "hardware_profiles": HardwareProfile.objects.filter(enabled=True),
        "history": history,
        "rows": sorted(
            [{**item, "baseline": False} for item in history.records]
            + [{**item, "baseline": True} for item in history.baselines],
            key=lambda item: item["at"],
        ),
        "chart": charts.history_figure(
            records=history.records,
            results=history.results,
            baselines=history.baselines,
            title=title,
        ),
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
