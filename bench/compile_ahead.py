"""What a revised kernel's Triton compiles cost a round, and what compiling them ahead,
several at once, would save.

An agent's round whose kernel changed compiles every specialisation again (the campaign's
Triton cache is keyed by the bundle's digest). This measures, for one operator's public
shapes, in fresh processes with empty Triton caches:

    record   one pass over the shapes as a round's child runs it (``evaluate_shape``), the
             specialisations Triton compiled written down as they compile
             (``evaluator.compile_ahead.Recorder``)
    threads-K  another fresh process: those specialisations compiled before the pass on K
               threads of the process (``evaluator.compile_ahead.compile_ahead(forks=False)``)
    forks-K    the same with K forked copies of the process compiling into Triton's cache,
               then K threads loading them (what a round's child does)

and prints the seconds spent compiling ahead beside each pass's "compile" phase (the first
call of each shape, ``candidate_first``), and the pass::

    python3 bench/compile_ahead.py --device cuda [--operator rms_norm]
        [--ways threads-1,threads-8,forks-16] [--suite atrex-bench-v1]
        [--kernels examples/bundles/triton-baseline] [--json out.json]

Every process starts with its own empty ``TRITON_CACHE_DIR``, as a revised kernel's round
does. On the CPU (the Triton interpreter) nothing compiles, so the figures mean something
on a GPU only.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from round_profile import add_job_arguments  # noqa: E402


def one_process(args: argparse.Namespace, specs_path: Path, way: str) -> None:
    """Inside a fresh process: record (``way`` "record"), or compile ahead ``way``'s way,
    then one pass."""
    from round_profile import build_job, one_pass

    from evaluator import child, compile_ahead
    from evaluator.fallback_cuda import ModuleScanMemo

    steps: list[tuple[str, float]] = [("start", time.perf_counter())]
    child.warm_up(args.device, steps)
    job = build_job(args)
    recorder = compile_ahead.Recorder()
    recorder.install()
    module = child.import_candidate(
        Path(job["bundle_dir"]) / job["module_path"], job["operator"], Path(job["bundle_dir"])
    )
    ahead: dict[str, Any] = {}
    if way != "record":
        kind, count = way.split("-")
        specs = json.loads(specs_path.read_text())
        started = time.perf_counter()
        ahead = compile_ahead.compile_ahead(
            [module], specs, recorder=recorder, workers=int(count), forks=kind == "forks"
        )
        ahead["wall_s"] = time.perf_counter() - started
    wall_s, phases, records = one_pass(job, module.Model, None, ModuleScanMemo())
    statuses: dict[str, int] = {}
    for record in records:
        statuses[record["status"]] = statuses.get(record["status"], 0) + 1
    if way == "record":
        specs_path.write_text(json.dumps(recorder.specs()))
    print(
        json.dumps(
            {
                "way": way,
                "shapes": len(records),
                "statuses": statuses,
                "pass_s": wall_s,
                "compile_s": phases.get("candidate_first", 0.0),
                "phases": phases,
                "ahead": ahead,
                "recorded": len(recorder.specs()),
            }
        )
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_job_arguments(parser)
    parser.add_argument("--ways", default="threads-1,threads-8,forks-16")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--inner", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--specs", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inner is not None:
        one_process(args, args.specs, args.inner)
        return 0

    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="compile-ahead-") as scratch:
        specs = Path(scratch) / "specs.json"
        for number, way in enumerate(["record", *args.ways.split(",")]):
            cache = Path(scratch) / f"cache-{number}-{way}"
            cache.mkdir()
            command = [sys.executable, __file__, "--inner", way, "--specs", str(specs)]
            for flag in ("device", "suite", "operator", "kernels", "shapes", "limit"):
                value = getattr(args, flag)
                if value is not None:
                    command += [f"--{flag}", str(value)]
            env = {**os.environ, "TRITON_CACHE_DIR": str(cache)}
            started = time.perf_counter()
            done = subprocess.run(command, env=env, capture_output=True, text=True)
            if done.returncode != 0:
                print(done.stdout + done.stderr, file=sys.stderr)
                return 1
            row = json.loads(done.stdout.strip().splitlines()[-1])
            row["process_s"] = time.perf_counter() - started
            rows.append(row)
            ahead = row["ahead"]
            print(
                f"{way:<10s} shapes {row['shapes']:3d} {row['statuses']}  "
                f"ahead {ahead.get('wall_s', 0.0):6.2f} s ({ahead.get('compiled', 0)} compiled, "
                f"{ahead.get('skipped', 0)} skipped, {ahead.get('forks', 0)} forks made in "
                f"{ahead.get('fork_s', 0.0):.3f} s)  "
                f"compile phase {row['compile_s']:6.2f} s  "
                f"pass {row['pass_s']:6.2f} s  recorded {row['recorded']}",
                flush=True,
            )
    if args.json:
        args.json.write_text(json.dumps({"rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
