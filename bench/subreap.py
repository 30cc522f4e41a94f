"""The CPU time of a command and of every process it starts, orphans included.

``pytest --test-costs`` and ``/usr/bin/time`` count the CPU of the processes that were
waited for: a process whose parent died or was killed first (an evaluation child killed
with its server's process group, a daemon that detached) is reparented to init and its
CPU is counted nowhere. Here the command runs under a child subreaper
(``PR_SET_CHILD_SUBREAPER``): such orphans are reparented to this process, which waits
for every one of them, so ``RUSAGE_CHILDREN`` at the end holds the whole tree's CPU.

    python bench/subreap.py [--json PATH] [--linger-s 60] -- COMMAND ARGS...

Prints one line (wall, user, sys, orphans reaped, exit status) and writes it as JSON with
``--json``. Waits up to ``--linger-s`` seconds after the command for its orphans to end
(then reports how many were still running, uncounted). Linux only; stdlib only.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import resource
import subprocess
import sys
import time

PR_SET_CHILD_SUBREAPER = 36


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", help="also write the figures here")
    parser.add_argument("--linger-s", type=float, default=60.0)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given")
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER) failed")
    started = time.perf_counter()
    process = subprocess.Popen(command)  # noqa: S603 - the user's own command line
    status = process.wait()
    orphans, still_running = 0, 0
    deadline = time.monotonic() + args.linger_s
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid:
            orphans += 1
            continue
        if time.monotonic() > deadline:
            still_running = len(_children(os.getpid()))
            break
        time.sleep(0.05)
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    figures = {
        "command": command,
        "exit_status": status,
        "wall_s": round(time.perf_counter() - started, 2),
        "user_s": round(usage.ru_utime, 2),
        "sys_s": round(usage.ru_stime, 2),
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 2),
        "orphans_reaped": orphans,
        "orphans_still_running": still_running,
        "load_average_at_end": os.getloadavg(),
    }
    print(
        f"subreap: {figures['wall_s']} s wall, {figures['cpu_s']} s CPU "
        f"({figures['user_s']} user + {figures['sys_s']} sys), {orphans} orphans reaped, "
        f"{still_running} still running, exit {status}",
        file=sys.stderr,
    )
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(figures, handle, indent=1)
    return status


def _children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as handle:
                    if int(handle.read().rsplit(")", 1)[1].split()[1]) == pid:
                        found.append(int(entry))
            except OSError:
                continue
    return found


if __name__ == "__main__":
    sys.exit(main())
