"""How much faster an honest bundle's timed calls run than its watched calls on the CPU, on
an idle host and beside busy loops: the ratio the watched-against-timed check compares
with its limit (``evaluator.measure.unwatched_path_error``, 5x on the CPU).

Evaluates each bundle with ``python -m evaluator run`` from each harness checkout given
(``--harness``: this one by default; pass an older checkout, e.g. a ``git worktree`` of
the commit before, for the "before" figures) ``--runs`` times with no load, then as many
times beside ``--load`` busy-loop processes (default: two a core), and prints every
timed shape's ratio: the shape's ``unwatched_speedup`` where the harness records it
(counted time on the CPU, ``evaluator.counted_time``), else ``watched_time_ms /
time_ms`` (wall time: what harnesses before it compared). Then per harness and load the
median and the largest ratio, and how many shapes the check made a fallback
(``unwatched_path``)::

    python3 bench/unwatched_ratio.py [--harness .,/tmp/before] [--suite atrex-bench-v0.1]
        [--bundle examples/bundles/triton-baseline] [--runs 2] [--load 4] [--json out.json]

The load runs on the same cores as the evaluation; run it on an otherwise quiet machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIMIT = 5.0
BUSY_LOOP = "import time\nend = time.monotonic() + 3600\nwhile time.monotonic() < end: pass\n"


def evaluate(harness: Path, bundle: Path, suite: str, budget: float) -> dict:
    """One CPU evaluation of ``bundle`` by the harness at ``harness``; its results.json."""
    with tempfile.TemporaryDirectory(prefix="atrex-unwatched-") as folder:
        out = Path(folder) / "results.json"
        command = [
            sys.executable, "-m", "evaluator", "run", str(bundle.resolve()), "--suite", suite,
            "--device", "cpu", "--shapes", "smoke", "--time-budget-s", str(budget),
            "--out", str(out), "--log-dir", str(Path(folder) / "logs"),
        ]  # fmt: skip
        env = {**os.environ, "PYTHONPATH": str(harness.resolve())}
        subprocess.run(  # noqa: S603 - this interpreter, fixed arguments
            command, cwd=harness, env=env, check=True, stdout=subprocess.DEVNULL
        )
        return json.loads(out.read_text())


def shape_ratios(results: dict) -> list[dict]:
    """Every timed shape's watched-against-timed ratio and how the harness got it."""
    rows = []
    for entry in results["operators"]:
        for shape in entry["shapes"]:
            if "unwatched_speedup" in shape:
                ratio, figure = shape["unwatched_speedup"], "counted"
            elif shape.get("watched_time_ms") and shape.get("time_ms"):
                ratio, figure = shape["watched_time_ms"] / shape["time_ms"], "wall"
            else:
                ratio, figure = None, None
            if ratio is None:
                continue
            rows.append(
                {
                    "operator": entry["operator"],
                    "shape": shape["shape_id"],
                    "status": shape["status"],
                    "codes": shape.get("codes") or [],
                    "ratio": round(ratio, 3),
                    "figure": figure,
                }
            )
    return rows


def busy_loops(count: int) -> list[subprocess.Popen]:
    loops = [subprocess.Popen([sys.executable, "-S", "-c", BUSY_LOOP]) for _ in range(count)]  # noqa: S603
    time.sleep(0.5)
    return loops


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--harness", default=str(ROOT), help="comma-separated checkouts")
    parser.add_argument("--bundle", type=Path, default=ROOT / "examples/bundles/triton-baseline")
    parser.add_argument("--suite", default="atrex-bench-v0.1")
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--load", type=int, default=2 * len(os.sched_getaffinity(0)))
    parser.add_argument("--time-budget-s", type=float, default=0.2)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    report: dict = {
        "load_before": os.getloadavg(),
        "cpus": len(os.sched_getaffinity(0)),
        "busy_loops": args.load,
        "suite": args.suite,
        "bundle": str(args.bundle),
        "conditions": [],
    }
    for harness in (Path(h) for h in args.harness.split(",")):
        for loaded in (False, True):
            loops = busy_loops(args.load) if loaded else []
            try:
                rows = []
                for run in range(args.runs):
                    results = evaluate(harness, args.bundle, args.suite, args.time_budget_s)
                    rows += [{**row, "run": run} for row in shape_ratios(results)]
            finally:
                for loop in loops:
                    loop.kill()
                for loop in loops:
                    loop.wait()
            ratios = [row["ratio"] for row in rows]
            report["conditions"].append(
                {
                    "harness": str(harness),
                    "busy_loops": args.load if loaded else 0,
                    "figure": sorted({row["figure"] for row in rows}),
                    "shapes": len(rows),
                    "median": round(statistics.median(ratios), 3) if ratios else None,
                    "max": max(ratios) if ratios else None,
                    "over_limit": sum(1 for r in ratios if r > LIMIT),
                    "unwatched_path": sum(1 for row in rows if "unwatched_path" in row["codes"]),
                    "rows": rows,
                }
            )
    print(f"{'harness':<28} {'loops':>5} {'figure':<8} {'shapes':>6} {'median':>7} "
          f"{'max':>7} {'>5x':>4} {'flagged':>7}")  # fmt: skip
    for c in report["conditions"]:
        print(
            f"{c['harness'][-28:]:<28} {c['busy_loops']:>5} {','.join(c['figure']):<8} "
            f"{c['shapes']:>6} {c['median'] or 0:>7.2f} {c['max'] or 0:>7.2f} "
            f"{c['over_limit']:>4} {c['unwatched_path']:>7}"
        )
    print("\nper shape (ratio per run):")
    for c in report["conditions"]:
        shapes: dict[tuple[str, str], list[float]] = {}
        for row in c["rows"]:
            shapes.setdefault((row["operator"], row["shape"]), []).append(row["ratio"])
        line = ", ".join(
            f"{op}/{shape} {'/'.join(f'{r:.2f}' for r in values)}"
            for (op, shape), values in sorted(shapes.items())
        )
        print(f"  {c['harness'][-28:]} loops={c['busy_loops']}: {line}")
    report["load_after"] = os.getloadavg()
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
