"""Where a round's host seconds go inside one operator's shapes, function by function.

``bench/agent_round.py`` says which phase of a round is slow (compile, checks, timing);
this says why. It evaluates one operator's shapes in this process, as the child does
(``evaluator.child.warm_up``, the integrity snapshot, the candidate's import, then
``evaluator.measure.evaluate_shape`` per shape with the round measurement policy and the
eager times cached as a campaign's are), without a sandbox: a pass that compiles, then
``--passes`` more as a round runs them (their phase totals), then one under cProfile (without
the integrity checks, which take the profiler's hook for tampering), and prints the
functions with the most cumulative and own time::

    python3 bench/round_profile.py --device cuda [--operator rms_norm] [--suite atrex-bench-v1]
        [--kernels examples/bundles/triton-baseline] [--shapes full|smoke] [--passes 1]
        [--limit N] [--top 40] [--json out.json]

Profiling slows Python code (not the device), so read shares, not totals; the plain
passes give the totals. ``--plain`` skips the profiled pass. ``--profile-first`` profiles
the first pass instead (without the integrity checks): where a new process's first calls go,
Triton loading its compiled kernels among them (run it after a process that compiled
them, so that they come from Triton's cache as in a round's child). ``--confine`` installs
the child's audit hooks (``integrity.deny_object_enumeration``, ``confine_bundle_code``)
before the candidate's import, as the child does.
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import functools
import io
import json
import pstats
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agents import loop  # noqa: E402
from evaluator import child, cli, runner  # noqa: E402
from evaluator.bundle import BundleManifest  # noqa: E402
from evaluator.fallback_cuda import ModuleScanMemo  # noqa: E402
from evaluator.measure import evaluate_shape  # noqa: E402
from evaluator.suite import load_suite  # noqa: E402

print = functools.partial(print, flush=True)  # noqa: A001 (a run cut short keeps its lines)

ROUND_POLICY = cli.measurement_policy(
    cli.build_parser().parse_args(["run", "bundle", *loop.ROUND_OPTIONS])
)
"""The policy a campaign's rounds run with: ``agents.loop.ROUND_OPTIONS`` read as the
evaluator's command line reads them."""


def build_job(args: argparse.Namespace) -> dict[str, Any]:
    """The child's job for the operator's public shapes, as the runner writes it."""
    suite = load_suite(args.suite).public_only()
    shapes = suite.shapes_for(args.operator, args.shapes)[: args.limit]
    bundle = args.kernels.resolve()
    module = next(bundle.glob(f"{args.operator}.py"), None) or next(
        bundle.glob(f"**/{args.operator}.py")
    )
    manifest = BundleManifest(
        operators={args.operator: str(module.relative_to(bundle))}, files=[], metadata={}
    )
    return runner._job(
        operator=args.operator,
        manifest=manifest,
        bundle_dir=bundle,
        shapes=shapes,
        device=args.device,
        seed=12345,
        time_budget_s=None,
        threshold_own_share=suite.threshold_own_share,
        validation_variants=False,
        measurement=ROUND_POLICY,
    )


def one_pass(
    job: dict[str, Any], model_class: Any, guard: Any | None, scans: Any = None
) -> tuple[float, dict, list]:
    """Every shape once; (wall seconds, phase totals, records)."""
    totals: dict[str, float] = collections.Counter()
    records = []
    started = time.perf_counter()
    for shape in job["shapes"]:
        record = evaluate_shape(
            job=job, shape=shape, model_class=model_class, guard=guard, scans=scans
        )
        if guard is not None:
            guard.check(f"during shape {shape['shape_id']}")
        for name, seconds in (record.get("wall_s") or {}).items():
            totals[name] += seconds
        records.append(record)
    return time.perf_counter() - started, dict(totals), records


def cache_eager(job: dict[str, Any], records: list[dict[str, Any]]) -> None:
    """The eager times of the first pass kept in the shapes, as a campaign's cache does."""
    for shape, record in zip(job["shapes"], records, strict=True):
        if record.get("reference_time_s"):
            shape["reference_time"] = {
                "time_s": record["reference_time_s"],
                "spread_s": record.get("reference_spread_s"),
                "reps": record.get("reference_reps"),
            }


def profile_table(profiler: cProfile.Profile, key: str, top: int) -> str:
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.strip_dirs().sort_stats(key).print_stats(top)
    return out.getvalue()


def add_job_arguments(parser: argparse.ArgumentParser) -> None:
    """The options ``build_job`` reads (also ``bench/compile_ahead.py``'s)."""
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--suite", default="atrex-bench-v1")
    parser.add_argument("--operator", default="rms_norm")
    parser.add_argument("--kernels", type=Path, default=ROOT / "examples/bundles/triton-baseline")
    parser.add_argument("--shapes", default="full", choices=("smoke", "full"))
    parser.add_argument("--limit", type=int, default=None, help="the first N shapes only")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_job_arguments(parser)
    parser.add_argument("--passes", type=int, default=1)
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--plain", action="store_true", help="no profiler (phase totals only)")
    parser.add_argument(
        "--profile-first", action="store_true", help="profile the first pass (the compiles)"
    )
    parser.add_argument(
        "--confine",
        action="store_true",
        help="install the child's audit hooks before the candidate's import, as the child does",
    )
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()

    steps: list[tuple[str, float]] = [("start", time.perf_counter())]
    child.warm_up(args.device, steps)
    job = build_job(args)
    spec = child.operator_spec(job)
    scans = ModuleScanMemo()  # shared by the shapes' fallback reports, as in the child
    guard = child._integrity_guard(spec)
    if args.confine:
        from evaluator.integrity import deny_object_enumeration

        deny_object_enumeration()
        child.confine_candidate(Path(job["bundle_dir"]), guard)
    module = child.import_candidate(
        Path(job["bundle_dir"]) / job["module_path"], job["operator"], Path(job["bundle_dir"])
    )
    first_profiler = cProfile.Profile() if args.profile_first else None
    if first_profiler is not None:
        first_profiler.enable()
    # The profiler's hook reads as tampering: a profiled pass runs without the guard.
    first_guard = None if first_profiler is not None else guard
    first_s, first_phases, records = one_pass(job, module.Model, first_guard, scans)
    if first_profiler is not None:
        first_profiler.disable()
    statuses = collections.Counter(r["status"] for r in records)
    cache_eager(job, records)
    print(
        f"{args.operator}: {len(job['shapes'])} public shapes on {args.device}; "
        f"first pass (compiles, eager timed) {first_s:.2f} s; statuses {dict(statuses)}"
    )
    print("first pass: " + "  ".join(f"{k} {v:.3f}" for k, v in first_phases.items()))
    for record in records:
        if record["status"] != "pass":
            print(f"  shape {record['shape_id']}: {record['status']}: {record.get('error')}")
            break
    report: dict[str, Any] = {"first_pass_s": first_s, "first_phases": first_phases, "passes": []}
    for index in range(args.passes):
        wall_s, phases, records = one_pass(job, module.Model, guard, scans)
        report["passes"].append({"wall_s": wall_s, "phases": phases})
        phase_text = "  ".join(f"{k} {v:.3f}" for k, v in phases.items())
        print(f"pass {index + 2}: {wall_s:.2f} s: {phase_text}")
    if first_profiler is not None:
        cumulative = profile_table(first_profiler, "cumulative", args.top)
        own = profile_table(first_profiler, "tottime", args.top)
        print("\n== first pass by cumulative time\n" + cumulative + "\n== by own time\n" + own)
        report["first_cumulative"], report["first_own"] = cumulative, own
    profiler = None if args.plain or args.profile_first else cProfile.Profile()
    if profiler is not None:
        # The integrity guard takes the profiler's hook for tampering: the profiled pass
        # runs without it (the plain passes above include its checks).
        profiler.enable()
        wall_s, phases, records = one_pass(job, module.Model, None, scans)
        profiler.disable()
        phase_text = "  ".join(f"{k} {v:.3f}" for k, v in phases.items())
        print(f"profiled pass, no integrity checks: {wall_s:.2f} s: {phase_text}")
        cumulative = profile_table(profiler, "cumulative", args.top)
        own = profile_table(profiler, "tottime", args.top)
        print("\n== by cumulative time\n" + cumulative + "\n== by own time\n" + own)
        report["cumulative"], report["own"] = cumulative, own
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
