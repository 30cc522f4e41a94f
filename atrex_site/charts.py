"""Plotly figures for the pages, as plain JSON-ready dicts ({"data", "layout"}).

The figures are built here from rows the views already loaded, so that the server needs
only the plotly package's JavaScript (served by ``leaderboard.views.plotly_js``), and every
chart has a table next to it that works without JavaScript. Shared by the board
(``leaderboard``) and the submission pages (``submissions``), so it belongs to neither.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from evaluator.figures import roofline_percent
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
        "title": {"text": title},
        "margin": {"l": 70, "r": 20, "t": 50, "b": 60},
        "font": {"family": "system-ui, sans-serif", "size": 13},
        "legend": {"orientation": "h", "y": -0.2},
        **extra,
    }


# Axis formats (d3-format, as Plotly reads them), the charts' side of evaluator/figures.py:
# a roofline fraction reads as a percentage with up to three significant figures ("20%",
# "0.05%"; "p" multiplies by 100), never "80µ"; rates and sizes carry SI prefixes and their
# unit ("100TFLOP/s", never "10¹⁵" beside "100T"); hover labels keep three figures.
FRACTION_TICKS = ".3~p"
FRACTION_HOVER = ".3p"
SI_TICKS = "~s"
PLAIN_TICKS = "~r"


def fraction_axis(title: str, **extra: Any) -> dict[str, Any]:
    """An axis of roofline fractions (stored 0..1), labelled as % of the roofline."""
    return {
        "title": {"text": title},
        "tickformat": FRACTION_TICKS,
        "hoverformat": FRACTION_HOVER,
        "rangemode": "tozero",
        **extra,
    }


def rate_axis(title: str, unit: str, **extra: Any) -> dict[str, Any]:
    """A logarithmic axis of a rate or size with SI-prefixed ticks that carry the unit
    (``1PFLOP/s``, ``100TFLOP/s``); the margin grows to fit them."""
    return {
        "type": "log",
        "title": {"text": title},
        "tickformat": SI_TICKS,
        "ticksuffix": unit,
        "exponentformat": "SI",
        "automargin": True,
        **extra,
    }


def log_axis(title: str, **extra: Any) -> dict[str, Any]:
    """A logarithmic axis of plain numbers (0.25, 10, 1000), never e-notation."""
    return {
        "type": "log",
        "title": {"text": title},
        "tickformat": PLAIN_TICKS,
        "exponentformat": "none",
        **extra,
    }


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
                "hovertemplate": f"{path}: %{{y:.3s}}FLOP/s<extra></extra>",
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
                    f"{roofline_percent(p['roofline_fraction'])} of roofline"
                    for p in group
                ],
                "marker": {"size": 9, "color": STATUS_COLOURS.get(status, "#0b5cad")},
                "hovertemplate": "%{text}<br>AI %{x:.3r} FLOP/B<br>%{y:.3s}FLOP/s<extra></extra>",
            }
        )
    return {
        "data": data,
        "layout": _layout(
            f"Roofline on {hardware_name}",
            xaxis=log_axis("arithmetic intensity W/Q (FLOP/byte)"),
            yaxis=rate_axis("achieved", "FLOP/s"),
            height=480,
        ),
    }


def operator_bars_figure(
    *, operators: Sequence[str], series: Sequence[tuple[str, Mapping[str, float]]]
) -> dict[str, Any]:
    """Grouped bars: one series (name, operator -> score) per compared submission."""
    return {
        "data": [
            {
                "type": "bar",
                "name": name,
                "x": list(operators),
                "y": [scores.get(op) for op in operators],
            }
            for name, scores in series
        ],
        "layout": _layout(
            "Operator scores against the board",
            barmode="group",
            yaxis=fraction_axis("operator score (% of roofline)"),
            height=420,
        ),
    }


def distribution_figure(*, operator: str, scores: Sequence[float]) -> dict[str, Any]:
    """Box plot (with every point) of one operator's score across submissions."""
    return {
        "data": [
            {
                "type": "box",
                "name": operator,
                "y": list(scores),
                "boxpoints": "all",
                "jitter": 0.4,
                "pointpos": 0,
            }
        ],
        "layout": _layout(
            f"{operator}: operator score across published submissions",
            yaxis=fraction_axis("operator score (% of roofline)"),
            height=380,
        ),
    }


def history_figure(*, points: Sequence[Mapping[str, Any]], title: str) -> dict[str, Any]:
    """Best aggregate over time (a step line through the record-setting results)."""
    return {
        "data": [
            {
                "type": "scatter",
                "mode": "lines+markers",
                "line": {"shape": "hv"},
                "name": "best aggregate",
                "x": [p["at"].isoformat() for p in points],
                "y": [p["best"] for p in points],
                "text": [p["title"] for p in points],
                "hovertemplate": f"%{{text}}<br>%{{y:{FRACTION_HOVER}}}<extra></extra>",
            }
        ],
        "layout": _layout(
            title,
            xaxis={"title": {"text": "published"}},
            yaxis=fraction_axis("best aggregate score (% of roofline)"),
            height=400,
        ),
    }


def operator_score_strip_figure(
    *, operator: str, points: Sequence[tuple[str, int | None, float]]
) -> dict[str, Any]:
    """One operator's score (% of roofline) across the board's ranked submissions: a dot per
    submission on one horizontal axis, labelled with its board rank and title on hover.
    ``points`` are (title, board rank, operator score as a fraction) in ranking order."""
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
