"""The CPU-side parts of two CUDA-only benchmarks: which rows bench/do_bench_agreement.py
counts as agreeing, and which shapes bench/rms_norm_configs.py sweeps."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))

from do_bench_agreement import _agreement  # noqa: E402
from rms_norm_configs import pick_shapes  # noqa: E402

from evaluator.suite import load_suite  # noqa: E402


def _row(timer_vs_do_bench: float, timer_vs_graph: float | None) -> dict:
    return {
        "ratio_timer_vs_do_bench": timer_vs_do_bench,
        "ratio_timer_vs_do_bench_graph": timer_vs_graph,
    }


def test_agreement_counts_each_do_bench_figure_on_its_own():
    # mrope-like: the wrapper's host time in plain do_bench (0.65), not in the graph's
    rows = [_row(0.99, 0.995), _row(0.65, 0.999), _row(1.04, None)]
    summary = _agreement(rows)
    assert summary["shapes"] == 3
    assert summary["do_bench"]["compared"] == 3
    assert summary["do_bench"]["within_5pct"] == 2
    assert summary["do_bench"]["max_abs_deviation"] == pytest.approx(0.35)
    # a row whose call could not be captured is left out of the graph figures, not counted
    assert summary["do_bench_graph"]["compared"] == 2
    assert summary["do_bench_graph"]["within_5pct"] == 2
    assert summary["do_bench_graph"]["max_abs_deviation"] == pytest.approx(0.005)
    assert summary["published"]["compared"] == 0


def test_rms_norm_sweep_takes_the_largest_shape_of_each_hidden_size():
    suite = load_suite("atrex-bench-v1")
    shapes = pick_shapes(suite, None)
    hidden = [s.input_kwargs["hidden_size"] for s in shapes]
    assert hidden == sorted(set(hidden))
    everything = suite.shapes_for("rms_norm", "full")
    assert len(shapes) < len(everything)

    def moved(shape):
        return shape.q_read + shape.q_write

    for shape in shapes:
        same = [
            s
            for s in everything
            if s.input_kwargs["hidden_size"] == shape.input_kwargs["hidden_size"]
        ]
        assert moved(shape) == max(moved(s) for s in same)
    by_1152 = next(s for s in shapes if s.input_kwargs["hidden_size"] == 1152)
    assert str(by_1152.shape_id) == "14"  # 65,556 tokens: the suite's largest at 1152
    assert [str(s.shape_id) for s in pick_shapes(suite, ["14", "27"])] == ["14", "27"]
