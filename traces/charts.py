"""Plotly figures of the trace pages, as JSON-ready dicts (drawn by static/js/charts.js
with the plotly bundle the site serves itself; every chart has a table beside it)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from evaluator.figures import percent

if TYPE_CHECKING:
    import pandas as pd


def _layout(title: str, **extra: Any) -> dict[str, Any]:
    return {
        "title": {"text": title},
        "margin": {"l": 70, "r": 20, "t": 50, "b": 110},
        "font": {"family": "system-ui, sans-serif", "size": 13},
        "legend": {"orientation": "h", "y": -0.35},
        **extra,
    }


def time_by_operator_figure(table: pd.DataFrame) -> dict[str, Any]:
    """Stacked bars: GPU time (ms) per operator, one colour per application."""
    operators = [str(op) for op in table["operator"].cat.categories] if len(table) else []
    data = []
    for application, group in table.groupby("application", sort=True):
        times = dict(zip(group["operator"].astype(str), group["time_us"], strict=True))
        data.append(
            {
                "type": "bar",
                "name": str(application),
                "x": operators,
                "y": [times.get(op, 0.0) / 1e3 for op in operators],
                "hovertemplate": "%{x}: %{y:.4g} ms<extra>" + str(application) + "</extra>",
            }
        )
    return {
        "data": data,
        "layout": _layout(
            "GPU time by operator",
            barmode="stack",
            yaxis={"title": {"text": "GPU time (ms)"}},
            height=440,
        ),
    }


def time_by_application_figure(table: pd.DataFrame) -> dict[str, Any]:
    """Stacked bars per application: mapped and unmapped GPU time (ms)."""
    names = [str(name) for name in table["application"]]
    return {
        "data": [
            {
                "type": "bar",
                "name": "mapped to suite operators",
                "x": names,
                "y": [v / 1e3 for v in table["mapped_us"]],
                "marker": {"color": "#116329"},
            },
            {
                "type": "bar",
                "name": "unmapped",
                "x": names,
                "y": [v / 1e3 for v in table["unmapped_us"]],
                "marker": {"color": "#b35900"},
            },
        ],
        "layout": _layout(
            "GPU time by application",
            barmode="stack",
            yaxis={"title": {"text": "GPU time (ms)"}},
            height=380,
        ),
    }


def coverage_figure(curve: pd.DataFrame, *, coverage: float | None = None) -> dict[str, Any]:
    """Cumulative share of the trace weight against the number of shapes kept."""
    data: list[dict[str, Any]] = [
        {
            "type": "scatter",
            "mode": "lines+markers",
            "name": "cumulative share",
            "x": [int(r) for r in curve["rank"]],
            "y": [float(v) for v in curve["cumulative_share"]],
            "text": [f"{op}" for op in curve["operator"]],
            "hovertemplate": "%{x} shapes: %{y:.3p}<br>last: %{text}<extra></extra>",
        }
    ]
    if coverage is not None and len(curve):
        data.append(
            {
                "type": "scatter",
                "mode": "lines",
                "name": f"chosen coverage {percent(coverage)}",
                "x": [1, int(curve["rank"].max())],
                "y": [coverage, coverage],
                "line": {"dash": "dot"},
            }
        )
    return {
        "data": data,
        "layout": _layout(
            "Coverage: shapes kept against their share of the weight",
            xaxis={"title": {"text": "shapes kept (heaviest first)"}},
            yaxis={"title": {"text": "share of the trace weight"}, "range": [0, 1.02]},
            height=380,
        ),
    }
