"""Fallback attribution on CUDA: the profiler pass on real kernels (marker ``gpu``).

The shares are measured in a child process (``python -m tests.evaluator.test_fallback_cuda``)
because this test session runs Triton in the interpreter (see ``conftest.py``), and a
``@triton.jit`` function decorated there never launches a device kernel. The same entry
point with ``--examples`` prints the shares of the example bundles over the v0.1 suite, and
with ``--shapes`` gives the child's record of one rms_norm shape per bundle, evaluated as
the child does (``evaluator.measure.evaluate_shape``), with the calls the monitor watched.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
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
SWITCH = FIXTURES / "first_call_switch"
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


def evaluate_case(bundle: Path) -> dict[str, Any]:
    """The child's record of one rms_norm shape (``SHAPE``) of ``bundle``, evaluated as the
    child does (its folder, the threshold), and ``monitor_calls``: the calls the CUDA
    monitor watched. The candidate's module is dropped after it, so that a kernel name
    that another case's bundle defines too is not "defined outside the bundle" there."""
    from evaluator.child import import_candidate
    from evaluator.fallback_cuda import CudaFallbackMonitor
    from evaluator.measure import evaluate_shape

    watched: list[int] = []
    true_call = CudaFallbackMonitor.call

    def counted(self: CudaFallbackMonitor, fn: Any) -> Any:
        watched.append(1)
        return true_call(self, fn)

    module = import_candidate(bundle / "rms_norm.py", "rms_norm", bundle)
    CudaFallbackMonitor.call = counted  # type: ignore[method-assign]
    try:
        job = {
            "operator": "rms_norm",
            "device": "cuda",
            "seed": 20261202,
            "time_budget_s": 0.2,
            "bundle_dir": str(bundle),
            "threshold_own_share": THRESHOLD,
        }
        hidden, tokens = SHAPE["hidden_size"], SHAPE["token_count"]
        shape = {
            "shape_id": "0",
            "init_kwargs": {"eps": 1e-6},
            "input_kwargs": SHAPE,
            "q_read": 2 * (tokens * hidden + hidden),
            "q_write": 2 * tokens * hidden,
        }
        started = time.perf_counter()
        record = evaluate_shape(job=job, shape=shape, model_class=module.Model)
        record["evaluate_wall_s"] = time.perf_counter() - started
    finally:
        CudaFallbackMonitor.call = true_call  # type: ignore[method-assign]
        sys.modules.pop(module.__name__, None)
    record["monitor_calls"] = len(watched)
    return record


def main(argv: list[str] | None = None) -> int:
    """``--cases`` (JSON of name -> bundle dir), ``--shapes`` (the same, each evaluated as
    the child does) or ``--examples``; JSON on stdout or ``--out``."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--cases")
    parser.add_argument("--shapes")
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
    elif args.shapes:
        from evaluator.fallback import prepare_monitoring

        prepare_monitoring(torch.device("cuda"))  # as the child does before the candidate
        result = {name: evaluate_case(Path(path)) for name, path in json.loads(args.shapes).items()}
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


def run_probe(cases: dict[str, Path], *, mode: str = "--cases") -> dict[str, Any]:
    """Measure ``cases`` in a child process with native (not interpreted) Triton
    (``mode``: ``--cases`` or ``--shapes``)."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.evaluator.test_fallback_cuda",
            mode,
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


# ------------------------------------------------- a shape decided on its first call (0.3.2)


def switch_bundle(root: Path, name: str, *, own_on: list[int], wrong_on: list[int]) -> Path:
    """A copy of the ``first_call_switch`` fixture with its schedule (calls from 1)."""
    bundle = root / name
    shutil.copytree(SWITCH, bundle)
    schedule = {"own_on": own_on, "wrong_on": wrong_on}
    (bundle / "schedule.json").write_text(json.dumps(schedule))
    return bundle


@pytest.fixture(scope="module")
def first_call_records(tmp_path_factory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("first-call")
    later = list(range(2, 200))  # every call after the first, timed ones included
    cases = {
        "pytorch-eager": EXAMPLES / "pytorch-eager",
        "triton-baseline": EXAMPLES / "triton-baseline",
        "own_then_torch": switch_bundle(root, "own_then_torch", own_on=[1], wrong_on=[]),
        "torch_then_own": switch_bundle(root, "torch_then_own", own_on=later, wrong_on=[]),
        "wrong_later": switch_bundle(root, "wrong_later", own_on=[], wrong_on=[2]),
    }
    result = run_probe(cases, mode="--shapes")
    if os.environ.get("ATREX_FALLBACK_PROBE_OUT"):  # keep the figures of a GPU run
        Path(os.environ["ATREX_FALLBACK_PROBE_OUT"]).with_suffix(".first-call.json").write_text(
            json.dumps(result, indent=1, default=str)
        )
    return result


@pytest.mark.parametrize("case", ["pytorch-eager", "torch_then_own"])
def test_a_first_call_without_own_kernels_decides_the_shape_on_cuda(first_call_records, case):
    from evaluator.fallback_report import FIRST_CALL_DECIDED_WARNING
    from evaluator.operators import get_operator

    record = first_call_records[case]
    trials = get_operator("rms_norm").policy.trials
    assert record["monitor_calls"] == 1 and record["watched_calls"] == 1, record
    # Decided on its first call: no later trial runs (harness 0.3.6).
    assert record["trials"] == 1 < trials and record["status"] == "pass", record
    assert record["fallback_decided_on_first_call"] is True and record["not_timed"] is True
    assert record["own_kernel_share"] == 0.0 and record.get("time_s") is None
    assert FIRST_CALL_DECIDED_WARNING in record["warnings"]
    # The evidence: the first call's non-own kernels (launchers unknown: it was profiled
    # for its device activity only).
    assert record["top_ops"] and all(op["launched_by"] is None for op in record["top_ops"])


def test_a_shape_decided_on_cuda_runs_no_later_trial(first_call_records):
    # Wrong only on its second call, which never runs: a fallback after one trial.
    record = first_call_records["wrong_later"]
    assert record["monitor_calls"] == 1 and record["trials"] == 1, record
    assert record["status"] == "pass" and record["fallback_decided_on_first_call"], record


def test_a_first_call_with_own_kernels_is_watched_on_every_call_on_cuda(first_call_records):
    from evaluator.operators import get_operator

    trials = get_operator("rms_norm").policy.trials
    honest = first_call_records["triton-baseline"]
    assert honest["monitor_calls"] == trials and honest["watched_calls"] == trials, honest
    assert honest["status"] == "pass" and honest["own_kernel_share"] >= 0.95, honest
    assert honest["fallback_decided_on_first_call"] is False and honest["time_s"] > 0
    # Its own kernel first, PyTorch after: watched on every call, a fallback by its share
    # over the calls after the first, as before.
    cheat = first_call_records["own_then_torch"]
    assert cheat["monitor_calls"] == trials and cheat["fallback_decided_on_first_call"] is False
    assert cheat["status"] == "pass" and cheat["own_kernel_share"] < THRESHOLD, cheat
    assert cheat["not_timed"] is True


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
