"""What the compute-sanitizer pass adds to an evaluation (evaluator/sanitizer.py).

Evaluates a bundle once on CUDA with the sanitizer on (each operator's smallest shape,
one call, under memcheck, then racecheck where a kernel uses shared memory; one sanitized
child per tool for all operators) and prints, per tool, child and operator, the seconds the
pass took against the evaluation's own (the run's wall time less the pass), and the
ratio, whose goal is at most 0.20:

    python3 bench/sanitizer_cost.py [--bundle examples/bundles/triton-baseline]
        [--suite atrex-bench-v1] [--operators rms_norm,silu_and_mul] [--shapes full]
        [--tools memcheck,racecheck] [--out sanitizer-cost.json] [--results-out results.json]

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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bundle", default=str(ROOT / "examples" / "bundles" / "triton-baseline"))
    parser.add_argument("--suite", default="atrex-bench-v1")
    parser.add_argument("--operators", default=None, help="comma-separated (default: all)")
    parser.add_argument("--shapes", default="full", choices=("full", "smoke"))
    parser.add_argument("--tools", default="memcheck,racecheck")
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
    operators = [s for s in (args.operators or "").split(",") if s] or None
    started = time.monotonic()
    results = run_bundle(
        bundle_path=args.bundle,
        suite=args.suite,
        hardware="h200-sxm",
        device="cuda",
        operators=operators,
        shape_set=args.shapes,
        log_dir=args.log_dir,
        sanitizer_tools=tools,
    )
    wall = time.monotonic() - started
    section = results["environment"].get("sanitizer") or {}
    if "tools" not in section:
        print(f"the sanitizer did not run: {section}", file=sys.stderr)
        return 2
    added = sum(t["seconds"] for t in section["tools"].values())
    evaluation = wall - added
    print(f"compute-sanitizer: {executable}")
    print(f"{'tool':<10} {'operators':>9} {'seconds':>8}  failed")
    for tool, figures in section["tools"].items():
        print(
            f"{tool:<10} {len(figures['operators']):>9} {figures['seconds']:>8.1f}  "
            f"{', '.join(figures['failed']) or '-'}"
        )
    for tool, figures in section["tools"].items():
        for child in figures.get("children", []):
            print(
                f"{tool} child {child['log']}: start {child['start_s'] or 0:.1f} s, "
                f"total {child['seconds'] or 0:.1f} s, {len(child['operators'])} operator(s), "
                f"ended: {child['ended']}"
            )
    print("per operator (s): " + ", ".join(
        f"{op} " + "+".join(f"{t['per_operator_s'].get(op, 0):.1f}"
                             for t in section["tools"].values())
        for op in section["tools"].get("memcheck", {}).get("per_operator_s", {})
    ))  # fmt: skip
    ratio = added / evaluation if evaluation > 0 else float("inf")
    print(
        f"evaluation {evaluation:.1f} s, sanitizer pass {added:.1f} s: +{ratio:.1%} "
        f"(goal <= {GOAL:.0%}: {'met' if ratio <= GOAL else 'NOT met'})"
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
                 "ratio": ratio, "sanitizer": section, "verdicts": verdicts},
                indent=2,
            )
        )  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
