"""Where an operator child's harness start-up goes (the ``harness`` phase of results.json).

Runs the steps ``evaluator.child`` takes before it imports the candidate, each timed in a
fresh interpreter (three times, the same order), and prints one row per step, for each way
of starting it (``--modes``): ``plain`` (a bare subprocess), ``env`` (the sandbox's
environment only: its HOME, TMPDIR and caches, nothing applied), ``sandbox`` (the real
sandbox of ``evaluator.sandbox``, every protection this machine allows):

    python3 bench/child_startup.py [--device cuda] [--modes plain,env,sandbox] [--json out.json]

On CPU the CUDA steps are skipped. The figures are the host's wall clock; nothing is
measured on the GPU itself.
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

ROOT = str(Path(__file__).resolve().parent.parent)
sys.path.insert(0, ROOT)

from evaluator.sandbox import Sandbox, SandboxPolicy  # noqa: E402

# Runs in the fresh interpreter: each step's wall time, in order, as one JSON line.
STEPS = r"""
import json, os, sys, time
marks = [("start", time.perf_counter())]
def mark(name):
    marks.append((name, time.perf_counter()))
import torch
mark("import torch")
import evaluator.correctness, evaluator.fallback, evaluator.timing, evaluator.variants
import evaluator.operators._variants
mark("import harness")
from evaluator.operators import get_operator
spec = get_operator(sys.argv[2])
mark("operator spec")
device = torch.device(sys.argv[1])
torch.empty(1)
if device.type == "cuda":
    torch.cuda.device_count()
    torch.cuda.init()
    mark("cuda init")
    torch.empty(1, device=device)
    torch.cuda.synchronize(device)
    mark("first allocation")
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]):
        torch.cuda.synchronize(device)
    mark("first profiler session")
    evaluator.fallback.prepare_monitoring(device)
    mark("prepare_monitoring (again)")
import triton
mark("import triton")
print(json.dumps([[b[0], b[1] - a[1]] for a, b in zip(marks, marks[1:])]))
"""


def one_run(mode: str, device: str, operator: str) -> list[tuple[str, float]]:
    command = [sys.executable, "-P", "-c", STEPS, device, operator]
    with tempfile.TemporaryDirectory(prefix="atrex-startup-") as tmp:
        sandbox = Sandbox(policy=SandboxPolicy(), scratch=Path(tmp), device=device)
        plan = sandbox.child("startup", None)
        started = time.perf_counter()
        if mode == "sandbox":
            process, _ = sandbox.launch(
                command, plan, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )  # fmt: skip
            out, err = process.communicate(timeout=300)
        else:
            env = sandbox.environment(plan, device) if mode == "env" else dict(os.environ)
            inherited = env.get("PYTHONPATH", "").split(os.pathsep)
            env["PYTHONPATH"] = os.pathsep.join([ROOT, *inherited])
            done = subprocess.run(  # noqa: S603 - fixed argv
                command, env=env, cwd=plan.private_tmp, capture_output=True, timeout=300,
                check=False,
            )  # fmt: skip
            out, err = done.stdout, done.stderr
        total = time.perf_counter() - started
    lines = out.decode().strip().splitlines()
    if not lines:
        raise SystemExit(f"{mode}: the interpreter printed nothing: {err.decode()[-2000:]}")
    steps = [(name, float(s)) for name, s in json.loads(lines[-1])]
    return [*steps, ("interpreter total", total)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--operator", default="rms_norm")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--modes", default="plain,env,sandbox")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    tables = {}
    for mode in args.modes.split(","):
        runs = [one_run(mode, args.device, args.operator) for _ in range(args.runs)]
        table = {name: [dict(run)[name] for run in runs] for name, _ in runs[0]}
        tables[mode] = table
        runs_header = " ".join(f"run{i + 1:>2} s" for i in range(args.runs))
        print(f"\n{mode}\n{'step':28s} {runs_header}  median s")
        for name, values in table.items():
            cells = " ".join(f"{v:7.3f}" for v in values)
            print(f"{name:28s} {cells}  {statistics.median(values):8.3f}")
    if args.json:
        args.json.write_text(json.dumps({"device": args.device, "modes": tables}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
