"""An agent campaign's evaluator server: ``python -m evaluator serve``, one round after another.

A campaign evaluates each kernel an agent writes on one operator's public shapes. Started
cold, every round pays the runner's start, the sandbox probe and a fresh child's harness
start-up (interpreter, torch, the device, the profiler: seconds on a GPU) again. This
process is started once per campaign (through ``evaluator.launch.EvaluatorServer``) with
the options every round shares (suite, hardware, device, shape set, visibility, sandbox,
time budget). It loads the suite and probes the sandbox once, then reads one request a
line on stdin::

    {"bundle": PATH, "operators": "rms_norm", "out": PATH, "progress": PATH, "log_dir": PATH}

runs it exactly as ``python -m evaluator run`` would (``evaluator.cli.command_run``: the
same runner, checks, fallback monitor, timing and results document, a fresh secret seed),
and answers one line on stdout, ``{"exit": CODE}`` (the exit code ``run`` would have had).

What stays warm is the harness's start-up, never a process that ran a candidate. Each
round runs in a fresh sandboxed child (``evaluator.child``) as today, which is killed with
everything it started when the round ends. The next round's child is started while a
round measures (``RoundStarter``: as the other sandbox user, as the runner's start-ahead
does) or else right after it; it warms up its harness only and gets its job, and so runs
candidate code, at its turn. The bundle goes into a folder of that child's own, created
empty when it was started (read-only to it, owned by this process), so no round's code can
reach the folder, the private temp folder or the memory of a later round's child, and no
round's code runs in this process or in a process that reports a later round's verdict.

The server never outlives its campaign: it exits when its stdin closes, it is killed
(``PR_SET_PDEATHSIG``) when the thread that started it ends, and every child it starts is
killed when it dies (``evaluator.sandbox``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import sys
import tempfile
from pathlib import Path
from typing import Any

from evaluator.errors import UserError
from evaluator.runner import ChildStarter, StartedChild, start_child
from evaluator.sandbox import Sandbox, SandboxError, SandboxPolicy

REQUEST_FIELDS = ("bundle", "operators", "out", "progress", "log_dir")
PR_SET_PDEATHSIG = 1


class RoundStarter(ChildStarter):
    """The children of a campaign's rounds: each in a folder of its own (``round-N``, its
    bundle in ``round-N/bundle``) made when it is started, so that the next round's child
    is warm before that round's source exists (see the module docstring). Implements
    ``evaluator.runner.RoundChildren``."""

    def __init__(
        self, *, sandbox: Sandbox, sandbox_report: dict[str, Any], device: str, root: Path
    ) -> None:
        super().__init__(
            sandbox=sandbox, device=device, bundle_dir=root, log_dir=root / "logs", ahead=True
        )
        self.sandbox_report = sandbox_report
        self.root = root
        self._count = 0
        self._folders: dict[int, Path] = {}  # a child's pid: its folder
        self._operator: str | None = None
        self._round: Path | None = None  # the folder of the round being run

    # -- runner.RoundChildren ---------------------------------------------------------

    def prepare(self, operators: list[str]) -> Path:
        """The bundle folder of the child that will run this round (started now unless
        one for the operator is already up)."""
        if len(operators) != 1:
            raise UserError(
                f"A campaign round evaluates one operator, not {len(operators)}: "
                "ask for one with --operators.",
                code="bundle:one-operator",
            )
        self._operator = operator = operators[0]
        ready = self._next
        if ready is not None and (ready.operator != operator or ready.process.poll() is not None):
            self._drop(ready)
            ready = self._next = None
        if ready is None:
            ready = self._next = self._start(operator)
        self._round = self._folders[ready.process.pid]
        return self._round / "bundle"

    def starter(self, log_dir: Path) -> ChildStarter:
        self.log_dir = log_dir
        return self

    def finish(self) -> None:
        """After the round (its child is gone): its log goes to the round's log folder,
        its folder is removed, and the next round's child is started if none is yet."""
        folder, self._round = self._round, None
        if self._next is not None and self._folders.get(self._next.process.pid) == folder:
            self._drop(self._next)  # never got its job (the bundle was refused): not reused
            self._next = None
        if folder is not None:
            with contextlib.suppress(OSError):
                self.log_dir.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(folder / "child.log", self.log_path(self._operator or "child"))
            shutil.rmtree(folder, ignore_errors=True)
        if self._next is None and self._operator is not None:
            with contextlib.suppress(SandboxError):
                self._next = self._start(self._operator)

    # -- ChildStarter -----------------------------------------------------------------

    def _start(self, operator: str, folder: Path | None = None) -> StartedChild:
        if folder is None:
            self._count += 1
            folder = self.root / f"round-{self._count}"
            (folder / "bundle").mkdir(parents=True)
            for path in (folder, folder / "bundle"):
                os.chmod(path, 0o755)
        if self.ahead:
            self._second = not self._second
        child = start_child(
            operator=operator,
            bundle_dir=folder / "bundle",
            device=self.device,
            log_path=folder / "child.log",
            sandbox=self.sandbox,
            second_user=self.ahead and self._second,
        )
        self._folders[child.process.pid] = folder
        return child

    def take(self, operator: str) -> StartedChild:
        """This round's child: the one prepared, or a fresh one in the same folder if it
        died meanwhile."""
        ready, self._next = self._next, None
        if (
            ready is not None
            and ready.operator == operator
            and ready.process.poll() is None
            and self._folders.get(ready.process.pid) == self._round
        ):
            return ready
        if ready is not None:
            self._drop(ready, keep_folder=self._folders.get(ready.process.pid) == self._round)
        assert self._round is not None, "prepare() comes first"
        return self._start(operator, self._round)

    def start_ahead(self, operator: str | None) -> None:
        """Start the next round's child (the same operator: a campaign's next round is
        most often the same operator's)."""
        super().start_ahead(operator or self._operator)

    def __exit__(self, *exc: object) -> None:
        """The round's end keeps the child started for the next one (``close`` stops it)."""

    def close(self) -> None:
        """Stop the child waiting for a round, if any."""
        if self._next is not None:
            self._drop(self._next)
            self._next = None

    def _drop(self, child: StartedChild, *, keep_folder: bool = False) -> None:
        child.stop()
        folder = self._folders.pop(child.process.pid, None)
        if folder is not None and not keep_folder:
            shutil.rmtree(folder, ignore_errors=True)


def die_with_parent(parent_pid: int | None) -> None:
    """Be killed when the thread that started this process ends (Linux), and exit now if
    that process is already gone."""
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if parent_pid is not None and os.getppid() != parent_pid:
        os._exit(1)


def command_serve(args: argparse.Namespace) -> int:
    """Serve rounds until stdin closes (see the module docstring); the exit code."""
    from evaluator.cli import EXIT_OK, EXIT_USER, command_run, suite_for

    die_with_parent(args.parent_pid)
    # Replies go on a private copy of stdout; anything else written to fd 1 goes to stderr.
    replies = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    prepared = suite_for(args)
    policy = SandboxPolicy.from_environment(mode=args.sandbox, hidden_paths=args.hide)
    device_kind = "cuda" if args.device.startswith("cuda") else "cpu"
    with tempfile.TemporaryDirectory(prefix="atrex-serve-") as scratch:
        sandbox = Sandbox(policy=policy, scratch=Path(scratch), device=device_kind)
        rounds = RoundStarter(
            sandbox=sandbox, sandbox_report=sandbox.probe(), device=args.device, root=Path(scratch)
        )
        try:
            for line in sys.stdin:
                if not line.strip():
                    continue
                try:
                    request = json.loads(line)
                    fields = {name: request.get(name) for name in REQUEST_FIELDS}
                    if not fields["bundle"] or not fields["out"]:
                        raise ValueError("a request needs 'bundle' and 'out'")
                except (ValueError, AttributeError) as exc:
                    print(f"error: a request that is not understood: {exc}", file=sys.stderr)
                    code = EXIT_USER
                else:
                    # A fresh secret seed each round, whatever the server was started with.
                    round_args = argparse.Namespace(**{**vars(args), **fields, "seed": None})
                    code = command_run(round_args, prepared=prepared, rounds=rounds)
                replies.write(json.dumps({"exit": code}) + "\n")
                replies.flush()
        finally:
            rounds.close()
    return EXIT_OK
