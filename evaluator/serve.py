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

What stays warm is the harness's start-up, never a process that ran a candidate. Each round
runs in a fresh sandboxed child (``evaluator.child``) as today, which is killed with
everything it started when the round ends. The next round's child is started while a round
measures on CUDA or with ``--start-ahead`` (``RoundStarter``: as the other sandbox user, as
the runner's start-ahead does), else as soon as the round's child is gone; it warms up its
harness only (torch, the CUDA context, the profiler) and gets its job, and so runs
candidate code, at its turn. The bundle goes into a folder of that child's own, created
empty when it was started (read-only to it, owned by this process), so no round's code can
reach the folder, the private temp folder or the memory of a later round's child, and no
round's code runs in this process or in a process that reports a later round's verdict.

An agent's revised kernel is a bundle the campaign's Triton cache has not seen (it is kept
by the bundle's digest), so its round would compile every specialisation at its shapes'
first calls. Each round's child records what it compiled, and the server hands that list
(``job_extras``) to the operator's next round, whose child compiles the specialisations of
its revised kernel that still fit, several at once, before its first shape
(``evaluator.compile_ahead``; ``ATREX_COMPILE_AHEAD=0`` turns it off).

The server never outlives its campaign: it exits when its stdin closes, it is killed
(``PR_SET_PDEATHSIG``) when the thread that started it ends, and every child it starts is
killed when it dies (``evaluator.sandbox``).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import shutil
import signal
import stat
import sys
import tempfile
from pathlib import Path
from typing import Any

from evaluator.compile_ahead import valid_specs
from evaluator.errors import UserError
from evaluator.runner import ChildStarter, StartedChild, start_child
from evaluator.sandbox import (
    Sandbox,
    SandboxError,
    SandboxPolicy,
    chown_tree,
    mount_tmpfs,
    private_mounts,
    rehome_cache_groups,
    unmount,
    with_hidden,
)

REQUEST_FIELDS = ("bundle", "operators", "out", "progress", "log_dir")
PR_SET_PDEATHSIG = 1
MiB = 1024 * 1024
ROUND_CACHE_BYTES = 256 * MiB
"""The size of a round's Triton cache folder (a tmpfs where the server may mount one)."""
CAMPAIGN_CACHE_BYTES = 2048 * MiB
"""What the campaign's Triton cache keeps at most; a round that would pass it is not kept."""


def bundle_digest(folder: Path) -> str:
    """SHA-256 over the names and bytes of every file of a bundle folder."""
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and not p.is_symlink()):
        digest.update(str(path.relative_to(folder)).encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def copy_files(source: Path, target: Path, *, limit: int) -> int | None:
    """Copy the folders and regular files under ``source`` into ``target`` (links and
    anything else skipped, never followed); the bytes copied, or None past ``limit`` bytes
    (the files copied so far stay)."""
    copied = 0
    for folder, dirnames, filenames in os.walk(source, followlinks=False):
        here = target / Path(folder).relative_to(source)
        here.mkdir(parents=True, exist_ok=True)
        for name in filenames:
            path = Path(folder) / name
            info = os.lstat(path)
            if not stat.S_ISREG(info.st_mode):
                continue
            copied += info.st_size
            if copied > limit:
                return None
            shutil.copyfile(path, here / name, follow_symlinks=False)
        dirnames[:] = [d for d in dirnames if not os.path.islink(os.path.join(folder, d))]
    return copied


def seed_cache(
    kept: Path, cache: Path, *, owner: tuple[int, int] | None = None
) -> tuple[int | None, int]:
    """Copy a kept Triton cache into a round's ``cache`` folder, owned by ``owner``; (bytes
    copied or None past ``ROUND_CACHE_BYTES``, kernels whose group file was rewritten).

    Triton finds a compiled kernel through a group file that names its files by absolute
    path (``evaluator.sandbox.rehome_cache_groups``); a copy whose group files still name
    the kept folder's files is a cache miss where that folder cannot be read, and every
    round compiled its kernels again (harness 0.3.8; 0.1-0.2 s a specialisation on the
    H200), so they are rewritten to name the copies."""
    copied = copy_files(kept, cache, limit=ROUND_CACHE_BYTES)
    rehomed = rehome_cache_groups(cache, kept) if copied is not None else 0
    if owner is not None:
        chown_tree(cache, *owner)
    return copied, rehomed


class RoundStarter(ChildStarter):
    """The children of a campaign's rounds: each in a folder of its own (``round-N``, its
    bundle in ``round-N/bundle``) made when it is started, so that the next round's child
    is warm before that round's source exists (see the module docstring). Implements
    ``evaluator.runner.RoundChildren``."""

    def __init__(
        self,
        *,
        sandbox: Sandbox,
        sandbox_report: dict[str, Any],
        device: str,
        root: Path,
        triton_cache: bool = True,
        tmpfs: bool = False,
        ahead: bool | None = None,
        compile_ahead: bool = True,
    ) -> None:
        # During a round by default only on CUDA, as the runner's start-ahead: on the CPU
        # the next child's start-up would take the cores the round measures on; it starts
        # when the round's child is gone instead, while the agent writes the next kernel.
        super().__init__(
            sandbox=sandbox,
            device=device,
            bundle_dir=root,
            log_dir=root / "logs",
            ahead=device.startswith("cuda") if ahead is None else ahead,
        )
        self.sandbox_report = sandbox_report
        self.root = root
        # The campaign's Triton cache: one folder per bundle digest (see ``take``).
        self.cache_root = root / "triton-cache" if triton_cache else None
        self.cache_bytes = 0
        self.tmpfs = tmpfs
        self._digest: str | None = None
        self._taken: StartedChild | None = None
        self._count = 0
        self._folders: dict[int, Path] = {}  # a child's pid: its folder
        self._operator: str | None = None
        self._round: Path | None = None  # the folder of the round being run
        # Per operator, the Triton specialisations its last round compiled: the next
        # round's child compiles them ahead, several at once (evaluator.compile_ahead).
        self._compiles: dict[str, list[dict[str, str]]] = {}
        self.compile_ahead = compile_ahead

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
        """Itself, its children's logs going to ``log_dir`` (the round's)."""
        self.log_dir = log_dir
        return self

    def finish(self) -> None:
        """After the round (its child is gone): its log goes to the round's log folder,
        its folder is removed, and the next round's child is started if none is yet."""
        folder, self._round = self._round, None
        digest, self._digest = self._digest, None
        taken, self._taken = self._taken, None
        if taken is not None:  # gone: what it left in its private temp folder goes too
            shutil.rmtree(taken.plan.private_tmp, ignore_errors=True)
        if self._next is not None and self._folders.get(self._next.process.pid) == folder:
            self._drop(self._next)  # never got its job (the bundle was refused): not reused
            self._next = None
        if folder is not None:
            with contextlib.suppress(OSError):
                self.log_dir.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(folder / "child.log", self.log_path(self._operator or "child"))
            if digest is not None:
                self._keep_cache(folder / "triton-cache", digest)
            self._remove(folder)
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
            if self.cache_root is not None:
                (folder / "triton-cache").mkdir()
                if self.tmpfs:
                    try:
                        mount_tmpfs(folder / "triton-cache", ROUND_CACHE_BYTES)
                    except OSError as exc:  # no bounded folder: no campaign cache
                        _log(f"no Triton cache: {exc}")
                        self.cache_root = None
        # Resolved: the group files name what Triton was told, and are rehomed by real path.
        cache = Path(os.path.realpath(folder / "triton-cache"))
        child = self.launch(
            lambda user: start_child(
                operator=operator,
                bundle_dir=folder / "bundle",
                device=self.device,
                log_path=folder / "child.log",
                sandbox=self.sandbox,
                user=user,
                extra_env={"TRITON_CACHE_DIR": str(cache)} if self.cache_root else None,
                writable=(cache,) if self.cache_root else (),
            )
        )
        self._folders[child.process.pid] = folder
        return child

    def job_extras(self, operator: str) -> dict[str, Any]:
        """A round's child records what it compiles, and compiles ahead what the
        operator's previous round did (when it compiled anything)."""
        specs = self._compiles.get(operator) if self.compile_ahead else None
        return {"record_compiles": True, **({"compile_ahead": specs} if specs else {})}

    def compiled(self, operator: str, specs: list[dict[str, str]]) -> None:
        """Keep what the round's child compiled for the operator's next round (a round
        that compiled nothing, one that stopped early say, leaves the last list)."""
        kept = valid_specs(specs)
        if kept:
            self._compiles[operator] = kept

    def take(self, operator: str) -> StartedChild:
        """This round's child: the one prepared, or a fresh one in the same folder if it
        died meanwhile."""
        ready, self._next = self._next, None
        if self._round is None:
            raise RuntimeError("RoundStarter.take() before prepare()")
        if not (
            ready is not None
            and ready.operator == operator
            and ready.process.poll() is None
            and self._folders.get(ready.process.pid) == self._round
        ):
            if ready is not None:
                self._drop(ready, keep_folder=self._folders.get(ready.process.pid) == self._round)
            ready = self._start(operator, self._round)
        self._seed_cache(ready)
        self._taken = ready
        return ready

    def _seed_cache(self, child: StartedChild) -> None:
        """Give the round's child what an earlier round of the very same bundle compiled.
        Only byte-identical code ever reads what a round's child left (keyed by the
        bundle's digest): no round's code can reach a different kernel's round."""
        if self.cache_root is None or self._round is None:
            return
        self._digest = bundle_digest(self._round / "bundle")
        kept = self.cache_root / self._digest
        if kept.is_dir():
            uid, gid = child.plan.uid, child.plan.gid
            owner = (uid, gid) if uid is not None and gid is not None else None
            copied, rehomed = seed_cache(kept, self._round / "triton-cache", owner=owner)
            _log(
                f"{self._round.name}: Triton cache seeded ({copied} bytes, {rehomed} kernels) "
                f"for {self._digest[:12]}"
            )
        else:
            _log(f"{self._round.name}: no Triton cache kept for {self._digest[:12]}")

    def _keep_cache(self, cache: Path, digest: str) -> None:
        """Keep what the round compiled, for a later round of the same bundle (the first
        copy of a digest is kept; the campaign's cache stops growing at its limit)."""
        if self.cache_root is None or (self.cache_root / digest).exists() or not cache.is_dir():
            return
        staging = self.cache_root / f".{digest}.partial"
        shutil.rmtree(staging, ignore_errors=True)
        left = CAMPAIGN_CACHE_BYTES - self.cache_bytes
        copied = copy_files(cache, staging, limit=left) if left > 0 else None
        if copied is None:
            shutil.rmtree(staging, ignore_errors=True)
            return
        staging.rename(self.cache_root / digest)
        rehome_cache_groups(self.cache_root / digest, cache)  # the kept copy names its own
        self.cache_bytes += copied
        _log(f"Triton cache kept ({copied} bytes) for {digest[:12]}")

    def _remove(self, folder: Path) -> None:
        if self.tmpfs:
            with contextlib.suppress(OSError, AttributeError):
                unmount(folder / "triton-cache")
        shutil.rmtree(folder, ignore_errors=True)

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
        shutil.rmtree(child.plan.private_tmp, ignore_errors=True)
        folder = self._folders.pop(child.process.pid, None)
        if folder is not None and not keep_folder:
            self._remove(folder)


def _log(line: str) -> None:
    """One line of the server's log (its stderr: the campaign's server.log)."""
    print(f"[serve] {line}", file=sys.stderr, flush=True)


def die_with_parent(parent_pid: int | None) -> None:
    """Be killed when the thread that started this process ends (Linux), and exit now if
    that process is already gone."""
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if parent_pid is not None and os.getppid() != parent_pid:
        os._exit(1)


def compile_ahead_enabled() -> bool:
    """Whether a round compiles ahead what its operator's previous round compiled (on
    unless ``ATREX_COMPILE_AHEAD`` is ``0``: the before of a before-and-after)."""
    return os.environ.get("ATREX_COMPILE_AHEAD", "1").strip() != "0"


def serve_policy(args: argparse.Namespace) -> SandboxPolicy:
    """The sandbox policy of every round's child: as ``run``'s, with the worker's private
    folders (the reference pool's and the reference timings', which ``run_bundle`` hides
    from the children it starts itself) hidden too."""
    policy = SandboxPolicy.from_environment(mode=args.sandbox, hidden_paths=args.hide)
    private = [getattr(args, "reference_pool", None), getattr(args, "reference_timings", None)]
    return with_hidden(policy, [os.path.realpath(folder) for folder in private if folder])


def command_serve(args: argparse.Namespace) -> int:
    """Serve rounds until stdin closes (see the module docstring); the exit code."""
    from evaluator.cli import EXIT_OK, EXIT_USER, command_run, suite_for

    die_with_parent(args.parent_pid)
    # Replies go on a private copy of stdout; anything else written to fd 1 goes to stderr.
    replies = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    # Mounts of its own (the rounds' Triton cache folders) go with it; one thread so far.
    # As root the children's only writable places are size-limited tmpfs: no campaign
    # cache where its folders cannot be one (without root, best-effort, a plain folder).
    tmpfs = os.geteuid() == 0 and args.triton_cache and private_mounts()
    triton_cache = args.triton_cache and (tmpfs or os.geteuid() != 0)
    _log(
        "rounds' Triton cache: "
        + ("on, in tmpfs folders" if tmpfs else "on" if triton_cache else "off")
        + ("" if triton_cache or not args.triton_cache else " (no private mounts as root)")
    )
    compile_ahead = compile_ahead_enabled()
    _log(
        "compiling ahead a round's previous specialisations: " + ("on" if compile_ahead else "off")
    )
    prepared = suite_for(args)
    policy = serve_policy(args)
    device_kind = "cuda" if args.device.startswith("cuda") else "cpu"
    # Under its working folder (the campaign's, see EvaluatorServer): what a killed server
    # could not remove stays with the campaign's files, not in /tmp.
    with tempfile.TemporaryDirectory(prefix="atrex-serve-", dir=os.getcwd()) as scratch:
        sandbox = Sandbox(policy=policy, scratch=Path(scratch), device=device_kind)
        rounds = RoundStarter(
            sandbox=sandbox,
            sandbox_report=sandbox.probe(),
            device=args.device,
            root=Path(scratch),
            triton_cache=triton_cache,
            tmpfs=tmpfs,
            ahead=args.start_ahead,
            compile_ahead=compile_ahead,
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
