"""The compare page: two or more submissions (or a submission and a baseline) side by side,
per operator and per shape, with charts. The figures come from ``comparison.comparison_for``,
the computation the API (``/api/compare/``) and ``atrex compare`` serve, so the three can
never disagree; this module only lays them out."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from atrex_site import charts
from catalogue import selectors as catalogue_selectors
from evaluator import figures
from submissions.models import Submission
from submissions.selectors import submissions_visible_to
from submissions.views import reader_owns_submission

from . import selectors
from .comparison import ComparisonError, comparison_for, comparison_ids_parse

CANDIDATES_SHOWN = 40
"""Board rows offered as tick boxes under the form (baselines and the best ranked)."""


def points(delta: float | None) -> str:
    """A difference of two roofline fractions in percentage points: ``+2.31 pt``."""
    if delta is None:
        return figures.MISSING
    text = figures.significant(delta * 100)
    return f"+{text} pt" if delta > 0 else f"{text} pt"


def _candidates(request: HttpRequest, ids: list[int]) -> tuple[list[dict[str, Any]], str]:
    """Rows the viewer may tick: the board of the first named submission (or the default
    board): its baselines and best ranked rows, and the viewer's own evaluated submissions
    there. Returns them and the board's name."""
    first = submissions_visible_to(user=request.user).filter(pk__in=ids[:1]).first()
    suite = first.suite_version if first else catalogue_selectors.suite_version_pick(slug=None)
    hardware = first.hardware if first else catalogue_selectors.hardware_pick(slug=None)
    if suite is None or hardware is None:
        return [], ""
    rows = list(selectors.leaderboard_rows(suite=suite, hardware=hardware)[:CANDIDATES_SHOWN])
    rows.sort(key=lambda row: not row.submission.is_baseline)  # baselines first, as on the board
    # The ids already named stay in the text field, not in the list.
    candidates = [
        {"submission": row.submission, "aggregate": row.aggregate, "owner": row.submission.owner}
        for row in rows
        if row.submission.pk not in ids
    ]
    listed = {item["submission"].pk for item in candidates} | set(ids)
    if request.user.is_authenticated:
        own = (
            Submission.objects.filter(
                owner=request.user, suite_version=suite, hardware=hardware, runs__isnull=False
            )
            .exclude(pk__in=listed)
            .select_related("owner", "score")
            .distinct()
            .order_by("-created_at")[:CANDIDATES_SHOWN]
        )
        for submission in own:
            score = getattr(submission, "score", None)
            candidates.append(
                {
                    "submission": submission,
                    "aggregate": score.aggregate if score else None,
                    "owner": submission.owner,
                }
            )
    return candidates, f"{suite} on {hardware}"


def _tables(body: dict[str, Any], *, changed_only: bool) -> dict[str, Any]:
    """The comparison's figures laid out as the page's rows."""
    subs = body["submissions"]
    first, others = subs[0], subs[1:]
    keys = [sub["id"] for sub in subs]
    operator_rows = []
    for entry in body["operators"]:
        operator_rows.append(
            {
                "operator": entry["operator"],
                "importance": entry["importance"],
                "first": entry["scores"].get(first["id"]),
                "others": [
                    {
                        "score": entry["scores"].get(sub["id"]),
                        "delta": entry["delta"].get(sub["id"]),
                        "delta_text": points(entry["delta"].get(sub["id"])),
                        "speedup": entry["speedup_over_first"].get(sub["id"]),
                        "shapes": entry["speedup_shapes"].get(sub["id"], 0),
                    }
                    for sub in others
                ],
            }
        )
    groups: dict[str, list[dict[str, Any]]] = {}
    for shape in body["shapes"]:
        if changed_only and not shape["status_changed"]:
            continue
        base_status = shape["status"].get(first["id"], "missing")
        groups.setdefault(shape["operator"], []).append(
            {
                "shape_id": shape["shape_id"],
                "weight": shape["weight"],
                "changed": shape["status_changed"],
                "cells": [
                    {
                        "status": shape["status"].get(pk, "missing"),
                        "time_ms": shape["time_ms"].get(pk),
                        "fraction": shape["roofline_fraction"].get(pk),
                        "speedup": shape["speedup_over_first"].get(pk),
                        "is_first": pk == first["id"],
                        "changed_from": base_status
                        if pk != first["id"] and shape["status"].get(pk, "missing") != base_status
                        else None,
                    }
                    for pk in keys
                ],
            }
        )
    shape_groups = [
        {"operator": operator, "rows": rows, "changed": sum(row["changed"] for row in rows)}
        for operator, rows in groups.items()
    ]
    return {
        "first": first,
        "others": others,
        "operator_rows": operator_rows,
        "shape_groups": shape_groups,
        "shapes_shown": sum(len(group["rows"]) for group in shape_groups),
    }


def _short(sub: dict[str, Any], length: int = 32) -> str:
    """A submission's name in a chart's legend: its id and the start of its title."""
    title = sub["title"] if len(sub["title"]) <= length else sub["title"][: length - 1] + "…"
    return f"#{sub['id']} {title}"


def _figures(body: dict[str, Any]) -> dict[str, Any]:
    subs = body["submissions"]
    first, others = subs[0], subs[1:]
    operators = [entry["operator"] for entry in body["operators"]]
    label = {sub["id"]: _short(sub) for sub in subs}
    scores = charts.operator_scores_figure(
        operators=operators,
        series=[
            (
                label[sub["id"]],
                {e["operator"]: e["scores"].get(sub["id"]) for e in body["operators"]},
            )
            for sub in subs
        ],
        title="Operator scores",
    )
    speedups = [
        (
            label[sub["id"]],
            {e["operator"]: e["speedup_over_first"].get(sub["id"]) for e in body["operators"]},
        )
        for sub in others
    ]
    has_speedup = any(value for _, by_op in speedups for value in by_op.values())
    speedup = (
        charts.operator_speedup_figure(
            operators=operators,
            series=speedups,
            reference=f"#{first['id']}",
            title=f"Speed-up over #{first['id']}, per operator",
        )
        if has_speedup
        else None
    )
    return {"scores_chart": scores, "speedup_chart": speedup}


def reader_gets_their_own(reader: Any, *, request: HttpRequest, **_kwargs: Any) -> bool:
    """Whether the page is built for the signed-in ``reader`` alone (``shared_page``'s
    ``personal``): the form to pick submissions (fewer than two ids, or ids that do not
    parse), which lists their own submissions, or a comparison of one of their own (which
    may show them more than others). Any other comparison is the same for every reader who
    may see it (``comparison_for``), and one that others may not see is refused to the
    anonymous copy, so built for the reader too."""
    raw = [value for value in request.GET.getlist("submissions") if value.strip()]
    try:
        ids = comparison_ids_parse(raw)
    except ComparisonError:
        return True
    return len(ids) < 2 or any(reader_owns_submission(reader, pk) for pk in ids)


def compare(request: HttpRequest) -> HttpResponse:
    """``/compare/?submissions=12,15[&changed=1]``: the comparison of the named submissions
    (the first is the one the others are measured against), or the form to pick them, with
    what to fix when they cannot be compared."""
    raw = [value for value in request.GET.getlist("submissions") if value.strip()]
    changed_only = request.GET.get("changed") == "1"
    context: dict[str, Any] = {"raw": ", ".join(raw), "changed_only": changed_only}
    status = 200
    ids: list[int] = []
    try:
        ids = comparison_ids_parse(raw)
        if raw:
            body = comparison_for(ids=ids, user=request.user)
            context.update(body=body, **_tables(body, changed_only=changed_only), **_figures(body))
            context["raw"] = ", ".join(str(pk) for pk in ids)
            joined = ",".join(str(pk) for pk in ids)
            context["query_all"] = urlencode({"submissions": joined})
            context["query_changed"] = urlencode({"submissions": joined, "changed": "1"})
            others = len(ids) - 1
            context["operator_columns"] = 3 + 3 * others
            context["shape_columns"] = 2 + len(ids) + others
    except ComparisonError as error:
        context["error"] = str(error)
        context["error_code"] = error.code
        # One id (the submission page's "Compare with…") is a start, not a mistake.
        status = 200 if error.code == "compare:too-few" and ids else error.status
    if "body" not in context:
        context["candidates"], context["board_name"] = _candidates(request, ids)
        context["ticked"] = ids
    return render(request, "leaderboard/compare.html", context, status=status)
