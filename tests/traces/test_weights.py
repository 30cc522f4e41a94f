"""The weight formula on a hand-checked example, importance, coverage, and the proposal's
snapping and coverage rules."""

from __future__ import annotations

import pytest

from traces.aggregation import (
    application_totals,
    coverage_curve,
    operator_importance,
    shape_weights,
    trace_frame,
)
from traces.parsing import shape_key
from traces.proposal import Parameters, plan_proposal


def row(application, operator, input_kwargs, time_us, calls=1):
    return {
        "application": application,
        "operator": operator,
        "shape_key": shape_key(operator, {}, input_kwargs),
        "init_kwargs": {},
        "input_kwargs": input_kwargs,
        "calls": calls,
        "time_us": time_us,
    }


S1 = {"token_count": 8, "hidden_size": 4096}
S2 = {"shape": [8, 28672]}


def example_frame():
    # chat: 100 card-hours; 60 µs in rms_norm S1, 40 µs in silu_and_mul S2, nothing unmapped.
    # code: 50 card-hours; 30 µs in rms_norm S1, 70 µs unmapped (GEMMs).
    return trace_frame(
        mapped=[
            row("chat", "rms_norm", S1, 60.0, calls=6),
            row("chat", "silu_and_mul", S2, 40.0, calls=2),
            row("code", "rms_norm", S1, 30.0, calls=3),
        ],
        unmapped=[{"application": "code", "name": "aten::mm", "time_us": 70.0, "calls": 9}],
    )


HOURS = {"chat": 100.0, "code": 50.0}


def test_weights_are_card_hours_times_the_shapes_share_of_each_applications_time():
    weights = shape_weights(example_frame(), HOURS)
    by_op = {w["operator"]: w for w in weights.to_dict("records")}
    # rms_norm S1: 100 x 60/100 + 50 x 30/100 = 60 + 15 = 75 card-hours
    assert by_op["rms_norm"]["weight"] == pytest.approx(75.0)
    # silu_and_mul S2: 100 x 40/100 = 40 (code's unmapped 70 µs shrinks only code's shares)
    assert by_op["silu_and_mul"]["weight"] == pytest.approx(40.0)
    assert by_op["rms_norm"]["calls"] == 9 and by_op["rms_norm"]["time_us"] == 90.0
    assert by_op["rms_norm"]["applications"] == ["chat", "code"]
    assert list(weights["operator"]) == ["rms_norm", "silu_and_mul"]  # heaviest first

    importance = {
        r["operator"]: r["importance"] for r in operator_importance(weights).to_dict("records")
    }
    assert importance == pytest.approx({"rms_norm": 75 / 115, "silu_and_mul": 40 / 115})

    curve = coverage_curve(weights)
    assert list(curve["cumulative_share"]) == pytest.approx([75 / 115, 1.0])


def test_application_totals_report_the_unmapped_share():
    totals = {
        r["application"]: r for r in application_totals(example_frame(), HOURS).to_dict("records")
    }
    assert totals["chat"]["coverage"] == pytest.approx(1.0)
    assert totals["code"]["coverage"] == pytest.approx(0.3)
    assert totals["code"]["unmapped_us"] == pytest.approx(70.0)


def test_an_application_without_card_hours_is_refused():
    with pytest.raises(ValueError, match="no card-hours for application"):
        shape_weights(example_frame(), {"chat": 1.0})


def weight(operator, input_kwargs, value):
    return {
        "operator": operator,
        "shape_key": shape_key(operator, {}, input_kwargs),
        "init_kwargs": {},
        "input_kwargs": input_kwargs,
        "weight": value,
        "time_us": value,
        "calls": 1,
        "applications": ["chat"],
    }


def test_near_identical_shapes_snap_together_and_onto_existing_shapes():
    base = [
        {
            "operator": "rms_norm",
            "shape_id": "0",
            "init_kwargs": {},
            "input_kwargs": {"token_count": 1000, "hidden_size": 4096},
        },
        {
            "operator": "rms_norm",
            "shape_id": "1",
            "init_kwargs": {},
            "input_kwargs": {"token_count": 1, "hidden_size": 4096},
        },
        {
            "operator": "silu_and_mul",
            "shape_id": "0",
            "init_kwargs": {},
            "input_kwargs": {"shape": [4, 1536]},
        },
    ]
    plan = plan_proposal(
        weights=[
            weight("rms_norm", {"token_count": 1024, "hidden_size": 4096}, 50.0),  # -> base 0
            weight("rms_norm", {"token_count": 8192, "hidden_size": 4096}, 30.0),  # new
            weight("rms_norm", {"token_count": 8000, "hidden_size": 4096}, 10.0),  # -> the new one
            weight("rms_norm", {"token_count": 3, "hidden_size": 4096}, 1.0),  # new, tail
        ],
        base_shapes=base,
        base_importance={"rms_norm": 0.6, "silu_and_mul": 0.4},
        parameters=Parameters(coverage=0.95, snap_tolerance=0.1),
    )
    assert [(c.base_shape_id, c.weight) for c in plan.reweighted] == [("0", 50.0)]
    assert [(c.input_kwargs["token_count"], c.weight, len(c.members)) for c in plan.added] == [
        (8192, 40.0, 2)
    ]
    # 90 of 91 is over 95%: the 1-unit tail shape is left out, base shape 1 disabled.
    assert [c.input_kwargs["token_count"] for c in plan.dropped] == [3]
    assert plan.disabled == [("rms_norm", "1")]
    assert plan.kept_share == pytest.approx(90 / 91)
    # silu_and_mul is not observed: it keeps its importance; rms_norm keeps its own 0.6.
    assert plan.importance == pytest.approx({"rms_norm": 0.6, "silu_and_mul": 0.4})


def test_observed_operators_share_their_importance_by_trace_weight_or_alone_when_dropping():
    base_importance = {"rms_norm": 0.5, "silu_and_mul": 0.3, "layer_norm": 0.2}
    weights = [weight("rms_norm", S1, 75.0), weight("silu_and_mul", S2, 25.0)]
    keep = plan_proposal(
        weights=weights,
        base_shapes=[],
        base_importance=base_importance,
        parameters=Parameters(unobserved="keep"),
    )
    assert keep.importance == pytest.approx(
        {"rms_norm": 0.6, "silu_and_mul": 0.2, "layer_norm": 0.2}
    )
    drop = plan_proposal(
        weights=weights,
        base_shapes=[],
        base_importance=base_importance,
        parameters=Parameters(unobserved="drop"),
    )
    assert drop.importance == pytest.approx({"rms_norm": 0.75, "silu_and_mul": 0.25})
    assert drop.disabled_operators == ["layer_norm"]
    assert Parameters(coverage=0, snap_tolerance=1, unobserved="x").problems() == [
        "coverage 0 must be in (0, 1]",
        "snap tolerance 1 must be in [0, 1)",
        "unobserved must be one of keep, drop",
    ]
