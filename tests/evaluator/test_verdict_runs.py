"""Verdicts of real runs: a partially correct bundle on CPU (one child, the Triton
interpreter), and compute-sanitizer on the GPU (marker ``gpu``: a bundle that reads out of
bounds on purpose is caught, the Triton baseline's smallest shapes are clean)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import torch

from evaluator.cli import results_table
from evaluator.runner import run_bundle
from evaluator.sanitizer import find_sanitizer
from evaluator.suite import load_suite

from .conftest import TRITON_BASELINE

BUNDLES = Path(__file__).resolve().parent / "bundles" / "verdicts"


def rms_norm_suite(rows: list[int], hidden: int = 200):
    """v0.1's rms_norm at ``rows`` x ``hidden`` (one shape each, ids r<rows>)."""
    from evaluator.operators import get_operator

    suite = load_suite("atrex-bench-v0.1").restrict(["rms_norm"])
    template = suite.shapes_for("rms_norm", "smoke")[0]
    spec = get_operator("rms_norm")
    shapes = []
    for count in rows:
        kwargs = {"token_count": count, "hidden_size": hidden}
        work = spec.work(template.init_kwargs, kwargs)
        shapes.append(
            replace(template, shape_id=f"r{count}", input_kwargs=kwargs, w_flops=work.w_flops,
                    q_read=work.q_read, q_write=work.q_write, smoke=True)
        )  # fmt: skip
    return replace(suite, shapes=tuple(shapes))


@pytest.mark.slow
def test_a_bundle_right_at_one_row_and_wrong_elsewhere_scores_zero(tmp_path):
    results = run_bundle(
        bundle_path=BUNDLES / "half_rows",
        suite=rms_norm_suite([1, 3]),
        hardware="cpu-dev",
        device="cpu",
        shape_set="smoke",
        time_budget_s=0.02,
        log_dir=tmp_path / "logs",
    )
    (entry,) = results["operators"]
    one, three = entry["shapes"]
    # Shape by shape the harness is right: the one-row shape passes, with a score of its own.
    assert (one["status"], one["codes"]) == ("pass", [])
    assert one["roofline_fraction"] > 0
    assert (three["status"], three["codes"]) == ("incorrect", ["wrong_result"])
    # Operator by operator nothing is forgiven.
    assert entry["verdict"] == "incorrect" and entry["score"] == 0.0
    assert entry["wrong_shapes"] == ["r3"]
    assert (entry["apparent_passes"], entry["real_passes"]) == (1, 0)
    scores = results["scores"]
    assert scores["aggregate"] == 0.0 and scores["real_pass_rate"] == 0.0
    assert (scores["shapes_passed"], scores["shapes_passed_real"]) == (1, 0)
    assert results_table(results).splitlines()[1].split()[:4] == [
        "rms_norm",
        "incorrect",
        "0%",
        "1/0",
    ]


needs_sanitizer = pytest.mark.skipif(
    not torch.cuda.is_available() or find_sanitizer() is None,
    reason="needs a CUDA GPU and compute-sanitizer",
)


def _sanitized(bundle: Path, operators: list[str], tmp_path: Path) -> dict:
    suite = load_suite("atrex-bench-v1").restrict(operators)
    return run_bundle(
        bundle_path=bundle,
        suite=suite,
        hardware="h200-sxm",
        device="cuda",
        shape_set="smoke",
        time_budget_s=0.05,
        log_dir=tmp_path / "logs",
        validation_variants=False,
    )


@pytest.mark.gpu
@needs_sanitizer
def test_an_out_of_bounds_read_is_caught_by_the_sanitizer_and_zeroes_the_operator(tmp_path):
    # Beside an honest operator checked first, in the same sanitized child: the report is
    # blamed on rms_norm alone, by its place in the tool's log.
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    for source in (BUNDLES / "out_of_bounds" / "rms_norm.py",
                   TRITON_BASELINE / "fused_add_rms_norm.py"):  # fmt: skip
        (bundle / source.name).write_text(source.read_text())
    results = _sanitized(bundle, ["fused_add_rms_norm", "rms_norm"], tmp_path)
    honest, entry = results["operators"]
    assert honest["operator"] == "fused_add_rms_norm" and honest["verdict"] == "pass"
    caught = [s for s in entry["shapes"] if "memory_error" in s["codes"]]
    assert len(caught) == 1, [(s["shape_id"], s["status"], s["error"]) for s in entry["shapes"]]
    (shape,) = caught
    assert shape["status"] == "incorrect"
    assert "compute-sanitizer (memcheck) found an out-of-bounds memory access" in shape["error"]
    assert "Invalid __global__ read" in shape["error"]
    assert entry["verdict"] == "incorrect" and entry["score"] == 0.0
    memcheck = results["environment"]["sanitizer"]["tools"]["memcheck"]
    assert memcheck["failed"] == ["rms_norm"]
    assert not any("memory_error" in s["codes"] for s in honest["shapes"])
    # One child for both; the out-of-bounds read may end it (the CUDA context is then lost).
    assert memcheck["children"][0]["operators"] == ["fused_add_rms_norm", "rms_norm"]


@pytest.mark.gpu
@needs_sanitizer
def test_the_triton_baselines_smallest_shapes_are_clean_under_the_sanitizer(tmp_path):
    operators = ["rms_norm", "silu_and_mul", "fused_add_rms_norm"]
    results = _sanitized(TRITON_BASELINE, operators, tmp_path)
    for entry in results["operators"]:
        assert entry["verdict"] == "pass", [(s["shape_id"], s["error"]) for s in entry["shapes"]]
        assert not any("did not complete" in w for w in entry["warnings"]), entry["warnings"]
    memcheck = results["environment"]["sanitizer"]["tools"]["memcheck"]
    assert sorted(memcheck["operators"]) == sorted(operators) and memcheck["failed"] == []
    (child,) = memcheck["children"]  # one sanitized child for all three, to the end
    assert child["ended"] == "done" and child["start_s"] > 0
