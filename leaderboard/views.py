"""Public pages: the board (sortable, filterable, downloadable), operator pages, the
history of the best score, the suite definition download, and plotly's JavaScript."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import date
from functools import cache, lru_cache
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
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe
from django.views.decorators.http import require_GET

from atrex_site import charts
from atrex_site.csv_export import header_with_units, write_rows
from atrex_site.highlight import highlight_python
from catalogue import selectors as catalogue_selectors
from catalogue.models import HardwareProfile, Shape, SuiteVersion
from catalogue.operator_groups import OperatorGroup, operator_group
from evaluator import HARNESS_VERSION, figures, reference_docs
from evaluator.figures import significant
from evaluator.hardware import HardwareProfile as HardwareSpec
from evaluator.roofline import t_sol_seconds
from submissions.models import Score, ShapeResult, Submission

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
    ("aggregate", "Score, % of roofline (95% interval)", True),
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
        # Whole percentages: a scale's marks, not measured figures (no "25.0%").
        "legend": [(f"{stop:.0%}", heat_colours(stop, 1.0)) for stop in LEGEND_STOPS],
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
    header = header_with_units(BOARD_FIELDS + [f"op:{slug}" for slug in slugs])
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


def _dtype_paths(shapes: list[Shape]) -> list[str]:
    """The W dtypes of ``shapes`` (which roofline path each FLOP is counted on)."""
    return sorted({dtype for shape in shapes for dtype in (shape.w_flops or {})})


_LIST_ITEM = re.compile(r"^(\s+|[*•-] |\d+[.)] )")
_LITERAL = re.compile(r"``(.+?)``")
_STRONG = re.compile(r"\*\*(.+?)\*\*")


def _doc_paragraph(text: str) -> SafeString:
    """One paragraph of a module docstring as HTML: its hard-wrapped lines joined (so that
    it reflows on a phone) except before a list item or an indented line, ``literals`` as
    code and **emphasis** as strong; everything else escaped."""
    lines = text.split("\n")
    html = escape(lines[0])
    for line in lines[1:]:
        html += ("<br>" if _LIST_ITEM.match(line) else " ") + escape(line.strip())
    html = _STRONG.sub(r"<strong>\1</strong>", _LITERAL.sub(r"<code>\1</code>", html))
    return mark_safe(html)  # noqa: S308 - escaped above, then only <code>/<strong> added


@lru_cache(maxsize=64)
def _reference_page(slug: str, harness_version: str) -> dict[str, Any] | None:
    """The highlighted reference of built-in operator ``slug``, per harness version (the
    source is static for one version: highlighted once per process)."""
    source = reference_docs.reference_source(slug)
    if source is None:
        return None

    def block(item: reference_docs.SourceBlock | None) -> dict[str, Any] | None:
        if item is None:
            return None
        return {"title": item.title, "module": item.module, "html": highlight_python(item.text)}

    return {
        "docstring": [
            _doc_paragraph(part.strip()) for part in source.docstring.split("\n\n") if part.strip()
        ],
        "reference": block(source.reference),
        "inputs": block(source.inputs),
        "helpers": [block(item) for item in source.helpers],
        "policy": [block(item) for item in source.policy],
        "checker_notes": source.checker_notes,
        "module": highlight_python(source.module_text),
        "facts": reference_docs.operator_facts(slug),
        "harness_version": harness_version,
    }


def _uploaded_reference(sources: dict[str, str]) -> dict[str, Any]:
    """An operator the evaluator does not implement: its uploaded reference.py and input.py."""
    return {
        name: highlight_python(text)
        for name, text in sorted(sources.items())
        if name in {"reference.py", "input.py"} and isinstance(text, str)
    }


def _leaf_rules(facts: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Each output leaf with its dtypes and its rule in words."""
    if not facts:
        return []
    return [
        {
            "name": name,
            "dtypes": dtypes,
            "rule": reference_docs.describe_rule(facts["rules"][name]),
        }
        for name, dtypes in facts["outputs"].items()
    ]


# An argument written longer than this is shown abbreviated, the whole value one click away.
ARGUMENT_SHOWN_CHARS = 60


def _arguments(kwargs: dict[str, Any] | None) -> list[dict[str, str | None]]:
    """Per argument, ``text`` ("name=value", each value as the suite file writes it, JSON)
    and, for a long list, ``full``: ``text`` is then the first values, the count and sum."""
    found: list[dict[str, str | None]] = []
    for name, value in sorted((kwargs or {}).items()):
        written = json.dumps(value)
        if len(written) <= ARGUMENT_SHOWN_CHARS or not isinstance(value, list):
            found.append({"text": f"{name}={written}", "full": None})
            continue
        head = ", ".join(json.dumps(item) for item in value[:3])
        summary = f"{len(value)} values"
        if all(isinstance(item, int) for item in value):
            summary += f", sum {sum(value)}"
        found.append({"text": f"{name}=[{head}, …] ({summary})", "full": f"{name}={written}"})
    return found


@dataclass(frozen=True)
class BestResult:
    """The best passing result of one shape among the ranked rows."""

    roofline_fraction: float
    submission_id: int
    title: str


def _best_per_shape(ranked: list[Score], slug: str) -> dict[str, BestResult]:
    """Shape id -> the best passing result among the ranked rows (ties: the better-ranked
    submission, as ``ranked`` is in ranking order). Reads the five columns it needs only
    (no run or submission row, none of their JSON)."""
    order = {row.run_id: index for index, row in enumerate(ranked)}
    results = sorted(
        ShapeResult.objects.filter(run_id__in=list(order), operator=slug, status="pass")
        .order_by()
        .values_list(
            "shape_id",
            "roofline_fraction",
            "run_id",
            "run__submission_id",
            "run__submission__title",
        ),
        key=lambda result: order[result[2]],
    )
    best: dict[str, BestResult] = {}
    for shape_id, fraction, _, submission_id, title in results:
        current = best.get(shape_id)
        if current is None or (fraction or 0) > current.roofline_fraction:
            best[shape_id] = BestResult(fraction or 0.0, submission_id, title)
    return best


def operator_detail(request: HttpRequest, slug: str) -> HttpResponse:
    """What an operator computes (its module's documentation and reference source), the
    dtypes and correctness rules it is judged by, its public shapes (arguments, weight, W/Q,
    T_sol on the chosen hardware) with the best result per shape, and its score across the
    board's ranked submissions. Ranks and rows come from the board's own selectors."""
    suite, hardware = _suite_and_hardware(request)
    if suite is None or hardware is None:
        raise Http404("No suite or hardware.")
    entry = next((op for op in suite.definition["operators"] if op["slug"] == slug), None)
    if entry is None:
        raise Http404(f"{slug} is not in {suite.slug}.")
    spec = _hardware_spec(hardware)
    # The board as its default view shows it (each submitter's best), with its ranks.
    rows = selectors.board(suite=suite, hardware=hardware).rows
    ranks = {row.score.pk: (row.rank, row.tied) for row in rows}
    ranked = [row.score for row in rows if not row.baseline]
    baselines = [row.score for row in rows if row.baseline]
    shapes = catalogue_selectors.operator_public_shapes(
        suite=suite,
        operator=slug,
        smoke=hardware.device_kind == HardwareProfile.DeviceKind.CPU,
    )
    best = _best_per_shape(ranked, slug)
    table = []
    for shape in shapes:
        moved = shape.q_read + shape.q_write
        flops = float(sum((shape.w_flops or {}).values()))
        try:
            t_sol_ms = 1e3 * t_sol_seconds(
                w_flops=shape.w_flops or {},
                q_read=shape.q_read,
                q_write=shape.q_write,
                hardware=spec,
            )
        except Exception:  # noqa: BLE001 - a path this profile lacks: shown as unknown
            t_sol_ms = None
        table.append(
            {
                "shape": shape,
                "weight": figures.significant(shape.weight),
                "init_args": _arguments(shape.init_kwargs),
                "input_args": _arguments(shape.input_kwargs),
                "work": [
                    (dtype, figures.si(value, "FLOP"))
                    for dtype, value in sorted((shape.w_flops or {}).items())
                ],
                "q_read": figures.si(shape.q_read, "B"),
                "q_write": figures.si(shape.q_write, "B"),
                "flops": flops,
                "bytes": moved,
                "intensity": flops / moved if moved else None,
                "intensity_text": figures.significant(flops / moved) if moved else figures.MISSING,
                "t_sol_ms": t_sol_ms,
                "t_sol": figures.duration_ms(t_sol_ms),
                "best": best.get(shape.shape_id),
            }
        )
    distribution = [
        {
            "submission": row.submission,
            "rank": ranks.get(row.pk, (None, False))[0],
            "tied": ranks.get(row.pk, (None, False))[1],
            "score": row.operator_scores.get(slug, 0.0),
        }
        for row in ranked
    ]
    suite_operator = catalogue_selectors.suite_operator(suite=suite, operator=slug)
    reference = _reference_page(slug, HARNESS_VERSION)
    context = {
        "suite": suite,
        "hardware": hardware,
        "operator": entry,
        "shapes": table,
        "dtype_paths": _dtype_paths(shapes),
        "reference": reference,
        "uploaded": (
            _uploaded_reference(suite_operator.sources)
            if reference is None and suite_operator is not None and suite_operator.sources
            else {}
        ),
        "leaves": _leaf_rules(reference["facts"] if reference else None),
        "distribution": distribution,
        "baselines": [
            {"submission": row.submission, "score": row.operator_scores.get(slug, 0.0)}
            for row in baselines
        ],
        "chart": (
            charts.operator_score_strip_figure(
                operator=slug,
                points=[
                    (
                        item["submission"].title,
                        f"{'=' if item['tied'] else ''}{item['rank']}",
                        item["score"],
                    )
                    for item in distribution
                ],
            )
            if distribution
            else None
        ),
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
