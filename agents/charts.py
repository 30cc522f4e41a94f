"""The per-round chart of a campaign (a Plotly figure as a JSON-ready dict): each
operator's score on the public shapes, round by round, so a reader sees the loop converge
or stall. The table beside it carries the same figures."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from atrex_site.charts import fraction_axis


def rounds_figure(*, rounds: Iterable[Any]) -> dict[str, Any] | None:
    """One line per operator: x = round, y = weighted roofline fraction on public shapes
    (a shape that did not pass counts 0); a gap where the agent failed; a star on the kept
    round."""
    by_operator: dict[str, list[Any]] = {}
    for row in rounds:
        by_operator.setdefault(row.operator, []).append(row)
    if not by_operator:
        return None
    data: list[dict[str, Any]] = []
    for operator, rows in by_operator.items():
        rows = sorted(rows, key=lambda row: row.number)
        data.append(
            {
                "type": "scatter",
                "mode": "lines+markers",
                "name": operator,
                "legendgroup": operator,
                "x": [row.number for row in rows],
                "y": [row.score if row.status == "evaluated" else None for row in rows],
                "text": [
                    (
                        f"{row.error_code}"
                        if row.status != "evaluated"
                        else ("all public shapes pass" if row.all_pass else "not all shapes pass")
                    )
                    for row in rows
                ],
                "hovertemplate": "%{fullData.name} round %{x}: %{y:.3p} (%{text})<extra></extra>",
                "connectgaps": False,
            }
        )
        kept = [row for row in rows if row.kept]
        if kept:
            data.append(
                {
                    "type": "scatter",
                    "mode": "markers",
                    "name": f"{operator}: kept",
                    "legendgroup": operator,
                    "showlegend": False,
                    "marker": {"symbol": "star", "size": 14},
                    "x": [row.number for row in kept],
                    "y": [row.score for row in kept],
                    "hovertemplate": "kept: round %{x}, %{y:.3p}<extra></extra>",
                }
            )
    return {
        "data": data,
        "layout": {
            "title": {"text": "Roofline fraction on the public shapes, per round"},
            "margin": {"l": 70, "r": 20, "t": 50, "b": 60},
            "font": {"family": "system-ui, sans-serif", "size": 13},
            "legend": {"orientation": "h", "y": -0.25},
            "xaxis": {"title": {"text": "round"}, "dtick": 1},
            "yaxis": fraction_axis("operator score (% of roofline)"),
        },
    }
