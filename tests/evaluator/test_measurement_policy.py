"""The measurement policy (evaluator/measurement_policy.py): an agent round's lighter policy
is named ``round`` wherever its figures go (the results, the child's job, the reference
timings' key), a full evaluation ``full``; the options that set it; the real runner and
child measuring with it."""

from __future__ import annotations

import pytest

from evaluator import measure
from evaluator.cli import build_parser, measurement_policy
from evaluator.measurement_policy import (
    MIN_REPS,
    TARGET_REL_SE,
    MeasurementPolicy,
    measured_as_round,
)
from evaluator.operators import get_operator
from evaluator.reference_timings import ReferenceTimings, TimingCacheSettings
from evaluator.runner import run_bundle

from .conftest import TRITON_BASELINE
from .test_reference_timings import ENVIRONMENT, SHAPE, SUITE_HASH, rms_smoke_suite

ROUND = MeasurementPolicy(trials=2, min_reps=5, target_rel_se=0.01)


def test_the_default_policy_is_full_and_any_relaxation_is_a_round():
    assert MeasurementPolicy().kind == "full"
    assert MeasurementPolicy(min_reps=20, target_rel_se=0.001).kind == "full"  # stricter
    assert MeasurementPolicy(trials=2).kind == "round"
    assert MeasurementPolicy(min_reps=MIN_REPS - 1).kind == "round"
    assert MeasurementPolicy(target_rel_se=TARGET_REL_SE * 2).kind == "round"
    assert ROUND.to_dict() == {"kind": "round", "trials": 2, "min_reps": 5, "target_rel_se": 0.01}


def test_fewer_trials_never_raise_an_operators_own_count():
    assert ROUND.trials_for(3) == 2
    assert ROUND.trials_for(1) == 1
    assert MeasurementPolicy().trials_for(3) == 3


def test_a_job_block_gives_the_policy_back_and_no_block_is_the_full_policy():
    assert MeasurementPolicy.from_dict(ROUND.to_dict()) == ROUND
    assert MeasurementPolicy.from_dict(None) == MeasurementPolicy()


@pytest.mark.parametrize(
    "policy", [{"trials": 0}, {"min_reps": 1}, {"target_rel_se": 0.0}, {"target_rel_se": 1.5}]
)
def test_a_policy_that_measures_nothing_is_refused(policy):
    with pytest.raises(ValueError):
        MeasurementPolicy(**policy)


def test_the_command_lines_options_give_the_policy():
    parse = build_parser().parse_args
    assert measurement_policy(parse(["run", "bundle"])).kind == "full"
    options = ["--trials", "2", "--min-reps", "5", "--target-rel-se", "0.01"]
    assert measurement_policy(parse(["run", "bundle", *options])) == ROUND
    assert measurement_policy(parse(["serve", *options])) == ROUND


def test_a_round_result_is_told_from_a_full_one_also_inside_merged_shards():
    full = {"environment": {"measurement": MeasurementPolicy().to_dict()}}
    assert not measured_as_round(full)
    assert not measured_as_round({"environment": {}})  # results of an older harness
    assert measured_as_round({"environment": {"measurement": ROUND.to_dict()}})
    merged = {
        "environment": {
            **full["environment"],
            "shards": [
                {"index": 0, "environment": full["environment"]},
                {"index": 1, "environment": {"measurement": ROUND.to_dict()}},
            ],
        }
    }
    assert measured_as_round(merged)


def _timings(tmp_path, policy: MeasurementPolicy) -> ReferenceTimings:
    return ReferenceTimings(
        TimingCacheSettings(directory=str(tmp_path / "t")),
        environment=ENVIRONMENT,
        timing_rule=policy.timing_rule(),
        draw=lambda: 0.99,
    ).open()


def test_the_reference_timings_key_holds_the_timing_rule(tmp_path):
    """An eager figure timed under a round's rule never serves a full evaluation, nor the
    other way round; the same rule reads it."""
    _timings(tmp_path, ROUND).store(SUITE_HASH, "rms_norm", SHAPE, time_s=2e-5)
    assert _timings(tmp_path, ROUND).lookup(SUITE_HASH, "rms_norm", SHAPE).figure is not None
    full = _timings(tmp_path, MeasurementPolicy())
    assert full.key["min_reps"] == MIN_REPS and full.key["target_rel_se"] == TARGET_REL_SE
    assert full.root != _timings(tmp_path, ROUND).root
    assert full.lookup(SUITE_HASH, "rms_norm", SHAPE).why == "new"
    # The trials are not part of the rule: the eager figure does not depend on them.
    assert _timings(tmp_path, MeasurementPolicy(trials=1, min_reps=5, target_rel_se=0.01)).root == (
        _timings(tmp_path, ROUND).root
    )


def test_the_child_runs_the_jobs_trials_and_times_with_its_rule(monkeypatch, tmp_path):
    """In process: the job's measurement block sets the correctness trials and the
    timers' rule (the candidate's and the eager baseline's timer)."""
    import evaluator.timing as timing

    made: list[dict] = []
    original = timing.make_timer

    def recording(device, **rule):
        made.append(rule)
        return original(device, **rule)

    monkeypatch.setattr(timing, "make_timer", recording)
    spec = get_operator("rms_norm")
    shape = {"shape_id": SHAPE.shape_id, "init_kwargs": {}, "input_kwargs": SHAPE.input_kwargs}
    reference_class = type(spec.build_reference({}))
    job = {
        "operator": "rms_norm",
        "device": "cpu",
        "seed": 7,
        "time_budget_s": 0.02,
        "threshold_own_share": None,  # PyTorch as the candidate: timed all the same
        "bundle_dir": str(tmp_path),
        "measurement": ROUND.to_dict(),
    }
    record = measure.evaluate_shape(job=job, shape=shape, model_class=reference_class)
    assert record["status"] == "pass", record
    assert record["trials"] == 2
    assert made == [{"min_reps": 5, "target_rel_se": 0.01}]
    assert record["reps"] >= 5 and record["reference_reps"] >= 5
    del job["measurement"]  # a job of an older runner: the full policy
    made.clear()
    record = measure.evaluate_shape(job=job, shape=shape, model_class=reference_class)
    assert record["status"] == "pass", record
    assert record["trials"] == spec.policy.trials == 3
    assert made == [{"min_reps": MIN_REPS, "target_rel_se": TARGET_REL_SE}]
    assert record["reps"] >= MIN_REPS


@pytest.mark.slow
def test_the_runner_records_the_policy_in_the_results_and_measures_with_it(tmp_path):
    """The real runner and sandboxed child: a round's results say kind round and their
    shapes ran its trials; the same bundle evaluated with the default policy says full."""
    outcomes = {}
    for label, policy in (("round", ROUND), ("full", None)):
        outcomes[label] = run_bundle(
            bundle_path=TRITON_BASELINE / "rms_norm.py",
            suite=rms_smoke_suite(),
            hardware="cpu-dev",
            device="cpu",
            seed=3,
            time_budget_s=0.05,
            log_dir=tmp_path / label,
            validation_variants=False,
            measurement=policy,
        )
    for label, trials in (("round", 2), ("full", 3)):
        results = outcomes[label]
        assert not results["error"], results["error"]
        assert results["environment"]["measurement"]["kind"] == label
        (entry,) = results["operators"]
        assert [shape["status"] for shape in entry["shapes"]] == ["pass"]
        assert entry["shapes"][0]["trials"] == trials
    assert measured_as_round(outcomes["round"]) and not measured_as_round(outcomes["full"])
