"""Where each second of a submission's evaluation goes, per operator and per phase.

Runs ``python -m evaluator run`` on a bundle (or reads a results.json it wrote) and
divides every operator's turn into the phases the harness records in results.json
(``phases_s`` and ``ahead_s`` of the operator, ``wall_s`` of each shape):

    start       child start-up left when its job came (sandbox, interpreter, torch, device,
                profiler); ``ahead`` is what was hidden behind the previous operator
    harness     the operator's reference module and the integrity snapshot
    import      the candidate's import
    precompile  a campaign round's specialisations compiled before its first shape, those its
                previous round compiled (``evaluator.compile_ahead``, harness 0.3.12)
    variants    hidden validation variants (correctness only)
    setup       per shape: reference and Model built, fallback monitor set up
    inputs      correctness inputs generated (twice per trial: the candidate's, the check's)
    compile     the first correctness call of each shape (Triton compiles happen there)
    candidate   the other correctness calls (under the fallback monitor, unless the first
                call decided the shape a fallback: harness 0.3.2)
    reference   the reference's correctness outputs
    compare     comparison and hygiene checks of the correctness outputs
    hooks       around each correctness call: the allocator poisoned before it, the
                integrity checks and the output's copy after it, and whether the first call
                settled the shape (harness 0.3.7; before, in ``fb_report``)
    fb_report   the fallback monitor's report (what is left of a shape's checks; measured
                apart as ``fb_report`` since harness 0.3.7)
    timing      the candidate's timing loop (its hooks: ``timed_inputs``, ``timed_checks``)
    t_reference the reference's timing
    t_checks    the timed calls' fresh inputs and output checks (outside the timed region)
    io          what the child spent on anything else: records, shapes not broken down
    exit        the child's tear-down
    runner      the run's wall time outside every child's turn (bundle, sandbox, results)

    python3 bench/where_time_goes.py --suite atrex-bench-v1 --device cuda \\
        [--kernels examples/bundles/triton-baseline] [--operators a,b] [--shapes smoke] \\
        [--json where.json] [--results-out results.json]
    python3 bench/where_time_goes.py --results results.json   # an existing run's figures

The bundle is ``bench/full_suite_walltime.py``'s: every operator of the suite, from
``--kernels`` where that bundle has it, else the evaluator's own reference (a fallback).
On the CPU, ``TRITON_INTERPRET=1`` is set by the evaluator itself for its children.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

COLUMNS = (
    "ahead", "start", "harness", "import", "precompile", "variants", "setup", "inputs", "compile",
    "candidate", "reference", "compare", "hooks", "fb_report", "timing", "t_reference", "t_checks",
    "io", "exit",
)  # fmt: skip
"""Table columns in order; ``ahead`` is hidden behind the previous operator (not in the
operator's wall time), the others add up to it."""
CHECK_PARTS = ("setup", "inputs", "compile", "candidate", "reference", "compare", "hooks")
"""The parts of a shape's correctness checks that the harness times apart."""


def operator_phases(entry: dict[str, Any]) -> dict[str, float]:
    """The phases of one operator's entry of results.json (seconds)."""
    child = entry.get("phases_s") or {}
    out = {name: 0.0 for name in COLUMNS}
    out["ahead"] = float(entry.get("ahead_s") or 0.0)
    for name in ("start", "harness", "import", "precompile", "variants", "exit"):
        out[name] = float(child.get(name, 0.0))
    shapes_s = float(child.get("shapes", 0.0))
    accounted = 0.0
    for shape in entry.get("shapes") or []:
        wall = shape.get("wall_s") or {}
        parts = {
            "setup": wall.get("setup", 0.0),
            "inputs": wall.get("inputs", 0.0),
            "compile": wall.get("candidate_first", 0.0),
            "candidate": wall.get("candidate", 0.0),
            "reference": wall.get("reference", 0.0),
            "compare": wall.get("compare", 0.0),
            "hooks": wall.get("hooks", 0.0),
            # The loop's hooks (inputs refilled, the first call checked) are outside the
            # timed region but inside the loop: counted as checks, not as timing.
            "timing": wall.get("timed_candidate", 0.0)
            - wall.get("timed_inputs", 0.0)
            - wall.get("timed_first_check", 0.0),
            "t_reference": wall.get("timed_reference", 0.0),
            "t_checks": wall.get("timed_checks", 0.0)
            + wall.get("timed_inputs", 0.0)
            + wall.get("timed_first_check", 0.0),
        }
        if "timed_candidate" not in wall:  # a harness before 0.2.5: timing in one figure
            parts["timing"] = wall.get("timing", 0.0)
        checks = wall.get("checks")
        if checks is not None:
            broken_down = sum(parts[k] for k in CHECK_PARTS)
            parts["fb_report"] = max(0.0, checks - broken_down)
        for name, seconds in parts.items():
            out[name] += max(0.0, float(seconds))
            accounted += max(0.0, float(seconds))
    out["io"] = max(0.0, shapes_s - accounted)
    return {k: round(v, 3) for k, v in out.items()}


def breakdown(results: dict[str, Any], wall_s: float | None = None) -> dict[str, Any]:
    """Per-operator phases, their totals, and the run's time outside the children."""
    rows = {}
    for entry in results.get("operators") or []:
        if entry.get("wall_s") is None:
            continue
        rows[entry["operator"]] = {
            "wall_s": round(float(entry["wall_s"]), 3),
            "shapes": len(entry.get("shapes") or []),
            "statuses": _statuses(entry),
            **operator_phases(entry),
        }
    totals = {name: round(sum(row[name] for row in rows.values()), 2) for name in COLUMNS}
    children = sum(row["wall_s"] for row in rows.values())
    run_wall = float(results.get("wall_s") or 0.0)
    return {
        "wall_s": round(wall_s if wall_s is not None else run_wall, 2),
        "results_wall_s": round(run_wall, 2),
        "children_wall_s": round(children, 2),
        "runner_s": round(max(0.0, run_wall - children), 2),
        "start_ahead": (results.get("environment") or {}).get("start_ahead"),
        "harness_version": (results.get("environment") or {}).get("harness_version"),
        "totals_s": totals,
        "operators": rows,
    }


def _statuses(entry: dict[str, Any]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for shape in entry.get("shapes") or []:
        counts[shape["status"]] = counts.get(shape["status"], 0) + 1
    return counts


def table(summary: dict[str, Any]) -> str:
    """The breakdown as a fixed-width table (seconds), one line per operator and a total."""
    head = f"{'operator':28s} {'wall':>7s} " + " ".join(f"{c[:9]:>9s}" for c in COLUMNS)
    lines = [head, "-" * len(head)]
    for name, row in summary["operators"].items():
        cells = " ".join(f"{row[c]:9.2f}" for c in COLUMNS)
        lines.append(f"{name[:28]:28s} {row['wall_s']:7.2f} {cells}")
    lines.append("-" * len(head))
    totals = summary["totals_s"]
    cells = " ".join(f"{totals[c]:9.2f}" for c in COLUMNS)
    lines.append(f"{'total':28s} {summary['children_wall_s']:7.2f} {cells}")
    lines.append(
        f"run wall {summary['wall_s']:.1f} s (results.json {summary['results_wall_s']:.1f} s): "
        f"children {summary['children_wall_s']:.1f} s, runner {summary['runner_s']:.1f} s, "
        f"start-ahead {summary['start_ahead']}, harness {summary['harness_version']}"
    )
    return "\n".join(lines)


def run(args: argparse.Namespace) -> tuple[dict[str, Any], float]:
    """Evaluate the bundle with ``python -m evaluator run``; (results, host wall seconds)."""
    from full_suite_walltime import write_bundle

    from evaluator.suite import load_suite

    suite = load_suite(args.suite)
    operators = args.operators.split(",") if args.operators else suite.operator_slugs()
    with tempfile.TemporaryDirectory(prefix="atrex-where-") as tmp:
        bundle = args.bundle or write_bundle(Path(tmp) / "bundle", operators, args.kernels)
        out = args.results_out or Path(tmp) / "results.json"
        command = [
            sys.executable, "-m", "evaluator", "run", str(bundle), "--suite", args.suite,
            "--device", args.device, "--out", str(out), "--log-dir", str(Path(tmp) / "logs"),
        ]  # fmt: skip
        if args.operators:
            command += ["--operators", args.operators]
        if args.shapes:
            command += ["--shapes", args.shapes]
        if args.visibility:
            command += ["--visibility", args.visibility]
        if args.start_ahead is not None:
            command.append("--start-ahead" if args.start_ahead else "--no-start-ahead")
        if args.reference_pool:
            command += ["--reference-pool", str(args.reference_pool), *args.pool_option]
        if args.reference_timings:
            command += ["--reference-timings", str(args.reference_timings)]
        started = time.monotonic()
        done = subprocess.run(command, cwd=ROOT, check=False)  # noqa: S603 - fixed argv
        wall_s = time.monotonic() - started
        if done.returncode not in (0, 1):
            raise SystemExit(f"the evaluator exited with {done.returncode}")
        return json.loads(Path(out).read_text()), wall_s


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", type=Path, default=None, help="read this results.json")
    parser.add_argument("--suite", default="atrex-bench-v1")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--operators", default=None, help="comma-separated (default: all)")
    parser.add_argument("--shapes", default=None, choices=("smoke", "full"))
    parser.add_argument("--visibility", default=None, choices=("all", "public"))
    parser.add_argument("--bundle", type=Path, default=None, help="evaluate this bundle as is")
    parser.add_argument(
        "--kernels", type=Path, default=None, help="a bundle whose operator files are used"
    )
    parser.add_argument("--start-ahead", default=None, action=argparse.BooleanOptionalAction)
    parser.add_argument("--results-out", type=Path, default=None, help="keep results.json here")
    parser.add_argument(
        "--reference-pool", type=Path, default=None, metavar="DIR",
        help="evaluate with this worker's reference pool (evaluator/reference_pool.py)",
    )  # fmt: skip
    parser.add_argument(
        "--pool-option", action="append", default=[], metavar="ARG",
        help="passed on to the evaluator with the pool, e.g. --pool-option=--pool-entries=8",
    )  # fmt: skip
    parser.add_argument(
        "--reference-timings", type=Path, default=None, metavar="DIR",
        help="evaluate with this worker's eager reference timings (evaluator/reference_timings.py)",
    )  # fmt: skip
    parser.add_argument("--json", type=Path, default=None, help="write the breakdown here")
    args = parser.parse_args()
    if args.results is not None:
        summary = breakdown(json.loads(args.results.read_text()))
    else:
        results, wall_s = run(args)
        summary = breakdown(results, wall_s)
    print(table(summary))
    if args.json is not None:
        args.json.write_text(json.dumps(summary, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
