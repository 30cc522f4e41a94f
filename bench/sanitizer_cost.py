"""What the compute-sanitizer pass adds to an evaluation (evaluator/sanitizer.py).

Evaluates a bundle once on CUDA with the sanitizer on (each operator's smallest shape, one
call, under memcheck and, at the same time, racecheck for the operators whose compiled
kernels use shared memory or cannot be told; one sanitized child per tool for all
operators, started while the last operator is measured) and prints the pass's wall time as
the evaluation sees it (from the last operator's end to the pass's end), each tool's and
each child's own time (start-up left when its job came, total, how long it had been up
before), the operators racecheck skipped and why, and the ratio of the pass to the
evaluation's own time (the run's wall time less the pass), whose goal is at most 0.20.
With ``--baseline`` the evaluation runs first without the sanitizer, and the difference of
the two runs' wall times is printed too (what the pass costs end to end, start-ahead
included; both runs' noise in it):

    python3 bench/sanitizer_cost.py [--bundle examples/bundles/triton-baseline]
        [--suite atrex-bench-v1] [--operators rms_norm,silu_and_mul] [--shapes full]
        [--tools memcheck,racecheck] [--baseline] [--out sanitizer-cost.json]
        [--results-out results.json] [--device cpu]

Needs a CUDA GPU and compute-sanitizer (on PATH, under CUDA_HOME or /usr/local/cuda, or
named by ATREX_COMPUTE_SANITIZER). Figures are the host's wall clock.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from evaluator.runner import run_bundle  # noqa: E402
from evaluator.sanitizer import find_sanitizer, parse_tools  # noqa: E402

GOAL = 0.20


def _evaluate(args: argparse.Namespace, tools: tuple[str, ...]) -> tuple[dict, float]:
    """One run of the bundle with ``tools``; its results and wall time (s)."""
    operators = [s for s in (args.operators or "").split(",") if s] or None
    started = time.monotonic()
    results = run_bundle(
        bundle_path=args.bundle,
        suite=args.suite,
        hardware="h200-sxm" if args.device == "cuda" else "cpu-dev",
        device=args.device,
        operators=operators,
        shape_set=args.shapes,
        log_dir=args.log_dir,
        sanitizer_tools=tools,
        start_ahead=True,  # the CUDA default; on the CPU too, for a dry run of the same shape
    )
    return results, time.monotonic() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bundle", default=str(ROOT / "examples" / "bundles" / "triton-baseline"))
    parser.add_argument("--suite", default="atrex-bench-v1")
    parser.add_argument("--operators", default=None, help="comma-separated (default: all)")
    parser.add_argument("--shapes", default="full", choices=("full", "smoke"))
    parser.add_argument(
        "--device", default="cuda", choices=("cuda", "cpu"),
        help="cpu: a dry run of this script (the Triton interpreter, a stand-in tool)",
    )  # fmt: skip
    parser.add_argument("--tools", default="memcheck,racecheck")
    parser.add_argument(
        "--baseline", action="store_true", help="first evaluate without the sanitizer"
    )
    parser.add_argument("--log-dir", default=None)
    parser.add_argument("--out", default=None, help="write the figures here (JSON)")
    parser.add_argument(
        "--results-out", default=None, help="write the run's results.json here (compare_runs)"
    )
    args = parser.parse_args(argv)
    executable = find_sanitizer()
    if executable is None:
        print("compute-sanitizer was not found (set ATREX_COMPUTE_SANITIZER)", file=sys.stderr)
        return 2
    tools = parse_tools(args.tools)
    baseline_wall = None
    if args.baseline:
        plain, baseline_wall = _evaluate(args, ())
        print(
            f"without the sanitizer: wall {baseline_wall:.1f} s, "
            f"aggregate {plain['scores']['aggregate']!r}"
        )
    results, wall = _evaluate(args, tools)
    section = results["environment"].get("sanitizer") or {}
    if "tools" not in section:
        print(f"the sanitizer did not run: {section}", file=sys.stderr)
        return 2
    added = section["pass_s"]
    evaluation = wall - added
    print(f"compute-sanitizer: {executable}")
    print(f"sandbox: {results['environment'].get('sandbox', {}).get('overlap')}")
    print(
        f"pass: {added:.1f} s of wall time after the last operator, "
        f"{section['concurrent']} tool(s) at once"
        + (f"; shared log: {section['shared_log']}" if section.get("shared_log") else "")
    )
    print(f"{'tool':<10} {'operators':>9} {'seconds':>8}  failed")
    for tool, figures in section["tools"].items():
        print(
            f"{tool:<10} {len(figures['operators']):>9} {figures['seconds']:>8.1f}  "
            f"{', '.join(figures['failed']) or '-'}"
        )
    for tool, figures in section["tools"].items():
        for child in figures.get("children", []):
            print(
                f"{tool} child {child['log']}: up {child['ahead_s'] or 0:.1f} s before its "
                f"job, start {child['start_s'] or 0:.1f} s, total {child['seconds'] or 0:.1f} s "
                f"(job at {child['job_at_s'] or 0:.1f} s, gone at {child['gone_at_s'] or 0:.1f} "
                f"s of the pass), {len(child['operators'])} operator(s), ended: {child['ended']}"
            )
    skipped = section["tools"].get("racecheck", {}).get("skipped", {})
    print(f"racecheck skipped {len(skipped)}: " + (
        "; ".join(f"{op} ({why})" for op, why in skipped.items()) or "-"
    ))  # fmt: skip
    for op, why in section["tools"].get("racecheck", {}).get("reasons", {}).items():
        print(f"racecheck for {op}: {why}")
    print("per operator (s): " + ", ".join(
        f"{op} " + "+".join(
            f"{t['per_operator_s'][op]:.1f}" if op in t["per_operator_s"] else "-"
            for t in section["tools"].values()
        )
        for op in section["tools"].get("memcheck", {}).get("per_operator_s", {})
    ))  # fmt: skip
    measured = [e for e in results["operators"] if e.get("wall_s") is not None]
    if measured:
        last = measured[-1]
        print(f"last operator {last['operator']}: its turn {last['wall_s']:.1f} s")
    ratio = added / evaluation if evaluation > 0 else float("inf")
    print(
        f"evaluation {evaluation:.1f} s, sanitizer pass {added:.1f} s: +{ratio:.1%} "
        f"(goal <= {GOAL:.0%}: {'met' if ratio <= GOAL else 'NOT met'})"
    )
    end_to_end = None
    if baseline_wall is not None:
        end_to_end = (wall - baseline_wall) / baseline_wall
        print(
            f"end to end: wall {wall:.1f} s with the sanitizer, {baseline_wall:.1f} s without: "
            f"+{end_to_end:.1%}"
        )
    verdicts = {e["operator"]: e.get("verdict") for e in results["operators"]}
    print(f"aggregate {results['scores']['aggregate']!r}")
    if args.results_out:
        Path(args.results_out).write_text(json.dumps(results, indent=1))
    print("verdicts: " + ", ".join(f"{op} {v}" for op, v in verdicts.items()))
    if args.out:
        Path(args.out).write_text(
            json.dumps(
                {"wall_s": wall, "evaluation_s": evaluation, "sanitizer_s": added,
                 "ratio": ratio, "baseline_wall_s": baseline_wall, "end_to_end": end_to_end,
                 "sanitizer": section, "verdicts": verdicts},
                indent=2,
            )
        )  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
