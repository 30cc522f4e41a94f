"""An operator uploaded in the upstream format is evaluated end to end on the CPU."""

from __future__ import annotations

import json
from pathlib import Path

from evaluator.runner import run_bundle
from evaluator.upstream import read_release, suite_definition

FIXTURES = Path(__file__).parent / "fixtures"


def test_bundle_for_an_uploaded_operator_runs_from_the_suite_sources_and_scores(tmp_path):
    release = read_release(FIXTURES / "upstream", name="uploaded", version="t1", source="test")
    suite_path = tmp_path / "suite.json"
    # As the worker gets it: the stored definition written to a file (sources included).
    suite_path.write_text(json.dumps(suite_definition(release.suite, release.sources)))
    results = run_bundle(
        bundle_path=FIXTURES / "kernels",
        suite=str(suite_path),
        hardware="cpu-dev",
        device="cpu",
        seed=7,
        time_budget_s=0.2,
    )
    assert results["error"] is None
    (operator,) = results["operators"]
    assert operator["operator"] == "scaled_add" and operator["status"] == "ok", operator["error"]
    assert [s["status"] for s in operator["shapes"]] == ["pass", "pass", "pass"]
    # W/Q come from the suite's figures (the operator has no work model here).
    assert operator["shapes"][0]["w_flops"] == {"bf16": 512}
    assert operator["score"] > 0 and results["scores"]["aggregate"] > 0


def test_a_wrong_kernel_for_an_uploaded_operator_is_incorrect(tmp_path):
    release = read_release(FIXTURES / "upstream", name="uploaded", version="t1", source="test")
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    text = (FIXTURES / "kernels" / "scaled_add.py").read_text()
    (bundle / "scaled_add.py").write_text(text.replace("x + alpha * y", "x + y"))
    results = run_bundle(
        bundle_path=bundle,
        suite=release.suite,
        operator_sources=release.sources,
        hardware="cpu-dev",
        device="cpu",
        seed=7,
        time_budget_s=0.2,
    )
    statuses = {s["shape_id"]: s["status"] for s in results["operators"][0]["shapes"]}
    # smoke-0 has alpha = 1 (init_kwargs null): x + y is right there, wrong elsewhere.
    assert statuses == {"smoke-0": "pass", "smoke-1": "incorrect", "smoke-3": "incorrect"}
