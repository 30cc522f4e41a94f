"""One way to write figures for people: percentages of the roofline with three significant
figures, never e-notation, never 0 for a positive value; SI prefixes for times and rates."""

from __future__ import annotations

import math

import pytest

from evaluator.figures import duration_ms, roofline_percent, si, significant, speedup


@pytest.mark.parametrize(
    "fraction, shown",
    [
        (0.0503, "5.03%"),
        (5.66e-05, "0.00566%"),  # a CPU development score, printed as 5.66e-05 before
        (6.22e-04, "0.0622%"),
        (0.51, "51.0%"),
        (0.80, "80.0%"),
        (1.0, "100%"),
        (0.9996, "100%"),
        (0.0, "0%"),
        (-0.0123, "-1.23%"),  # a negative difference keeps its sign and its figures
        (None, "—"),
        (float("nan"), "—"),
        ("not a number", "—"),
    ],
)
def test_roofline_fractions_read_as_percentages(fraction, shown):
    assert roofline_percent(fraction) == shown


@pytest.mark.parametrize("value", [1e-12, 3.3e-9, 5.66e-05, 0.1, 1.0, 12.5, 1234.5, 9.996e7])
def test_significant_never_uses_e_notation_and_keeps_the_value(value):
    text = significant(value)
    assert "e" not in text.lower() and float(text) != 0
    assert math.isclose(float(text), value, rel_tol=5e-3)


def test_significant_keeps_three_figures_with_trailing_zeros():
    assert [significant(v) for v in (3.2, 12.0, 100.0, 9.996, 1234.5)] == [
        "3.20", "12.0", "100", "10.0", "1230"
    ]  # fmt: skip
    assert significant(float("nan")) == "—" and significant(None) == "—"
    assert significant(-0.000123456) == "-0.000123" and significant(0) == "0"
    assert significant(float("inf")) == "∞" and significant(True) == "—"
    assert significant(1234.5, 4) == "1235" and significant(0.5, 1) == "0.5"


def test_times_and_rates_carry_si_prefixes():
    assert duration_ms(1.71e-3) == "1.71 µs"
    assert duration_ms(0.0689) == "68.9 µs"
    assert duration_ms(3.2) == "3.20 ms"
    assert duration_ms(2500) == "2.50 s"
    assert si(4.8e12, "B/s") == "4.80 TB/s"
    assert si(989e12, "FLOP/s") == "989 TFLOP/s"
    assert si(1.2e15, "FLOP/s") == "1.20 PFLOP/s"
    assert speedup(10.27) == "10.3×" and speedup(None) == "—"
    assert duration_ms(0) == "0 ms" and duration_ms(None) == "—"


def test_a_figure_rounded_up_moves_to_the_next_unit():
    assert duration_ms(0.9996) == "1.00 ms"  # not "1000 µs"
    assert si(999.6e9, "B/s") == "1.00 TB/s"  # not "1000 GB/s"
    assert duration_ms(1.71e-6) == "1.71 ns"  # the "1.71e-06 ms"


def test_the_evaluators_table_never_prints_zero_for_a_positive_score():
    from evaluator.cli import results_table

    results = {
        "operators": [
            {"operator": "rms_norm", "status": "ok", "score": 2.345e-05,
             "shapes": [{"shape_id": "smoke-1", "status": "pass", "weight": 1.0,
                         "roofline_fraction": 2.345e-05}]},
            {"operator": "silu_and_mul", "status": "ok", "score": 0.4043, "shapes": []},
        ],
        "scores": {"aggregate": 3.1e-05, "real_pass_rate": 0.5, "fallback_rate": 0.0},
    }  # fmt: skip
    lines = results_table(results).splitlines()
    assert lines[1].split()[:3] == ["rms_norm", "pass", "0.00235%"]  # 2.345 rounded half up
    assert lines[2].split()[:3] == ["silu_and_mul", "failed", "40.4%"]
    assert lines[1].index("%") == lines[2].index("%")  # right-aligned
    assert lines[-1].startswith("aggregate 0.00310% of the roofline")
    assert "0.0000" not in "\n".join(lines)
