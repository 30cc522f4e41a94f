"""Scoring: hand-computed scores, and no credit for fallbacks or wrong answers."""

from __future__ import annotations

import math

import pytest

from evaluator.errors import PlatformError
from evaluator.scoring import (
    FAILURE_STATUSES,
    SHAPE_STATUSES,
    aggregate_score,
    operator_score,
    shape_score,
    summarize,
)


def _shape(
    shape_id, status, *, weight=1.0, fraction=None, speedup=None, time_ms=None, spread_ms=None
):
    return {
        "shape_id": shape_id,
        "weight": weight,
        "status": status,
        "roofline_fraction": fraction,
        "speedup": speedup,
        "time_ms": time_ms,
        "time_spread_ms": spread_ms,
    }


# Two operators, importance 0.75 / 0.25, shapes of different weights and statuses.
# alpha = (2*0.5 + 1*0 + 1*0.2) / 4 = 0.3     (the fallback scores 0 despite fraction 0.9)
# beta  = (1*0 + 3*0.6) / 4          = 0.45    (the loud failure loses only its shape)
# aggregate = 0.75*0.3 + 0.25*0.45   = 0.3375
OPERATORS = [
    {
        "operator": "alpha",
        "shapes": [
            _shape("0", "pass", weight=2.0, fraction=0.5, speedup=2.0, time_ms=1.0, spread_ms=0.1),
            _shape(
                "1", "fallback", weight=1.0, fraction=0.9, speedup=5.0, time_ms=0.5, spread_ms=0.01
            ),
            _shape("2", "pass", weight=1.0, fraction=0.2, speedup=0.5, time_ms=2.0, spread_ms=0.0),
        ],
    },
    {
        "operator": "beta",
        "shapes": [
            _shape("0", "runtime_error", weight=1.0, fraction=0.8, speedup=10.0),
            _shape("1", "pass", weight=3.0, fraction=0.6, speedup=4.0, time_ms=1.0, spread_ms=0.05),
        ],
    },
]
IMPORTANCE = {"alpha": 0.75, "beta": 0.25}


def test_operator_scores_are_weighted_means_of_shape_scores():
    assert operator_score(OPERATORS[0]["shapes"]) == pytest.approx(0.3, abs=1e-15)
    assert operator_score(OPERATORS[1]["shapes"]) == pytest.approx(0.45, abs=1e-15)


def test_aggregate_is_importance_weighted():
    scores = {"alpha": 0.3, "beta": 0.45}
    assert aggregate_score(operator_scores=scores, importance=IMPORTANCE) == pytest.approx(0.3375)


def test_summary_of_a_hand_computed_run():
    summary = summarize(operators=OPERATORS, importance=IMPORTANCE)
    assert summary["aggregate"] == pytest.approx(0.3375, abs=1e-15)
    assert summary["shapes_total"] == 5
    assert summary["shapes_passed"] == 3
    assert summary["apparent_pass_rate"] == pytest.approx(4 / 5)  # 3 passes + 1 fallback
    assert summary["real_pass_rate"] == pytest.approx(3 / 5)
    assert summary["fallback_rate"] == pytest.approx(1 / 5)
    # Passing shapes' speedups only: 2.0, 0.5, 4.0 (the fallback's 5x and the failed 10x
    # do not count) -> (2 * 0.5 * 4) ** (1/3).
    assert summary["geomean_speedup_eager"] == pytest.approx(4 ** (1 / 3))
    # Passes faster than eager: alpha/0 and beta/1, out of all five shapes.
    assert summary["fast_1"] == pytest.approx(2 / 5)
    assert set(summary) == {
        "aggregate",
        "aggregate_ci",
        "apparent_pass_rate",
        "real_pass_rate",
        "fallback_rate",
        "geomean_speedup_eager",
        "fast_1",
        "shapes_total",
        "shapes_passed",
        "shapes_passed_real",
        "operators_total",
        "operators_incorrect",
        "operators_held",
    }
    assert summary["shapes_passed_real"] == 3
    assert (summary["operators_total"], summary["operators_incorrect"]) == (2, 0)


def test_aggregate_ci_propagates_relative_time_errors():
    # sigma(score) = fraction * spread / time for passing shapes:
    #   alpha/0: 0.5 * 0.1 = 0.05; alpha/2: 0; beta/1: 0.6 * 0.05 = 0.03.
    var_alpha = (2 / 4) ** 2 * 0.05**2
    var_beta = (3 / 4) ** 2 * 0.03**2
    sigma = math.sqrt(0.75**2 * var_alpha + 0.25**2 * var_beta)
    low, high = summarize(operators=OPERATORS, importance=IMPORTANCE)["aggregate_ci"]
    assert low == pytest.approx(0.3375 - 1.96 * sigma, rel=1e-12)
    assert high == pytest.approx(0.3375 + 1.96 * sigma, rel=1e-12)
    assert high - low == pytest.approx(2 * 1.96 * 0.0195755746, rel=1e-8)


def test_aggregate_ci_is_clipped_at_zero():
    noisy = [
        {
            "operator": "alpha",
            "shapes": [_shape("0", "pass", fraction=0.01, time_ms=1.0, spread_ms=5.0)],
        }
    ]
    low, high = summarize(operators=noisy, importance={"alpha": 1.0})["aggregate_ci"]
    assert low == 0.0
    assert high == pytest.approx(0.01 + 1.96 * 0.05)


@pytest.mark.parametrize("status", FAILURE_STATUSES)
def test_no_failure_status_earns_any_score(status):
    assert shape_score(status=status, roofline_fraction=0.95) == 0.0
    shapes = [_shape("0", status, fraction=0.95, speedup=3.0)]
    assert operator_score(shapes) == 0.0
    summary = summarize(
        operators=[{"operator": "alpha", "shapes": shapes}], importance={"alpha": 1.0}
    )
    assert summary["aggregate"] == 0.0
    assert summary["real_pass_rate"] == 0.0
    assert summary["fast_1"] == 0.0
    assert summary["geomean_speedup_eager"] is None
    assert summary["aggregate_ci"] == [0.0, 0.0]


def test_fallbacks_look_correct_but_score_nothing():
    shapes = [_shape(str(i), "fallback", fraction=0.9, speedup=2.0) for i in range(4)]
    summary = summarize(
        operators=[{"operator": "alpha", "shapes": shapes}], importance={"alpha": 1.0}
    )
    assert summary["apparent_pass_rate"] == 1.0
    assert summary["fallback_rate"] == 1.0
    assert summary["real_pass_rate"] == 0.0
    assert summary["aggregate"] == 0.0


def test_failure_statuses_are_every_status_but_pass():
    assert set(FAILURE_STATUSES) == set(SHAPE_STATUSES) - {"pass"}
    assert "fallback" in FAILURE_STATUSES and "incorrect" in FAILURE_STATUSES


def test_a_pass_scores_its_fraction_even_above_one():
    assert shape_score(status="pass", roofline_fraction=0.42) == 0.42
    assert shape_score(status="pass", roofline_fraction=1.3) == 1.3


def test_a_pass_without_a_fraction_is_a_harness_error():
    with pytest.raises(PlatformError):
        shape_score(status="pass", roofline_fraction=None)
    with pytest.raises(PlatformError):
        operator_score([_shape("0", "pass")])


@pytest.mark.parametrize("fraction", [-0.1, float("nan"), float("inf")])
def test_an_impossible_fraction_is_a_harness_error(fraction):
    with pytest.raises(PlatformError):
        shape_score(status="pass", roofline_fraction=fraction)


def test_an_unknown_status_is_a_harness_error():
    with pytest.raises(PlatformError, match="passed"):
        shape_score(status="passed", roofline_fraction=0.5)
    with pytest.raises(PlatformError, match="passed"):
        summarize(
            operators=[{"operator": "a", "shapes": [_shape("0", "passed")]}], importance={"a": 1.0}
        )


def test_negative_weight_is_a_harness_error():
    with pytest.raises(PlatformError, match="weight"):
        operator_score([_shape("0", "pass", weight=-1.0, fraction=0.5)])


def test_zero_total_weight_scores_zero():
    assert operator_score([_shape("0", "pass", weight=0.0, fraction=0.5)]) == 0.0
    assert operator_score([]) == 0.0


def test_operator_missing_from_results_counts_zero_and_extras_are_ignored():
    scores = {"alpha": 0.8, "gamma": 1.0}
    importance = {"alpha": 0.5, "beta": 0.5}
    assert aggregate_score(operator_scores=scores, importance=importance) == pytest.approx(0.4)


def test_aggregate_does_not_assume_importance_is_normalised():
    scores = {"alpha": 0.2, "beta": 0.6}
    assert aggregate_score(operator_scores=scores, importance={"alpha": 3, "beta": 1}) == (
        pytest.approx(0.3)
    )
    assert aggregate_score(operator_scores=scores, importance={}) == 0.0


def test_summary_recomputes_operator_scores_instead_of_trusting_them():
    inflated = [{**OPERATORS[0], "score": 1.0}, {**OPERATORS[1], "score": 1.0}]
    assert summarize(operators=inflated, importance=IMPORTANCE)["aggregate"] == pytest.approx(
        0.3375
    )


def test_summary_of_an_empty_run():
    summary = summarize(operators=[], importance=IMPORTANCE)
    assert summary["aggregate"] == 0.0
    assert summary["shapes_total"] == 0
    assert summary["apparent_pass_rate"] == 0.0
    assert summary["geomean_speedup_eager"] is None
    assert summary["aggregate_ci"] == [0.0, 0.0]


def test_an_operator_listed_twice_is_refused():
    with pytest.raises(PlatformError, match="alpha"):
        summarize(operators=[OPERATORS[0], OPERATORS[0]], importance=IMPORTANCE)
