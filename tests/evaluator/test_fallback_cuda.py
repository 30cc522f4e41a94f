"""Fallback attribution on CUDA: the profiler pass on real kernels (marker ``gpu``).

The shares are measured in a child process (``python -m tests.evaluator.test_fallback_cuda``)
because this test session runs Triton in the interpreter (see ``conftest.py``), and a
``@triton.jit`` function decorated there never launches a device kernel. The same entry
point with ``--examples`` prints the shares of the example bundles over the v0.1 suite.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "evaluator" / "bundles" / "fallback"
EXAMPLES = REPO / "examples" / "bundles"
THRESHOLD = 0.8
SHAPE = {"token_count": 4096, "hidden_size": 4096}
CASES = {
    "triton-baseline": EXAMPLES / "triton-baseline",
    "pytorch-eager": EXAMPLES / "pytorch-eager",
    "triton_autotuned": FIXTURES / "triton_autotuned",
    "side_stream": FIXTURES / "side_stream",
    "triton_trivial_part": FIXTURES / "triton_trivial_part",
    "torch_compile": FIXTURES / "torch_compile",
    "indirect_torch": FIXTURES / "indirect_torch",
    "annotated_torch": FIXTURES / "annotated_torch",
}

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]


# --------------------------------------------------------------------------- the probe

_MODULES: dict[tuple[str, str], Any] = {}


def measure_case(
    bundle: Path, operator: str, init_kwargs: dict[str, Any], input_kwargs: dict[str, Any]
) -> dict[str, Any]:
    """Import ``bundle/<operator>.py`` as the child does and monitor three correct calls."""
    from evaluator.child import import_candidate
    from evaluator.correctness import compare_outputs
    from evaluator.fallback import monitor_for
    from evaluator.fallback_cuda import kernel_origins
    from evaluator.operators import get_operator

    device = torch.device("cuda")
    spec = get_operator(operator)
    key = (str(bundle), operator)
    if key not in _MODULES:
        _MODULES[key] = import_candidate(bundle / f"{operator}.py", operator, bundle)
    module = _MODULES[key]
    candidate = module.Model(**init_kwargs).to(device)
    reference = spec.build_reference(init_kwargs).to(device)
    monitor = monitor_for(device, own_code_dir=bundle, calls=3)  # as evaluate_shape does
    correct = True
    with torch.inference_mode():
        for trial in range(3):
            inputs = spec.make_inputs(device=device, seed=100 + trial, **input_kwargs)
            expected = reference(**{k: v.clone() for k, v in inputs.items()})
            output = monitor.call(lambda inputs=inputs: candidate(**inputs))
            torch.cuda.synchronize()
            correct &= compare_outputs(expected, output, policy=spec.policy, shape_id="p").ok
    report = monitor.report(q_bytes=None).to_dict()
    origins = kernel_origins(bundle)
    report["correct"] = bool(correct)
    report["own_triton"] = sorted(origins.own_triton)
    report["kernels_per_call"] = [
        [(a.name[:80], a.kind, a.launched_by, a.duration_ns) for a in call]
        for call in monitor.call_activities
    ]
    return report


def launch_overhead_us(calls: int = 2000) -> float:
    """Host time per launch of a tiny kernel (to see whether profiling leaves a cost)."""
    x = torch.ones(16, device="cuda")
    for _ in range(50):
        x.add_(0)
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        x.add_(0)
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / calls * 1e6


def example_shares(full_per_operator: int) -> dict[str, Any]:
    """Own-kernel share of both example bundles over v0.1's smoke and first full shapes."""
    from evaluator.suite import load_suite

    suite = load_suite("atrex-bench-v0.1")
    overhead_before = launch_overhead_us()
    rows = []
    for bundle in ("triton-baseline", "pytorch-eager"):
        for operator in suite.operator_slugs():
            shapes = list(suite.shapes_for(operator, "smoke"))
            shapes += list(suite.shapes_for(operator, "full"))[:full_per_operator]
            for shape in shapes:
                started = time.perf_counter()
                report = measure_case(
                    EXAMPLES / bundle, operator, shape.init_kwargs, shape.input_kwargs
                )
                rows.append(
                    {
                        "bundle": bundle,
                        "operator": operator,
                        "shape_id": shape.shape_id,
                        "input_kwargs": shape.input_kwargs,
                        "own_kernel_share": report["own_kernel_share"],
                        "own_s": report["own_s"],
                        "other_s": report["compute_s"],
                        "neutral_s": report["neutral_s"],
                        "correct": report["correct"],
                        "top_ops": report["top_ops"][:2],
                        "warnings": report["warnings"],
                        "monitor_wall_s": time.perf_counter() - started,
                    }
                )
    return {
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "triton": __import__("triton").__version__,
        "launch_overhead_us_before_profiling": overhead_before,
        "launch_overhead_us_after_profiling": launch_overhead_us(),
        "rows": rows,
    }


def main(argv: list[str] | None = None) -> int:
    """``--cases`` (JSON of name -> bundle dir) or ``--examples``; JSON on stdout or ``--out``."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--cases")
    parser.add_argument("--examples", action="store_true")
    parser.add_argument("--full-per-operator", type=int, default=3)
    parser.add_argument("--out")
    args = parser.parse_args(argv)
    if args.examples:
        result = example_shares(args.full_per_operator)
        for row in result["rows"]:
            print(
                f"{row['bundle']:16} {row['operator']:19} {row['shape_id']:8} "
                f"share={row['own_kernel_share']:.4f} correct={row['correct']}"
            )
    else:
        result = {
            name: measure_case(Path(path), "rms_norm", {"eps": 1e-6}, SHAPE)
            for name, path in json.loads(args.cases).items()
        }
    text = json.dumps(result, indent=1, default=str)
    if args.out:
        Path(args.out).write_text(text)
    print("PROBE-RESULT " + json.dumps(result, default=str))
    return 0


def run_probe(cases: dict[str, Path]) -> dict[str, Any]:
    """Measure ``cases`` in a child process with native (not interpreted) Triton."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.evaluator.test_fallback_cuda",
            "--cases",
            json.dumps({name: str(path) for name, path in cases.items()}),
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    lines = [ln for ln in completed.stdout.splitlines() if ln.startswith("PROBE-RESULT ")]
    assert completed.returncode == 0 and lines, completed.stdout[-3000:] + completed.stderr[-5000:]
    return json.loads(lines[-1].removeprefix("PROBE-RESULT "))


# --------------------------------------------------------------------------- the tests


@pytest.fixture(scope="module")
def shares() -> dict[str, Any]:
    result = run_probe(CASES)
    if os.environ.get("ATREX_FALLBACK_PROBE_OUT"):  # keep the figures of a GPU run
        Path(os.environ["ATREX_FALLBACK_PROBE_OUT"]).write_text(json.dumps(result, indent=1))
    print(json.dumps({k: (v["own_kernel_share"], v["top_ops"][:2]) for k, v in result.items()}))
    return result


@pytest.mark.parametrize("case", ["triton-baseline", "triton_autotuned", "side_stream"])
def test_honest_triton_is_own(shares, case):
    report = shares[case]
    assert report["correct"]
    assert report["own_kernel_share"] >= 0.95, report


def test_the_first_call_is_watched_for_its_device_activity_only(shares):
    # The share is taken over the calls after the first; of the first only the streams
    # are read, so its host ops (most of the profiler's cost) are not recorded.
    calls = shares["pytorch-eager"]["kernels_per_call"]
    assert len(calls) == 3 and calls[0]
    assert all(launcher is None for _, _, launcher, _ in calls[0])
    assert any((launcher or "").startswith("aten::") for _, _, launcher, _ in calls[1])


def test_side_stream_launch_is_captured(shares):
    report = shares["side_stream"]
    assert report["own_s"] > 0 and "_side_stream_rms_kernel" in report["own_triton"]
    assert report["warnings"] == []


@pytest.mark.parametrize(
    "case",
    ["pytorch-eager", "triton_trivial_part", "torch_compile", "indirect_torch", "annotated_torch"],
)
def test_pytorch_doing_the_work_is_fallback(shares, case):
    report = shares[case]
    assert report["correct"]
    assert report["own_kernel_share"] < THRESHOLD, report
    assert report["top_ops"], report  # the user sees which kernels did the work


def test_trivial_triton_part_is_counted_but_small(shares):
    report = shares["triton_trivial_part"]
    assert 0 < report["own_s"] < 0.05 * report["compute_s"]  # the touch kernel is recognised
    # The reduction ran in cuBLAS (torch.matmul against a column of ones: a gemv on the
    # H200 with torch 2.11), and it is counted on the PyTorch side.
    kernels = {name for call in report["kernels_per_call"] for name, *_ in call}
    assert any("gemv" in name or "gemm" in name for name in kernels), sorted(kernels)


def test_runner_marks_fallbacks_and_records_scan_warnings(tiny_suite, tmp_path):
    from evaluator.runner import run_bundle

    statuses = {}
    for case in ("side_stream", "triton_trivial_part", "indirect_torch"):
        results = run_bundle(
            bundle_path=CASES[case],
            suite=tiny_suite,
            hardware="h200-sxm",
            device="cuda",
            operators=["rms_norm"],
            seed=1234,
            time_budget_s=0.05,
            shape_set="smoke",
            log_dir=tmp_path / case,
        )
        (entry,) = results["operators"]
        statuses[case] = ([s["status"] for s in entry["shapes"]], entry["warnings"], entry)
    assert set(statuses["side_stream"][0]) == {"pass"}, statuses["side_stream"][2]
    assert any("side stream" in w for w in statuses["side_stream"][1])
    assert set(statuses["triton_trivial_part"][0]) == {"fallback"}, statuses
    assert set(statuses["indirect_torch"][0]) == {"fallback"}, statuses
    assert any("torch.ops.aten" in w for w in statuses["indirect_torch"][1])


if __name__ == "__main__":
    sys.exit(main())
