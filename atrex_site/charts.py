"""Plotly figures for the pages, as plain JSON-ready dicts ({"data", "layout"}).

The figures are built here from rows the views already loaded, so that the server needs
only the plotly package's JavaScript (served by ``leaderboard.views.plotly_js``), and every
chart has a table next to it that works without JavaScript. Shared by the board
(``leaderboard``) and the submission pages (``submissions``), so it belongs to neither.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from evaluator import figures
from evaluator.hardware import DTYPE_TO_PATH

STATUS_COLOURS: dict[str, str] = {
    "pass": "#116329",
    "fallback": "#b35900",
    "incorrect": "#a40e26",
    "runtime_error": "#6e2b8f",
    "compile_error": "#6e2b8f",
    "timeout": "#4a5561",
    "missing": "#4a5561",
}
PATH_LABELS: dict[str, str] = {
    "bf16_tc": "bf16 tensor core",
    "fp16_tc": "fp16 tensor core",
    "fp8_e4m3_tc": "fp8 e4m3 tensor core",
    "fp32_tf32_tc": "tf32 tensor core",
    "fp32_strict": "fp32 (no tensor core)",
}


def _layout(title: str, **extra: Any) -> dict[str, Any]:
    return {
        "title": {"text": title, "yref": "container", "y": 1, "yanchor": "top", "pad": {"t": 12}},
        "margin": {"l": 70, "r": 20, "t": 50, "b": 60},
        "font": {"family": "system-ui, sans-serif", "size": 13},
        "legend": {"orientation": "h", "y": -0.2},
        **extra,
    }


# Axis formats (d3-format, as Plotly reads them), the charts' side of evaluator/figures.py:
# a roofline fraction reads as a percentage with up to three significant figures ("20%",
# "0.05%"; "p" multiplies by 100), never "80µ"; rates and sizes carry SI prefixes and their
# unit ("100 TFLOP/s", never "10¹⁵" beside "100T": `_log_axis` writes the ticks with
# evaluator/figures.py); hover labels keep three figures.
FRACTION_TICKS = ".3~p"
FRACTION_HOVER = ".3p"


def fraction_axis(title: str, **extra: Any) -> dict[str, Any]:
    """An axis of roofline fractions (stored 0..1), labelled as % of the roofline."""
    return {
        "title": {"text": title},
        "tickformat": FRACTION_TICKS,
        "hoverformat": FRACTION_HOVER,
        "rangemode": "tozero",
        **extra,
    }


# Horizontal bar charts: pixels per operator row for each series, and around the plot.
BAR_ROW_PX = 14
BAR_ROW_MIN_PX = 24
BAR_CHROME_PX = 130


def _log_ticks(low: float, high: float, label) -> dict[str, Any]:
    """Tick values and labels for a log axis over [low, high]: the decades, and 2 and 5
    between them where fewer than four decades are shown; labels written by ``label``."""
    first, last = math.floor(math.log10(low)), math.ceil(math.log10(high))
    steps = (1, 2, 5) if last - first < 4 else (1,)
    values = [
        step * 10.0**exponent
        for exponent in range(first, last + 1)
        for step in steps
        if low <= step * 10.0**exponent <= high
    ]
    return {"tickvals": values, "ticktext": [label(value) for value in values]}


def _log_axis(title: str, values: Iterable[float], label, *, include: float | None = None):
    """A log axis spanning ``values`` (and ``include``), ticks labelled by ``label``
    (plain decimals with units, never e-notation)."""
    positive = [value for value in values if value and value > 0]
    if include is not None:
        positive.append(include)
    low, high = (min(positive), max(positive)) if positive else (1.0, 10.0)
    low, high = low / 1.6, high * 1.6
    return {
        "type": "log",
        "title": {"text": title},
        "automargin": True,
        "range": [math.log10(low), math.log10(high)],
        **_log_ticks(low, high, label),
    }


def _percent_axis(title: str, top: float) -> dict[str, Any]:
    """A linear axis of fractions 0..``top`` written as percentages (``4.87%``)."""
    return fraction_axis(title, range=[0, top], zeroline=True)


def _si_label(unit: str):
    return lambda value: figures.si(value, unit, 1)


def _speedup_label(value: float) -> str:
    return figures.speedup(value, 2 if value < 1 else 1)


def shape_work(shape: Mapping[str, Any]) -> tuple[float, float]:
    """(W in FLOPs over every dtype, Q in bytes read and written) of a suite-file shape."""
    flops = float(sum((shape.get("w_flops") or {}).values()))
    return flops, float(shape.get("q_read", 0)) + float(shape.get("q_write", 0))


def roofline_points(
    *, shape_results: Iterable[Any], suite_shapes: Sequence[Mapping[str, Any]]
) -> tuple[list[dict[str, Any]], int]:
    """Measured shapes as roofline points and how many could not be placed.

    A point needs W > 0, Q > 0 and a measured time: x = W/Q (FLOP/byte), y = W / time
    (FLOP/s). Shapes with no FLOPs or no time are counted, not drawn.
    """
    work = {(s["operator"], str(s["shape_id"])): shape_work(s) for s in suite_shapes}
    points, skipped = [], 0
    for result in shape_results:
        flops, moved = work.get((result.operator, str(result.shape_id)), (0.0, 0.0))
        if flops <= 0 or moved <= 0 or not result.time_ms:
            skipped += 1
            continue
        points.append(
            {
                "operator": result.operator,
                "shape_id": result.shape_id,
                "status": result.status,
                "intensity": flops / moved,
                "flops_per_s": flops / (result.time_ms / 1e3),
                "roofline_fraction": result.roofline_fraction,
            }
        )
    return points, skipped


def roofline_figure(
    *,
    points: Sequence[Mapping[str, Any]],
    peak_flops: Mapping[str, float],
    hbm_bytes_per_s: float,
    hardware_name: str,
) -> dict[str, Any]:
    """Log-log roofline: the memory slope B·AI up to each dtype path's compute ceiling,
    and the measured points coloured by status."""
    ridges = [peak / hbm_bytes_per_s for peak in peak_flops.values()] or [1.0]
    intensities = [p["intensity"] for p in points] or ridges
    x_low = min(min(intensities), min(ridges)) / 4
    x_high = max(max(intensities), max(ridges)) * 4
    data: list[dict[str, Any]] = []
    used_paths = set(DTYPE_TO_PATH.values())
    for path, peak in sorted(peak_flops.items(), key=lambda item: -item[1]):
        if path not in used_paths:
            continue
        ridge = peak / hbm_bytes_per_s
        data.append(
            {
                "type": "scatter",
                "mode": "lines",
                "name": f"roofline: {PATH_LABELS.get(path, path)}",
                "x": [x_low, ridge, x_high],
                "y": [hbm_bytes_per_s * x_low, peak, peak],
                "line": {"width": 1.5, "dash": "dot" if path != "bf16_tc" else "solid"},
                "hovertemplate": f"{path}: {figures.si(peak, 'FLOP/s')}<extra></extra>",
            }
        )
    by_status: dict[str, list[Mapping[str, Any]]] = {}
    for point in points:
        by_status.setdefault(point["status"], []).append(point)
    for status, group in sorted(by_status.items()):
        data.append(
            {
                "type": "scatter",
                "mode": "markers",
                "name": status,
                "x": [p["intensity"] for p in group],
                "y": [p["flops_per_s"] for p in group],
                "text": [
                    f"{p['operator']} #{p['shape_id']}<br>"
                    f"{figures.roofline_percent(p['roofline_fraction'])} of the roofline<br>"
                    f"{figures.significant(p['intensity'])} FLOP/byte, "
                    f"{figures.si(p['flops_per_s'], 'FLOP/s')}"
                    for p in group
                ],
                "marker": {"size": 9, "color": STATUS_COLOURS.get(status, "#0b5cad")},
                "hovertemplate": "%{text}<extra></extra>",
            }
        )
    return {
        "data": data,
        "layout": _layout(
            f"Roofline on {hardware_name}",
            xaxis=_log_axis(
                "arithmetic intensity W/Q (FLOP/byte)",
                [x_low * 1.6, x_high / 1.6],
                lambda value: figures.significant(value, 1),
            ),
            yaxis=_log_axis(
                "achieved FLOP/s",
                [hbm_bytes_per_s * x_low * 1.6, *peak_flops.values()]
                + [p["flops_per_s"] for p in points],
                _si_label("FLOP/s"),
            ),
            height=480,
        ),
    }


def _bar_height(operators: int, series: int) -> int:
    """Pixels for a horizontal bar chart: every operator row stays readable."""
    return BAR_CHROME_PX + 22 * series + operators * max(BAR_ROW_MIN_PX, BAR_ROW_PX * series + 8)


def _bar_layout(title: str, *, operators: int, series: int, order: list[str], **extra):
    """A horizontal bar chart's layout: the title at the top, the legend (one line a series)
    under it, the operators down the side in ``order`` (bottom to top)."""
    return _layout(
        title,
        barmode="group",
        height=_bar_height(operators, series),
        margin={"l": 190, "r": 20, "t": 50 + 22 * series, "b": 60},
        legend={
            "orientation": "h",
            "y": 1.0,
            "yanchor": "bottom",
            "x": 0,
            "xanchor": "left",
            "traceorder": "reversed",
        },
        yaxis={"categoryorder": "array", "categoryarray": order, "automargin": True},
        **extra,
    )


def _horizontal_bars(
    *,
    operators: Sequence[str],
    series: Sequence[tuple[str, Mapping[str, float | None]]],
    label,
    sort_by: Mapping[str, float | None],
    missing: str,
) -> tuple[list[dict[str, Any]], list[str]]:
    """Bars (one trace per series) over operators sorted by ``sort_by``, highest at the
    top; operators no series has a value for sit at the bottom, labelled so."""
    valued = {op for op in operators if any(values.get(op) is not None for _, values in series)}
    # Operators no series has a value for are labelled with ``missing`` and sit at the bottom.
    order = sorted(
        operators,
        key=lambda op: (op in valued, sort_by.get(op) if sort_by.get(op) is not None else -1.0),
    )
    names = {op: op if op in valued else f"{op} ({missing})" for op in order}
    # Traces in reverse, legend reversed back: the first series is the top bar of each
    # operator's group and the first in the legend.
    data = [
        {
            "type": "bar",
            "orientation": "h",
            "name": name,
            "y": [names[op] for op in order],
            "x": [values.get(op) for op in order],
            "text": [label(values.get(op)) if values.get(op) is not None else "" for op in order],
            "hovertemplate": "%{y}: %{text}<extra>" + name + "</extra>",
            "textposition": "none",
        }
        for name, values in reversed(series)
    ]
    return data, [names[op] for op in order]


def operator_speedup_figure(
    *,
    operators: Sequence[str],
    series: Sequence[tuple[str, Mapping[str, float | None]]],
    reference: str,
    title: str,
) -> dict[str, Any]:
    """Horizontal bars, one row per operator (sorted, best at the top): each series' speed-up
    over ``reference`` (its time over theirs), on a log axis with a line at 1×. The height
    grows with the number of operators so that 30 stay readable."""
    data, order = _horizontal_bars(
        operators=operators,
        series=series,
        label=_speedup_label,
        sort_by=series[0][1],
        missing="not timed",
    )
    values = [value for _, by_op in series for value in by_op.values() if value]
    return {
        "data": data,
        "layout": _bar_layout(
            title,
            operators=len(order),
            series=len(series),
            order=order,
            xaxis=_log_axis(f"speed-up over {reference}", values, _speedup_label, include=1.0),
            shapes=[
                {
                    "type": "line",
                    "xref": "x",
                    "yref": "paper",
                    "x0": 1,
                    "x1": 1,
                    "y0": 0,
                    "y1": 1,
                    "line": {"color": "#4a5561", "width": 1.5, "dash": "dash"},
                }
            ],
        ),
    }


def operator_scores_figure(
    *,
    operators: Sequence[str],
    series: Sequence[tuple[str, Mapping[str, float | None]]],
    title: str,
) -> dict[str, Any]:
    """Horizontal bars of operator scores (fractions of the roofline, written as
    percentages), one row per operator sorted by its best score, height growing with the
    number of operators."""
    best = {
        op: max((v for _, by_op in series if (v := by_op.get(op)) is not None), default=None)
        for op in operators
    }
    data, order = _horizontal_bars(
        operators=operators,
        series=series,
        label=figures.roofline_percent,
        sort_by=best,
        missing="no score",
    )
    top = max((value for _, by_op in series for value in by_op.values() if value), default=0.0)
    return {
        "data": data,
        "layout": _bar_layout(
            title,
            operators=len(order),
            series=len(series),
            order=order,
            xaxis=_percent_axis("operator score (% of the roofline)", top * 1.1 or 0.01),
        ),
    }


DAY = timedelta(days=1)


def _date_range(dates: Sequence[datetime]) -> tuple[datetime, datetime]:
    """The x range of a time chart: the dates with a margin, at least a day on each side
    (one point, or points seconds apart, still get a calendar axis)."""
    low, high = min(dates), max(dates)
    pad = max((high - low) * 0.05, DAY)
    return low - pad, high + pad


def history_figure(
    *,
    records: Sequence[Mapping[str, Any]],
    results: Sequence[Mapping[str, Any]] = (),
    baselines: Sequence[Mapping[str, Any]] = (),
    title: str,
) -> dict[str, Any]:
    """The best aggregate over time: a step line through the results that set a new best
    (``records``), every published result as a faint point (``results``), and each
    baseline as a dashed level from its publication on. Each item: ``at`` (a datetime),
    ``aggregate``, ``title``.

    The x axis is a calendar (days, never sub-second ticks), the y axis percentages from 0.
    With nothing to draw, the figure is ``{"message": ...}`` and no axes are drawn."""
    every = [*records, *results, *baselines]
    if not every:
        return {"message": "No history yet: nothing has been published on this board."}
    x_low, x_high = _date_range([item["at"] for item in every])
    top = max(item["aggregate"] or 0.0 for item in every)
    data: list[dict[str, Any]] = []
    if results:
        data.append(
            {
                "type": "scatter",
                "mode": "markers",
                "name": "every published submission",
                "x": [item["at"].isoformat() for item in results],
                "y": [item["aggregate"] for item in results],
                "text": [
                    f"{item['title']}: {figures.roofline_percent(item['aggregate'])}"
                    for item in results
                ],
                "marker": {"size": 6, "color": "#9aa5b1"},
                "hovertemplate": "%{text}<extra></extra>",
            }
        )
    if records:
        # The step line holds the last best up to the right edge (it is still the best).
        data.append(
            {
                "type": "scatter",
                "mode": "lines+markers",
                "line": {"shape": "hv", "color": "#0b5cad", "width": 2.5},
                "name": "best submission so far",
                "x": [item["at"].isoformat() for item in records] + [x_high.isoformat()],
                "y": [item["aggregate"] for item in records] + [records[-1]["aggregate"]],
                "text": [
                    f"{item['title']}: {figures.roofline_percent(item['aggregate'])}"
                    for item in records
                ]
                + [f"still the best: {records[-1]['title']}"],
                "marker": {"size": [9] * len(records) + [0], "color": "#0b5cad"},
                "hovertemplate": "%{text}<extra></extra>",
            }
        )
    for item in baselines:
        data.append(
            {
                "type": "scatter",
                "mode": "lines+markers",
                "line": {"dash": "dash", "width": 1.5},
                "name": f"baseline: {item['title']}",
                "x": [item["at"].isoformat(), x_high.isoformat()],
                "y": [item["aggregate"], item["aggregate"]],
                "text": [f"baseline {item['title']}: {figures.roofline_percent(item['aggregate'])}"]
                * 2,
                "marker": {"size": [8, 0]},
                "hovertemplate": "%{text}<extra></extra>",
            }
        )
    days = (x_high - x_low) / DAY
    xaxis: dict[str, Any] = {
        "type": "date",
        "title": {"text": "published"},
        "range": [x_low.isoformat(), x_high.isoformat()],
        "tickformat": "%Y-%m-%d",
    }
    if days <= 14:
        xaxis["dtick"] = 86_400_000  # one tick a day (milliseconds)
    return {
        "data": data,
        "layout": _layout(
            title,
            xaxis=xaxis,
            yaxis=_percent_axis("aggregate score (% of the roofline)", top * 1.15 or 0.01),
            legend={"orientation": "h", "y": -0.25},
            margin={"l": 70, "r": 20, "t": 50, "b": 90},
            height=420,
        ),
    }


def operator_score_strip_figure(
    *, operator: str, points: Sequence[tuple[str, str | None, float]]
) -> dict[str, Any]:
    """One operator's score (% of roofline) across the board's ranked submissions: a dot per
    submission on one horizontal axis, labelled with its board rank and title on hover.
    ``points`` are (title, board rank as the board writes it, "=1" for a tie, operator score
    as a fraction) in ranking order."""
    return {
        "data": [
            {
                "type": "scatter",
                "mode": "markers",
                "name": operator,
                "x": [100 * score for _, _, score in points],
                "y": [0 for _ in points],
                "text": [
                    f"{'#' + str(rank) if rank is not None else 'unranked'} {title}"
                    for title, rank, _ in points
                ],
                "hovertemplate": "%{text}<br>%{x:.3~r}% of roofline<extra></extra>",
                "marker": {"size": 12, "opacity": 0.75, "color": "#0b3d7a"},
            }
        ],
        "layout": _layout(
            "Score of each ranked submission",
            xaxis={"title": {"text": "% of roofline"}, "rangemode": "tozero", "zeroline": True},
            yaxis={"visible": False, "range": [-1, 1], "fixedrange": True},
            height=220,
            margin={"l": 30, "r": 20, "t": 50, "b": 60},
        ),
    }
