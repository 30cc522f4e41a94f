"""Operator children forked from a warm harness process instead of started from nothing.

A child started as ``python -P -m evaluator.child`` spends about 1.9 s of CPU (on the
2-core development machine) importing Python, torch, Triton and the harness before it
does anything else: most of what a child costs in the test suite, and seconds of every
evaluation's wall time. The fork server is a process of the harness's own that has done
those imports once (``warm_up``'s imports: no device, no allocator, no profiler, nothing
of a candidate's). For each child the runner asks it over a socket pair, with the child's
pipes and log as passed descriptors; it forks, and the forked process does what
``subprocess.Popen`` does for ``Sandbox.launch`` between fork and exec (standard streams
onto the log, the private temp folder as working directory, a session of its own, the
sandbox's ``ChildSandbox.preexec``, every other descriptor closed) and then, in place of
exec, sets the child's environment and runs ``evaluator.child.main``. The server answers
with the child's pid and, when it exits, its exit status (it is the child's parent).

Why this is as safe as exec:

* Each child is a fork of the server, and the server never runs anything of a
  candidate's, never initialises a device, never receives a job, a seed or a key (the
  runner writes those to the child's own job pipe afterwards). Nothing a child does can
  reach a later child: it runs as a sandbox user, in its own namespaces, and cannot
  write to or signal the server (which runs as the harness's user).
* The server's socket, and every descriptor but the child's own, are closed in the child
  before the sandbox is applied, as ``close_fds`` does before exec.
* What differs from an exec'd child is only what the interpreter holds in memory: the
  modules already imported (the same ones ``warm_up`` imports first thing) and the
  address-space layout, which is the same in every child of one server. Neither holds a
  secret.
* The sandbox's report of what it applied comes back on the same pipe as with exec, and
  a required protection that is missing fails the launch the same way.

The runner keeps one server per (interpreter, device, import-relevant environment) per
process, started on first use and killed with the process (``PR_SET_PDEATHSIG``, and at
exit). The sanitizer's children (``compute-sanitizer`` must start the program) and the
sandbox probe are still exec'd. ``ATREX_FORK_SERVER`` (``enabled``): on by default for
every device; ``0`` execs every child, ``cpu`` forks CPU children only.
"""

from __future__ import annotations

import atexit
import gc
import json
import os
import pickle  # nosec B403 - between the runner and its own server (socket pair), never from outside
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from typing import Any

from evaluator.scratch import claim_folder

PER_CHILD_ENVIRONMENT = (
    "HOME",
    "TMPDIR",
    "XDG_CACHE_HOME",
    "TRITON_CACHE_DIR",
    "TORCH_EXTENSIONS_DIR",
)
"""Variables that differ between children (their private folders); the rest of the
environment is the same for every child of one run, and the server is started with it."""
MAX_SERVERS = 4
PR_SET_PDEATHSIG = 1
MESSAGE_BYTES = 64 * 1024
MAX_FDS = 8
START_TIMEOUT_S = 120.0


def enabled(device: str, environ: Mapping[str, str] | None = None) -> bool:
    """Whether ``device``'s children are forked from a server: ``ATREX_FORK_SERVER`` is
    ``1`` (every device: the default), ``cpu`` (CPU children only) or ``0`` (none: every
    child exec'd).

    On by default (docs/evaluator-changelog.md): forked CUDA children
    ran on the H200 in sessions 12 and 13 with the same verdicts as exec'd ones (the first
    child's start 4.60 s against 7.35 s), and the one shape of an honest Triton kernel
    that failed the watched-against-timed check in a loaded CPU test run with forked
    children failed it on wall time, which the check no longer uses on the CPU (counted
    time, ``evaluator.counted_time``)."""
    value = (environ if environ is not None else os.environ).get("ATREX_FORK_SERVER", "")
    value = value.strip().lower() or "1"
    if value in ("0", "false", "no", "off"):
        return False
    if value == "cpu":
        return device.split(":")[0] == "cpu"
    return True


class ForkServerError(RuntimeError):
    """The server could not start a child (the caller falls back to exec)."""


# ------------------------------------------------------------------ the server process


def _server_imports() -> None:
    """What every child imports: the harness's modules (``evaluator.child.
    harness_imports``, the same list ``warm_up`` imports first), the sandbox's (its step
    runs in the forked process), and Triton with its interpreter, whose launch every CPU
    child binds before its candidate runs (``evaluator.fallback_cpu.bind_interpreter``),
    and its code generator, which the first launch of any Triton kernel imports (about
    50 modules, 0.16 s of CPU a child on the 2-core development machine), and for a
    device's children Triton's hash of its install (files only); not the device, allocator
    and profiler steps, which must happen in the child."""
    from evaluator import child, sandbox  # noqa: F401

    child.harness_imports()
    try:
        import triton  # noqa: F401
        import triton.compiler.code_generator  # noqa: F401
        import triton.language  # noqa: F401
        import triton.language.extra.libdevice  # noqa: F401
        import triton.runtime.interpreter  # noqa: F401
    except Exception:  # noqa: BLE001, S110 # nosec B110 - no Triton here: children import none
        return
    if os.environ.get("TRITON_INTERPRET") != "1":
        # A device's children (the CPU's interpret their kernels and compile nothing):
        # Triton's hash of its own install, which ``warm_up`` computes before each child's
        # job (0.34-0.45 s of a CUDA child's start-up on the H200's host, session 17), is
        # computed once here and every fork inherits it (Triton keeps it for the process).
        child.warm_triton_key()


def _in_child(request: dict[str, Any], fds: list[int], server: socket.socket) -> int:
    """The forked process: become the child ``Sandbox.launch`` would have started, then
    run it. Returns its exit code (never returns to the server's loop)."""
    log_fd, report_fd, *passed = fds
    plan = request["plan"]
    server.close()
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    os.chdir(plan.private_tmp)
    os.setsid()
    for number in (signal.SIGCHLD, signal.SIGTERM):
        signal.signal(number, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_SETMASK, [])
    plan.report_fd = report_fd
    try:
        plan.preexec()
    except BaseException:  # noqa: BLE001 - as a failed preexec_fn: the launch fails
        return 126
    keep = {0, 1, 2, *passed}
    for fd in _open_fds():
        if fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass
    os.environ.clear()
    os.environ.update(request["env"])
    from evaluator import child

    arguments = [part for option, fd in zip(request["options"], passed, strict=True)
                 for part in (option, str(fd))]  # fmt: skip
    arguments += ["--device", request["device"]]
    sys.argv = [child.__file__, *arguments]
    return child.main(arguments)


def _open_fds() -> list[int]:
    try:
        return [int(name) for name in os.listdir("/proc/self/fd")]
    except OSError:
        return []


def serve(sock: socket.socket) -> int:
    """The server's loop: fork a child per request, report its pid, then its exit."""
    selector = selectors.DefaultSelector()
    selector.register(sock, selectors.EVENT_READ, None)
    while True:
        for key, _ in selector.select():
            if key.data is None:
                try:
                    message, fds, _, _ = socket.recv_fds(sock, MESSAGE_BYTES, MAX_FDS)
                except OSError:
                    return 0
                if not message:
                    return 0  # the runner is gone
                request = pickle.loads(message)  # noqa: S301 # nosec B301 - the runner's own
                for stream in (sys.stdout, sys.stderr):
                    stream.flush()
                pid = os.fork()
                if pid == 0:
                    code = 1
                    try:
                        code = _in_child(request, fds, sock)
                    finally:
                        try:
                            sys.stdout.flush()
                            sys.stderr.flush()
                        finally:
                            os._exit(code)
                for fd in fds:
                    os.close(fd)
                pidfd = os.pidfd_open(pid)
                selector.register(pidfd, selectors.EVENT_READ, pid)
                sock.sendall(json.dumps({"id": request["id"], "pid": pid}).encode() + b"\n")
            else:
                pid = key.data
                selector.unregister(key.fileobj)
                os.close(key.fd)
                _, status = os.waitpid(pid, 0)
                code = os.waitstatus_to_exitcode(status)
                sock.sendall(json.dumps({"exit": pid, "code": code}).encode() + b"\n")


def main() -> int:
    """``python -P -m evaluator.forkserver FD``: serve on the inherited socket FD."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    sock = socket.socket(fileno=int(sys.argv[1]))
    _server_imports()
    # What the imports made is never collected: out of the collector's sight, a child's
    # collections do not write to (and so copy) every page the server's objects are on.
    gc.collect()
    gc.freeze()
    sock.sendall(b'{"ready": true}\n')
    return serve(sock)


# ------------------------------------------------------------------ the runner's side


class ForkedChild:
    """A child forked by a server, with the part of ``subprocess.Popen``'s interface the
    runner uses (``pid``, ``returncode``, ``poll``, ``wait``, ``kill``)."""

    def __init__(self, server: ForkServer, pid: int) -> None:
        self.server = server
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self.server.exit_code(self.pid, block=False)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            deadline = None if timeout is None else time.monotonic() + timeout
            code = self.server.exit_code(self.pid, block=True, deadline=deadline)
            if code is None:
                raise subprocess.TimeoutExpired(f"forked child {self.pid}", timeout or 0)
            self.returncode = code
        return self.returncode

    def kill(self) -> None:
        if self.returncode is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def send_signal(self, number: int) -> None:
        if self.returncode is None:
            try:
                os.kill(self.pid, number)
            except ProcessLookupError:
                pass


class ForkServer:
    """One server process and the runner's end of its socket."""

    def __init__(self, environment: Mapping[str, str]) -> None:
        # The server's own folder stands in for a child's private one in its environment.
        self.folder = tempfile.mkdtemp(prefix="atrex-forkserver-")
        claim_folder(self.folder)  # swept by a later run if this process is killed
        environment = {
            **environment,
            **{name: self.folder for name in PER_CHILD_ENVIRONMENT if name in environment},
            "PYTHONUNBUFFERED": "1",
        }
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock = ours
        self.lock = threading.Lock()
        self.buffer = b""
        self.exits: dict[int, int] = {}
        self.pids: dict[int, int] = {}
        self.next_id = 0
        self.dead = False
        theirs.set_inheritable(True)
        self.process = subprocess.Popen(  # noqa: S603 - this interpreter, fixed arguments
            [sys.executable, "-P", "-m", "evaluator.forkserver", str(theirs.fileno())],
            env=environment,
            cwd=self.folder,
            pass_fds=(theirs.fileno(),),
            stdin=subprocess.DEVNULL,
        )
        theirs.close()
        ready = self._message(deadline=time.monotonic() + START_TIMEOUT_S)
        if not ready or not ready.get("ready"):
            self.close()
            raise ForkServerError("the fork server did not start")

    def _message(self, deadline: float | None) -> dict[str, Any] | None:
        """The next message from the server (None at the deadline, or when it is gone)."""
        while b"\n" not in self.buffer:
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            self.sock.settimeout(wait)
            try:
                chunk = self.sock.recv(MESSAGE_BYTES)
            except (TimeoutError, BlockingIOError):
                return None
            except OSError:
                chunk = b""
            if not chunk:
                self.dead = True
                return None
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return json.loads(line)

    def _absorb(self, message: dict[str, Any]) -> None:
        if "exit" in message:
            self.exits[int(message["exit"])] = int(message["code"])
        elif "pid" in message:
            self.pids[int(message["id"])] = int(message["pid"])

    def fork(
        self,
        *,
        plan: Any,
        env: Mapping[str, str],
        device: str,
        log_fd: int,
        report_fd: int,
        passed: Mapping[str, int],
    ) -> ForkedChild:
        """A child for ``plan``: ``log_fd`` its stdout and stderr, ``report_fd`` the sandbox's
        report pipe, ``passed`` the child's options and the descriptors they name."""
        with self.lock:
            if self.dead:
                raise ForkServerError("the fork server is gone")
            self.next_id += 1
            request_id = self.next_id
            payload = pickle.dumps(
                {"id": request_id, "plan": plan, "env": dict(env), "device": device,
                 "options": list(passed)}
            )  # fmt: skip
            try:
                socket.send_fds(self.sock, [payload], [log_fd, report_fd, *passed.values()])
            except OSError as exc:
                self.dead = True
                raise ForkServerError(f"the fork server is gone ({exc})") from None
            deadline = time.monotonic() + START_TIMEOUT_S
            while request_id not in self.pids:
                message = self._message(deadline)
                if message is None:
                    raise ForkServerError("the fork server did not answer")
                self._absorb(message)
            return ForkedChild(self, self.pids.pop(request_id))

    def exit_code(self, pid: int, *, block: bool, deadline: float | None = None) -> int | None:
        """``pid``'s exit code once the server reports it (None: not yet). Should the
        server be gone, its children are this process's (it is their subreaper)."""
        with self.lock:
            while pid not in self.exits:
                if self.dead:
                    return self._reap_orphan(pid, block=block, deadline=deadline)
                message = self._message(deadline if block else time.monotonic())
                if message is None:
                    if self.dead:
                        continue
                    return None
                self._absorb(message)
            return self.exits.pop(pid)

    @staticmethod
    def _reap_orphan(pid: int, *, block: bool, deadline: float | None) -> int | None:
        while True:
            try:
                done, status = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                return -signal.SIGKILL  # gone, and its status went with the server
            if done:
                return os.waitstatus_to_exitcode(status)
            if not block or (deadline is not None and time.monotonic() >= deadline):
                return None
            time.sleep(0.02)

    def alive(self) -> bool:
        return not self.dead and self.process.poll() is None

    def close(self) -> None:
        self.dead = True
        try:
            self.sock.close()
        finally:
            if self.process.poll() is None:
                self.process.kill()
            self.process.wait()
            shutil.rmtree(self.folder, ignore_errors=True)


_servers: dict[tuple, ForkServer] = {}
_servers_lock = threading.Lock()


def server_for(environment: Mapping[str, str], device: str) -> ForkServer:
    """This process's server for children with ``environment`` (started on first use)."""
    shared = {k: v for k, v in environment.items() if k not in PER_CHILD_ENVIRONMENT}
    key = (sys.executable, device, tuple(sorted(shared.items())))
    with _servers_lock:
        server = _servers.get(key)
        if server is not None and not server.alive():
            server.close()
            server = None
        if server is None:
            while len(_servers) >= MAX_SERVERS:
                _servers.pop(next(iter(_servers))).close()
            server = ForkServer(environment)
            _servers[key] = server
        return server


@atexit.register
def close_all() -> None:
    """Stop every server of this process."""
    with _servers_lock:
        while _servers:
            _servers.popitem()[1].close()


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    os._exit(code)
