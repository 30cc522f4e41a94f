"""What one full integrity check costs, with and without the evaluation child's audit hooks.

The child checks its integrity guard three times a shape (after each correctness call and
after the shape). With the child's audit hooks installed, every read of a function's
``__code__``, ``__defaults__`` or ``__kwdefaults__`` is an audit event that each hook is
called for; since harness 0.3.8 the confining hook records assignments to the watched
functions' code instead, and the check reads that record::

    python3 bench/integrity_check.py [--checks 50]

Prints one line per mode, each measured in a fresh process (an audit hook cannot be
removed): ``plain`` (no hooks: the guard compares every function's code), ``hooks, code
read`` (the child's two hooks, the guard not handed to the confining one: every check reads
the code, as before 0.3.8), ``hooks, swaps recorded`` (the child as it is).
"""

from __future__ import annotations

import argparse
import gc
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODES = ("plain", "hooks, code read", "hooks, swaps recorded")


def measure(mode: str, checks: int) -> dict[str, float]:
    """In this process: the guard snapshot of a warmed-up child, then ``checks`` checks."""
    sys.path.insert(0, str(ROOT))
    import tempfile

    from evaluator import child
    from evaluator.integrity import IntegrityGuard, deny_object_enumeration

    child.harness_imports()
    guard = IntegrityGuard()
    if mode != "plain":
        deny_object_enumeration()
        recorded = guard if mode == "hooks, swaps recorded" else None
        child.confine_candidate(Path(tempfile.mkdtemp()), recorded)
    for _ in range(3):
        guard.check("warm-up")
    # A collection the imports left due would land in the first checks (tens of ms with
    # torch loaded) and make the figure depend on where it falls.
    gc.collect()
    started = time.perf_counter()
    for _ in range(checks):
        guard.check("now")
    per_check = (time.perf_counter() - started) / checks
    functions = sum(len(namespace.codes) for namespace in guard._namespaces)
    return {"ms_per_check": per_check * 1e3, "functions": functions}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checks", type=int, default=50)
    parser.add_argument("--mode", choices=MODES, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.mode is not None:  # one mode, in this (fresh) process
        print(json.dumps(measure(args.mode, args.checks)))
        return 0
    for mode in MODES:
        done = subprocess.run(
            [sys.executable, __file__, "--mode", mode, "--checks", str(args.checks)],
            capture_output=True,
            text=True,
            check=True,
        )
        figures = json.loads(done.stdout.strip().splitlines()[-1])
        print(
            f"{mode:24s} {figures['ms_per_check']:7.2f} ms a check "
            f"({figures['functions']} functions watched)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
