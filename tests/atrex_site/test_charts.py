"""The figures (``atrex_site/charts.py``) as the pages embed them: pure functions of rows,
checked on their dicts (what Plotly is told to draw)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from atrex_site import charts

AT = datetime(2026, 12, 2, 10, 0, tzinfo=UTC)


def _item(title: str, aggregate: float, seconds: float = 0.0) -> dict:
    return {"at": AT + timedelta(seconds=seconds), "aggregate": aggregate, "title": title}


def test_one_point_history_has_a_calendar_axis_and_a_y_range_from_zero():
    figure = charts.history_figure(records=[_item("only", 0.042)], title="t")
    layout = figure["layout"]
    assert layout["yaxis"]["range"][0] == 0
    assert layout["yaxis"]["range"][1] > 0.042  # the point is inside, not on the edge
    assert layout["yaxis"]["tickformat"] == charts.FRACTION_TICKS  # percentages, not fractions
    xaxis = layout["xaxis"]
    assert xaxis["type"] == "date" and xaxis["tickformat"] == "%Y-%m-%d"
    low, high = (datetime.fromisoformat(end) for end in xaxis["range"])
    assert high - low >= timedelta(days=2)  # a day either side, never sub-millisecond ticks
    assert xaxis["dtick"] == 86_400_000


def test_points_seconds_apart_still_get_days_and_baselines_are_drawn():
    figure = charts.history_figure(
        records=[_item("a", 0.01), _item("b", 0.02, seconds=3)],
        results=[_item("a", 0.01), _item("b", 0.02, seconds=3), _item("c", 0.005, seconds=5)],
        baselines=[_item("torch.compile", 0.0, seconds=1), _item("triton", 0.03, seconds=2)],
        title="t",
    )
    names = [trace["name"] for trace in figure["data"]]
    assert names == [
        "every published submission",
        "best submission so far",
        "baseline: torch.compile",
        "baseline: triton",
    ]
    low, high = (datetime.fromisoformat(end) for end in figure["layout"]["xaxis"]["range"])
    assert high - low >= timedelta(days=2)
    assert figure["layout"]["yaxis"]["range"] == [0, 0.03 * 1.15]


def test_a_board_of_baselines_only_has_a_history():
    figure = charts.history_figure(records=[], baselines=[_item("eager", 0.0)], title="t")
    assert "message" not in figure and figure["data"][0]["name"] == "baseline: eager"
    assert figure["layout"]["yaxis"]["range"][1] > 0  # an all-zero board still has a y axis


def test_empty_history_is_a_message_not_empty_axes():
    figure = charts.history_figure(records=[], results=[], baselines=[], title="t")
    assert figure == {"message": "No history yet: nothing has been published on this board."}


def test_thirty_operators_are_horizontal_sorted_bars_of_speedups_sized_to_fit():
    operators = [f"op_{n:02d}" for n in range(30)]
    speedups = {op: 0.5 + n / 10 for n, op in enumerate(operators)}
    speedups["op_07"] = None  # not timed by both
    figure = charts.operator_speedup_figure(
        operators=operators,
        series=[("this", speedups), ("best", dict.fromkeys(operators, 1.2))],
        reference="torch.compile",
        title="t",
    )
    bars = figure["data"]
    assert all(trace["orientation"] == "h" and trace["type"] == "bar" for trace in bars)
    layout = figure["layout"]
    order = layout["yaxis"]["categoryarray"]
    assert len(order) == 30 and order[-1] == "op_29"  # the fastest at the top
    assert order.index("op_07") == 0  # valued by "best" only: sorted as the lowest
    # Every row keeps at least two bars' room: the chart grows with the operators.
    assert layout["height"] >= 30 * 2 * charts.BAR_ROW_PX
    assert layout["xaxis"]["type"] == "log" and layout["shapes"][0]["x0"] == 1
    assert "1×" in layout["xaxis"]["ticktext"]
    assert all("e" not in text for text in layout["xaxis"]["ticktext"])


def test_operators_nobody_has_a_value_for_are_labelled_and_put_last():
    figure = charts.operator_scores_figure(
        operators=["a", "b", "c"],
        series=[("x", {"a": 0.1, "b": None, "c": 0.3})],
        title="t",
    )
    assert figure["layout"]["yaxis"]["categoryarray"] == ["b (no score)", "a", "c"]
    assert figure["layout"]["xaxis"]["tickformat"] == charts.FRACTION_TICKS


def test_roofline_axes_are_written_with_si_units():
    figure = charts.roofline_figure(
        points=[
            {
                "operator": "rms_norm",
                "shape_id": "0",
                "status": "pass",
                "intensity": 0.5,
                "flops_per_s": 2e12,
                "roofline_fraction": 0.4,
            }
        ],
        peak_flops={"bf16_tc": 989.4e12},
        hbm_bytes_per_s=4.8e12,
        hardware_name="H200",
    )
    ticks = figure["layout"]["yaxis"]["ticktext"]
    assert "1 TFLOP/s" in ticks and "100 TFLOP/s" in ticks
    assert all("e+" not in text for text in ticks)
