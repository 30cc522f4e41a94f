"""One bundle evaluated one operator at a time and K at once (``--concurrency``): wall time
per phase, the timing window's figures, and what moved per shape.

Both runs use the same secret seed (so the same correctness inputs) and are otherwise
``python -m evaluator run`` as a worker runs it:

    python3 bench/concurrency_compare.py --suite atrex-bench-v0.1 --device cpu \\
        --bundle examples/bundles/triton-baseline --concurrency 2 [--json out.json]
    python3 bench/concurrency_compare.py --suite atrex-bench-v1 --device cuda \\
        --kernels examples/bundles/triton-baseline --concurrency 4 --json out.json

``--kernels DIR`` evaluates the 30-operator submission of ``bench/full_suite_walltime.py``
(DIR's kernels, the references elsewhere) instead of ``--bundle``. ``--order K,1`` runs the
concurrent run first. Printed: per run the wall time, the summed phases of the children
(start, harness, import, variants, shapes), the shapes' checks and timing, the windows'
exclusive and waiting seconds, the pauses and re-watches; then the verdicts (they must be
equal) and, per shape, the relative difference of time, eager time, roofline fraction,
own-kernel share and watched time between the two runs (timing noise, or a distortion).
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from full_suite_walltime import write_bundle  # noqa: E402

FIGURES = (
    "time_ms",
    "reference_time_ms",
    "roofline_fraction",
    "own_kernel_share",
    "watched_time_ms",
)


def evaluate(
    args: argparse.Namespace,
    bundle: Path,
    concurrency: int,
    seed: int,
    tmp: Path,
    timeout_s: float | None = None,
) -> dict[str, Any] | None:
    """One ``python -m evaluator run`` at ``concurrency``: its results and wall time (None
    when it did not finish within ``timeout_s``)."""
    out = tmp / f"results-{concurrency}.json"
    command = [
        sys.executable, "-m", "evaluator", "run", str(bundle), "--suite", args.suite,
        "--device", args.device, "--out", str(out), "--seed", str(seed),
        "--concurrency", str(concurrency), "--log-dir", str(tmp / f"logs-{concurrency}"),
    ]  # fmt: skip
    for name in ("operators", "shapes", "time_budget_s", "operator_costs"):
        value = getattr(args, name)
        if value is not None:
            command += [f"--{name.replace('_', '-')}", str(value)]
    started = time.monotonic()
    try:
        done = subprocess.run(command, cwd=ROOT, check=False, timeout=timeout_s)  # noqa: S603
    except subprocess.TimeoutExpired:
        print(f"N={concurrency}: not finished within {timeout_s:.0f} s", flush=True)
        return None
    wall_s = time.monotonic() - started
    results = json.loads(out.read_text())
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
        (args.keep / out.name).write_text(out.read_text())
    return {"results": results, "wall_s": wall_s, "exit": done.returncode}


def phases(run: dict[str, Any], concurrency: int) -> dict[str, Any]:
    """Where one run's time went (the children's sums overlap when run at once)."""
    results = run["results"]
    operators = [o for o in results.get("operators") or [] if o.get("wall_s") is not None]
    summed: dict[str, float] = {}
    for entry in operators:
        for name, seconds in (entry.get("phases_s") or {}).items():
            summed[name] = summed.get(name, 0.0) + seconds
    shapes = [s for o in results.get("operators") or [] for s in o["shapes"]]
    digest = (results.get("environment") or {}).get("concurrency") or {}
    windows = digest.get("windows") or []
    return {
        "concurrency": concurrency,
        "exit": run["exit"],
        "wall_s": round(run["wall_s"], 1),
        "results_wall_s": round(results.get("wall_s") or 0.0, 1),
        "children_wall_s": round(sum(o["wall_s"] for o in operators), 1),
        "phases_s": {k: round(v, 1) for k, v in summed.items()},
        "shape_checks_s": round(sum((s.get("wall_s") or {}).get("checks", 0.0) for s in shapes), 1),
        "shape_timing_s": round(sum((s.get("wall_s") or {}).get("timing", 0.0) for s in shapes), 1),
        "exclusive_s": digest.get("exclusive_s"),
        "waited_s": digest.get("waited_s"),
        "windows": len(windows),
        "windows_shared": sum(1 for w in windows if w.get("shared")),
        "pauses": len(digest.get("pauses") or []),
        "rewatched": sum(1 for s in shapes if s.get("watch_confirmed")),
        "rewatch_confirmed": sum(
            1 for s in shapes if (s.get("watch_confirmed") or {}).get("confirmed")
        ),
        "sanitizer_pass_s": ((results.get("environment") or {}).get("sanitizer") or {}).get(
            "pass_s"
        ),
    }


def relative(a: Any, b: Any) -> float | None:
    if not isinstance(a, int | float) or not isinstance(b, int | float) or not a:
        return None
    return (b - a) / abs(a)


def differences(first: dict[str, Any], second: dict[str, Any]) -> dict[str, Any]:
    """Verdicts compared, and each figure's relative difference per shape (second - first)."""
    ones = {(o["operator"], s["shape_id"]): (o, s) for o in first["operators"] for s in o["shapes"]}
    verdicts_equal = True
    moved: list[dict[str, Any]] = []
    per_figure: dict[str, list[float]] = {name: [] for name in FIGURES}
    for operator in second["operators"]:
        for shape in operator["shapes"]:
            key = (operator["operator"], shape["shape_id"])
            if key not in ones:
                verdicts_equal = False
                continue
            first_operator, first_shape = ones[key]
            same = (
                first_operator["verdict"] == operator["verdict"]
                and first_shape["status"] == shape["status"]
                and sorted(first_shape["codes"]) == sorted(shape["codes"])
            )
            verdicts_equal &= same
            row: dict[str, Any] = {"operator": key[0], "shape_id": key[1], "same_verdict": same}
            for name in FIGURES:
                change = relative(first_shape.get(name), shape.get(name))
                row[name] = None if change is None else round(change, 4)
                if change is not None:
                    per_figure[name].append(change)
            if not same:
                row["statuses"] = [first_shape["status"], shape["status"]]
            moved.append(row)
    summary = {
        name: {
            "shapes": len(values),
            "median": round(statistics.median(values), 4),
            "max_abs": round(max(abs(v) for v in values), 4),
        }
        for name, values in per_figure.items()
        if values
    }
    return {"verdicts_equal": verdicts_equal, "figures": summary, "shapes": moved}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--suite", default="atrex-bench-v0.1")
    parser.add_argument("--device", default="cpu")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--bundle", type=Path, help="the bundle to evaluate")
    source.add_argument(
        "--kernels", type=Path, help="the 30-operator submission with these kernels"
    )
    parser.add_argument("--concurrency", type=int, default=2, help="K (compared with 1)")
    parser.add_argument("--order", default="1,K", choices=("1,K", "K,1"))
    parser.add_argument("--operators", default=None)
    parser.add_argument("--shapes", default=None, choices=("smoke", "full"))
    parser.add_argument("--time-budget-s", type=float, default=None)
    parser.add_argument("--only", type=int, default=None, help="run only this concurrency")
    parser.add_argument(
        "--budget-s",
        type=float,
        default=None,
        help="seconds for both runs: the second starts only if --second-needs-s are left",
    )
    parser.add_argument("--second-needs-s", type=float, default=360.0)
    parser.add_argument(
        "--operator-costs", type=Path, default=None, help="passed on (see evaluator run)"
    )
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--keep", type=Path, default=None, help="copy the results.json files here")
    args = parser.parse_args()
    seed = secrets.randbits(62)
    levels = [1, args.concurrency] if args.order == "1,K" else [args.concurrency, 1]
    if args.only is not None:
        levels = [args.only]
    runs: dict[int, dict[str, Any]] = {}
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="atrex-concurrency-") as made:
        tmp = Path(made)
        os.chmod(tmp, 0o755)
        bundle = args.bundle
        if args.kernels is not None:
            from evaluator.suite import load_suite

            suite = load_suite(args.suite)
            operators = args.operators.split(",") if args.operators else suite.operator_slugs()
            bundle = write_bundle(tmp / "bundle", operators, args.kernels)
        for index, level in enumerate(levels):
            left = None if args.budget_s is None else args.budget_s - (time.monotonic() - began)
            if left is not None and index and left < args.second_needs_s:
                print(f"N={level} skipped: {left:.0f} s of the budget left", flush=True)
                break
            run = evaluate(args, bundle, level, seed, tmp, timeout_s=left)
            if run is None:
                break
            runs[level] = run
            print(json.dumps(phases(runs[level], level)), flush=True)
    report: dict[str, Any] = {
        "command": sys.argv,
        "runs": [phases(runs[level], level) for level in levels if level in runs],
    }
    if len(runs) == 2 and all(not r["results"].get("error") for r in runs.values()):
        report["compare"] = differences(runs[1]["results"], runs[args.concurrency]["results"])
        one, many = runs[1]["wall_s"], runs[args.concurrency]["wall_s"]
        report["speedup"] = round(one / many, 2) if many else None
        print(
            f"{'run':>6} {'wall s':>8} {'checks s':>9} {'timing s':>9} {'excl s':>7} {'wait s':>7}"
        )
        for row in report["runs"]:
            print(
                f"{'N=' + str(row['concurrency']):>6} {row['wall_s']:>8} "
                f"{row['shape_checks_s']:>9} {row['shape_timing_s']:>9} "
                f"{row['exclusive_s'] or 0:>7} {row['waited_s'] or 0:>7}"
            )
        print(
            f"speedup {report['speedup']}x; verdicts equal: {report['compare']['verdicts_equal']}"
        )
        for name, figure in report["compare"]["figures"].items():
            print(
                f"  {name:<20} {figure['shapes']:>4} shapes  median {figure['median']:+.1%}"
                f"  max |{figure['max_abs']:.1%}|"
            )
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    return 0 if report.get("compare", {}).get("verdicts_equal", True) else 3


if __name__ == "__main__":
    raise SystemExit(main())
