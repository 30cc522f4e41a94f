#!/usr/bin/env python3
"""A stand-in for NVIDIA's ``compute-sanitizer`` in CPU tests (test_sanitizer_runs.py).

Takes the real tool's command line (``--tool``, ``--log-file``, the options
``evaluator.sanitizer.command`` adds, then the program), writes its banner, reports and
summary to the log file in the real tool's documented format, and runs the program. It
cannot see memory accesses: a test bundle tells it of one by writing ``oob <kernel>`` to
the descriptor in ``FAKE_SANITIZER_FD`` (``race <kernel>``: a shared-memory race inside that
kernel, reported under ``--tool racecheck`` only), a channel only the fake reads, as only the real
tool sees a kernel's accesses. The report is written by the fake, a little later (as the
real tool's reports come from another process), never by the program. Run as
``fake_compute_sanitizer_refusing_fd_paths.py`` (a link to this file) it refuses a
``/proc/...`` log file and exits, as a tool that cannot take the runner's pipe by path
would (the sandbox passes the child no variables of the test's).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

VALUED = {"--tool", "--log-file", "--print-limit", "--target-processes", "--leak-check",
          "--padding", "--racecheck-report"}  # fmt: skip
REPORT = """\
========= Invalid __global__ read of size 4 bytes
=========     at {kernel}+0x1d0 in {kernel}.py:14
=========     by thread (0,0,0) in block (0,0,0)
=========     Address 0x7f3e5a000400 is out of bounds
=========
"""
RACE = """\
========= Error: Race reported between Read access at {kernel}+0xb00
=========     and Write access at {kernel}+0x2aa0 [256 hazards]
=========
"""


def main(argv: list[str]) -> int:
    options: dict[str, str] = {}
    while argv and argv[0] in VALUED:
        options[argv[0]] = argv[1]
        argv = argv[2:]
    path = options.get("--log-file")
    refuses = "refusing" in os.path.basename(sys.argv[0])
    if path and refuses and path.startswith("/proc/"):
        print(f"========= Error: cannot open log file {path}", file=sys.stderr)
        return 1
    log = open(path, "w", buffering=1) if path else sys.stdout  # noqa: SIM115
    log.write("========= COMPUTE-SANITIZER\n")
    read_end, write_end = os.pipe()
    os.set_inheritable(write_end, True)
    errors = [0]

    def report() -> None:
        with os.fdopen(read_end, "r") as events:
            for line in events:
                kind, _, kernel = line.strip().partition(" ")
                if kind == "oob":
                    time.sleep(0.01)  # the real tool's reports come from another process
                    errors[0] += 1
                    log.write(REPORT.format(kernel=kernel or "kernel"))
                elif kind == "race" and options.get("--tool") == "racecheck":
                    time.sleep(0.01)
                    errors[0] += 1
                    log.write(RACE.format(kernel=kernel or "kernel"))

    reader = threading.Thread(target=report)
    reader.start()
    env = {**os.environ, "FAKE_SANITIZER_FD": str(write_end)}
    process = subprocess.Popen(argv, close_fds=False, env=env)  # noqa: S603
    os.close(write_end)
    code = process.wait()
    reader.join(timeout=5)
    log.write(f"========= ERROR SUMMARY: {errors[0]} error{'s' if errors[0] != 1 else ''}\n")
    log.flush()
    return 1 if code else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
