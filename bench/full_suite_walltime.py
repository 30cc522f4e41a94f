"""Wall time of one submission that implements every operator of a suite.

No bundle of this repository implements all 30 operators with kernels of its own, so this
writes one whose every operator is the evaluator's own PyTorch reference (each module
subclasses it): a fallback on every shape, scored 0, but evaluated exactly like any
submission (fresh sandboxed child per operator, validation variants, correctness trials
under the fallback profiler; since harness 0.2.3 a fallback is not timed, as it scores 0
whatever its speed). Then it runs
``python -m evaluator run`` on it and prints where the time went:

    python3 bench/full_suite_walltime.py --suite atrex-bench-v1 --device cuda \\
        [--kernels examples/bundles/triton-baseline] [--no-start-ahead] [--out results.json] \\
        [--concurrency 4]

With ``--kernels DIR`` every operator that bundle implements (``DIR/<operator>.py``) is
taken from it instead: the Triton baseline's 14 kernels and 16 references make a
30-operator submission that is fast where this repository has kernels.

Figures are the host's wall clock of that run; the table's sums come from the
``wall_s``, ``phases_s`` and ``ahead_s`` fields of its results.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from evaluator.suite import load_suite  # noqa: E402

MODULE = '''"""{slug}: the evaluator's own reference (a fallback on purpose: a harness probe)."""

from evaluator.operators.{slug} import Model as Reference


class Model(Reference):
    pass
'''


def write_bundle(folder: Path, operators: list[str], kernels: Path | None = None) -> Path:
    """A bundle of ``operators``: each the file of the same name in ``kernels`` where there
    is one, else a subclass of the evaluator's reference."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "atrex.toml").write_text(
        'title = "Every operator as its PyTorch reference (harness wall-time probe)"\n'
        f'dsl = "{"triton" if kernels else "pytorch"}"\n'
    )
    for slug in operators:
        own = kernels / f"{slug}.py" if kernels else None
        source = own.read_text() if own and own.is_file() else MODULE.format(slug=slug)
        (folder / f"{slug}.py").write_text(source)
    return folder


def summarise(results: dict, wall_s: float) -> dict:
    operators = [o for o in results["operators"] if o.get("wall_s") is not None]
    phases: dict[str, float] = {}
    for entry in operators:
        for name, seconds in (entry.get("phases_s") or {}).items():
            phases[name] = phases.get(name, 0.0) + seconds
    shapes = [s for o in operators for s in o["shapes"]]
    checks = sum((s.get("wall_s") or {}).get("checks", 0.0) for s in shapes)
    timing = sum((s.get("wall_s") or {}).get("timing", 0.0) for s in shapes)
    statuses: dict[str, int] = {}
    for shape in shapes:
        statuses[shape["status"]] = statuses.get(shape["status"], 0) + 1
    return {
        "wall_s": round(wall_s, 1),
        "results_wall_s": round(results["wall_s"], 1),
        "operators": len(operators),
        "shapes": len(shapes),
        "statuses": statuses,
        "start_ahead": results["environment"].get("start_ahead"),
        "children_wall_s": round(sum(o["wall_s"] for o in operators), 1),
        "phases_s": {k: round(v, 1) for k, v in phases.items()},
        "shape_checks_s": round(checks, 1),
        "shape_timing_s": round(timing, 1),
        "median_start_s": round(
            statistics.median((o.get("phases_s") or {}).get("start", 0.0) for o in operators), 3
        ),
        "median_ahead_s": round(statistics.median(o.get("ahead_s") or 0.0 for o in operators), 1),
        **_concurrency(results),
    }


def _concurrency(results: dict) -> dict:
    """The timing window's figures of a run with ``--concurrency`` above 1."""
    digest = results["environment"].get("concurrency")
    if not digest:
        return {}
    return {
        "concurrency": digest["slots"],
        "exclusive_s": digest["exclusive_s"],
        "waited_s": digest["waited_s"],
        "windows": len(digest["windows"]),
        "pauses": len(digest["pauses"]),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--suite", default="atrex-bench-v1")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--operators", default=None, help="comma-separated (default: all)")
    parser.add_argument(
        "--kernels", type=Path, default=None, help="a bundle whose operator files are used"
    )
    parser.add_argument("--start-ahead", default=None, action=argparse.BooleanOptionalAction)
    parser.add_argument("--concurrency", type=int, default=None, help="operators at once")
    parser.add_argument(
        "--operator-costs", type=Path, default=None, help="passed on (see evaluator run)"
    )
    parser.add_argument("--out", type=Path, default=None, help="keep the results.json here")
    parser.add_argument("--log-dir", type=Path, default=None)
    args = parser.parse_args()
    suite = load_suite(args.suite)
    operators = args.operators.split(",") if args.operators else suite.operator_slugs()
    with tempfile.TemporaryDirectory(prefix="atrex-walltime-") as tmp:
        bundle = write_bundle(Path(tmp) / "bundle", operators, args.kernels)
        out = args.out or Path(tmp) / "results.json"
        command = [
            sys.executable, "-m", "evaluator", "run", str(bundle), "--suite", args.suite,
            "--device", args.device, "--out", str(out),
            "--log-dir", str(args.log_dir or Path(tmp) / "logs"),
        ]  # fmt: skip
        if args.operators:
            command += ["--operators", args.operators]
        if args.start_ahead is not None:
            command.append("--start-ahead" if args.start_ahead else "--no-start-ahead")
        if args.concurrency is not None:
            command += ["--concurrency", str(args.concurrency)]
        if args.operator_costs is not None:
            command += ["--operator-costs", str(args.operator_costs.resolve())]
        started = time.monotonic()
        done = subprocess.run(command, cwd=ROOT, check=False)  # noqa: S603 - fixed argv
        wall_s = time.monotonic() - started
        results = json.loads(out.read_text())
    if done.returncode not in (0, 1):
        print(f"the evaluator exited with {done.returncode}", file=sys.stderr)
        return done.returncode
    summary = summarise(results, wall_s)
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
