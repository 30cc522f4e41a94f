"""What the fork server (evaluator/forkserver.py) saves: children exec'd against forked.

Evaluates one bundle (default: the Triton baseline on atrex-bench v0.1's smoke shapes, every
operator it has there) ``--runs`` times in this process with ``ATREX_FORK_SERVER`` at each of
``--modes`` (``0``: every child exec'd; ``1``: forked from the server), and prints per mode
the median of: the run's wall time, the CPU time of all its processes (this process's
children, the server included once it is stopped after each run), and each operator's
child start-up (``phases_s.start`` + ``harness``: from its launch to its harness being ready):

    python3 bench/fork_server.py [--device cpu] [--suite atrex-bench-v0.1] [--runs 3]
        [--modes 0,1] [--json out.json]

The figures are the host's; on a shared machine run it when the machine is quiet.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from evaluator import forkserver  # noqa: E402
from evaluator.runner import run_bundle  # noqa: E402


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def one_run(bundle: Path, suite: str, device: str, mode: str) -> dict:
    os.environ["ATREX_FORK_SERVER"] = mode
    cpu, wall = _children_cpu(), time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="atrex-fork-bench-") as folder:
        results = run_bundle(
            bundle_path=bundle, suite=suite, hardware="cpu-dev" if device == "cpu" else "h200-sxm",
            device=device, shape_set="smoke", time_budget_s=0.02, log_dir=Path(folder) / "logs",
            start_ahead=False, sanitizer_tools=(),
        )  # fmt: skip
        forkserver.close_all()  # its CPU counts once it is reaped
    wall = time.perf_counter() - wall
    starts = {
        entry["operator"]: round(
            sum(entry.get("phases_s", {}).get(name, 0.0) for name in ("start", "harness")), 3
        )
        for entry in results["operators"]
    }
    statuses = sorted({s["status"] for e in results["operators"] for s in e["shapes"]})
    return {
        "wall_s": round(wall, 3),
        "cpu_s": round(_children_cpu() - cpu, 3),
        "child_start_s": starts,
        "statuses": statuses,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bundle", type=Path, default=ROOT / "examples/bundles/triton-baseline")
    parser.add_argument("--suite", default="atrex-bench-v0.1")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--modes", default="0,1")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    report: dict = {"load_before": os.getloadavg(), "modes": {}}
    for mode in args.modes.split(","):
        runs = [one_run(args.bundle, args.suite, args.device, mode) for _ in range(args.runs)]
        operators = sorted(runs[0]["child_start_s"])
        report["modes"][mode] = {
            "runs": runs,
            "wall_s": statistics.median(r["wall_s"] for r in runs),
            "cpu_s": statistics.median(r["cpu_s"] for r in runs),
            "child_start_s": {
                op: statistics.median(r["child_start_s"][op] for r in runs) for op in operators
            },
        }
    report["load_after"] = os.getloadavg()
    print(f"{'mode':10s} {'run wall s':>10s} {'all CPU s':>10s}  child start s per operator")
    for mode, row in report["modes"].items():
        name = {"0": "exec'd", "1": "forked"}.get(mode, mode)
        starts = ", ".join(f"{op} {s:.2f}" for op, s in row["child_start_s"].items())
        print(f"{name:10s} {row['wall_s']:10.2f} {row['cpu_s']:10.2f}  {starts}")
    before, after = report["load_before"][0], report["load_after"][0]
    print(f"load average before {before:.2f}, after {after:.2f}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
