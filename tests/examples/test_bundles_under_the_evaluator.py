"""The example bundles through the whole evaluator on CPU (real child processes, smoke
shapes, Triton in the interpreter): the Triton baseline passes on its own kernels, the
torch.compile baseline (as its generator writes it) is correct and flagged as fallback."""

from __future__ import annotations

import pytest

from evaluator.measurement_policy import MeasurementPolicy
from evaluator.runner import run_bundle

from .conftest import TRITON_BASELINE, operators_of

pytestmark = pytest.mark.slow

SEED = 5550123
# These tests hold the statuses, never the figures: the kernels are timed as an agent's
# round times them (3 timed calls at least, not 10), which is most of an interpreted
# Triton shape's time here; the checks, the trials and the fallback watch are the full
# policy's (evaluator/measurement_policy.py).
STATUSES_ONLY = MeasurementPolicy(min_reps=3)


def evaluate(bundle, operators, tmp_path):
    return run_bundle(
        bundle_path=bundle,
        suite="atrex-bench-v1",
        hardware="cpu-dev",
        device="cpu",
        operators=sorted(operators),
        shape_set="smoke",
        seed=SEED,
        time_budget_s=0.02,
        log_dir=tmp_path / "logs",
        measurement=STATUSES_ONLY,
    )


def smoke_ids(suite, operator):
    return [shape.shape_id for shape in suite.shapes_for(operator, "smoke")]


def test_every_triton_baseline_operator_passes_every_smoke_shape_on_its_own_kernels(
    suite_v1, tmp_path
):
    operators = operators_of(TRITON_BASELINE)
    assert len(operators) >= 10 and operators <= set(suite_v1.operator_slugs())

    results = evaluate(TRITON_BASELINE, operators, tmp_path)

    assert results["error"] is None
    entries = {entry["operator"]: entry for entry in results["operators"]}
    assert set(entries) == operators
    for operator, entry in entries.items():
        assert entry["status"] == "ok", (operator, entry["error"])
        shapes = entry["shapes"]
        assert [shape["shape_id"] for shape in shapes] == smoke_ids(suite_v1, operator)
        for shape in shapes:
            where = (operator, shape["shape_id"], shape["error"])
            assert shape["status"] == "pass", where
            # No PyTorch compute at all; the call's time is in its own Triton kernels but
            # for allocation and launch overhead (0.93-1.0 of it on this CPU).
            assert shape["own_kernel_share"] >= 0.85, where
    assert results["scores"]["fallback_rate"] == 0.0
    assert results["scores"]["real_pass_rate"] == 1.0


def test_torch_compile_bundle_is_correct_and_flagged_as_fallback(
    suite_v1, torch_compile_bundle, tmp_path
):
    assert operators_of(torch_compile_bundle) == set(suite_v1.operator_slugs())
    # A norm, an fp8 quantiser with a tuple output, a dict-output copy and a top-k: one
    # child each; every file's correctness is checked in-process in test_torch_compile.py.
    operators = ["rms_norm", "fp8_dynamic_per_token_quant", "reshape_and_cache", "topk_filter"]

    results = evaluate(torch_compile_bundle, operators, tmp_path)

    assert results["error"] is None
    for entry in results["operators"]:
        operator = entry["operator"]
        assert entry["status"] == "ok", (operator, entry["error"])
        assert any("torch.compile" in warning for warning in entry["warnings"]), entry
        assert [shape["shape_id"] for shape in entry["shapes"]] == smoke_ids(suite_v1, operator)
        for shape in entry["shapes"]:
            # fallback = correct, but its time is PyTorch's, not the submission's kernels'.
            assert shape["status"] == "fallback", (operator, shape["shape_id"], shape["error"])
            assert shape["own_kernel_share"] < 0.8
    assert results["scores"]["apparent_pass_rate"] == 1.0
    assert results["scores"]["real_pass_rate"] == 0.0
    assert results["scores"]["aggregate"] == 0.0
