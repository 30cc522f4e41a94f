"""bench/round_profile.py evaluates one operator's public shapes in its own process: the job
it builds is the runner's, with the round measurement policy."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))

from round_profile import ROUND_POLICY, build_job  # noqa: E402

from agents import loop  # noqa: E402
from evaluator.measurement_policy import MeasurementPolicy  # noqa: E402
from evaluator.suite import load_suite  # noqa: E402


def test_the_job_is_the_runners_for_the_public_shapes_with_the_round_policy():
    args = argparse.Namespace(
        suite="atrex-bench-v1",
        operator="rms_norm",
        device="cpu",
        shapes="full",
        limit=None,
        kernels=REPO / "examples/bundles/triton-baseline",
    )
    job = build_job(args)
    suite = load_suite("atrex-bench-v1")
    public = [s.shape_id for s in suite.shapes_for("rms_norm", "full") if s.visibility == "public"]
    assert [shape["shape_id"] for shape in job["shapes"]] == public
    assert job["module_path"] == "rms_norm.py" and job["validation_variants"] is False
    # The round policy of agents.loop.ROUND_OPTIONS ("--trials 2 --min-reps 5 ...").
    options = dict(zip(loop.ROUND_OPTIONS[::2], loop.ROUND_OPTIONS[1::2], strict=True))
    policy = MeasurementPolicy.from_dict(job["measurement"])
    assert policy == ROUND_POLICY and policy.kind == "round"
    assert policy.trials == int(options["--trials"])
    assert policy.min_reps == int(options["--min-reps"])
    assert policy.target_rel_se == float(options["--target-rel-se"])
