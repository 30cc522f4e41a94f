"""The operating-system sandbox around each operator's child process (stdlib only).

The child runs code that strangers uploaded. Before ``python -m evaluator.child`` is
executed, :meth:`ChildSandbox.preexec` (run by ``subprocess.Popen`` in the forked
process) applies, in this order:

* resource limits: CPU time (``RLIMIT_CPU``), file size (``RLIMIT_FSIZE``), open files,
  processes (``RLIMIT_NPROC``, counted for the sandbox user), no core dumps. Memory is
  watched from outside (:func:`tree_rss_bytes`; ``RLIMIT_AS`` would break CUDA);
* a network namespace of its own (no usable interface: even loopback is down) and a
  private mount namespace;
* in that mount namespace an empty read-only tmpfs over every hidden path (the site's
  media, runs and var folders, settings, ``/tmp``, ``/var/tmp``, ``/dev/shm``, and any
  folder the sandbox user could not traverse), with the paths the child needs (Python,
  its packages, the evaluator, the extracted bundle, read-only) bound back in at the
  same place, and a size-limited private tmpfs as its only writable folder;
* an unprivileged user (``nobody`` unless configured), with no supplementary groups and
  ``no_new_privs``, when the parent runs as root.

What was applied is reported back on a pipe (JSON), and :meth:`Sandbox.probe` runs a
tiny sandboxed Python first that checks it from inside (uid, interfaces, a loopback
connection, the hidden paths). In ``required`` mode a protection that cannot be applied
is a platform error; in ``best-effort`` mode (the default off production) it is listed
under ``missing`` in the results' environment digest.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import json
import os
import pwd
import re
import shutil
import signal
import site
import stat
import subprocess
import sys
import sysconfig
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from evaluator.errors import PlatformError

MODES = ("required", "best-effort")
PROTECTIONS = (
    "clean_environment",
    "rlimits",
    "network",
    "mounts",
    "private_tmp",
    "user",
    "no_new_privs",
    "memory_watchdog",
    "gpu_isolation",
)
"""Every protection the sandbox reports on, active or missing."""

DEFAULT_HIDDEN = ("/tmp", "/var/tmp", "/dev/shm")
"""Hidden in every child: other runs' scratch space and whatever else sits in temp."""
SHARED_SCRATCH = ("/tmp", "/dev/shm")
"""Hidden, but left writable (an empty tmpfs of SHARED_SCRATCH_BYTES): libraries that
ignore TMPDIR, or want POSIX shared memory, still work."""
SHARED_SCRATCH_BYTES = 64 * 1024 * 1024

ENV_ALLOWED = (
    "PATH",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TZ",
    "CUDA_VISIBLE_DEVICES",
    "CUDA_HOME",
    "CUDA_PATH",
    "LD_LIBRARY_PATH",
    "OMP_NUM_THREADS",
    "OMP_WAIT_POLICY",
    "MKL_NUM_THREADS",
    "TORCH_CUDA_ARCH_LIST",
    "TRITON_PTXAS_PATH",
    "TRITON_LIBCUDA_PATH",
    "TRITON_CUDACRT_PATH",
    "TRITON_CUDART_PATH",
    "CC",
    "CXX",
)
"""The only variables a child inherits; everything else (database and broker URLs, secret
keys, tokens, cloud credentials) stays out."""

MiB = 1024 * 1024

# Linux constants (not all exposed by the os module of Python 3.11).
CLONE_NEWNS = 0x00020000
CLONE_NEWNET = 0x40000000
MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
PR_SET_NO_NEW_PRIVS = 38
PR_SET_CHILD_SUBREAPER = 36
PR_SET_PDEATHSIG = 1
_STATVFS_TO_MS = ((2, MS_NOSUID), (4, MS_NODEV), (8, MS_NOEXEC), (1024, 1024), (2048, 2048))


class SandboxError(PlatformError):
    """The sandbox could not be set up as required (configuration or host problem)."""

    code = "platform:sandbox"


# --------------------------------------------------------------------------- the policy


@dataclass(frozen=True)
class SandboxPolicy:
    """What the sandbox must do; read from the environment by :meth:`from_environment`."""

    mode: str = "best-effort"
    user: str = "nobody"
    """The unprivileged user (name or number) the child runs as when the parent is root."""
    gid: int | None = None
    """Its group; default: the user's primary group."""
    second_user: str = ""
    """A second unprivileged user (name or number) for the child started ahead of its turn
    while another child runs, so that the two cannot signal, trace or kill each other;
    default: uid 65533, if no account of this machine has it (see ``resolve_second_user``)."""
    third_user: str = ""
    """A third one, for the sanitizer pass's children started while the last operator's
    child runs (``evaluator.runner.SanitizerPass``): default uid 65532, if no account of
    this machine has it; without one, that pass starts fewer children ahead."""
    more_users: tuple[str, ...] = ()
    """More unprivileged users (names or numbers), for the children of a concurrent run
    (``evaluator.concurrency``): each child alive at once runs as a user of its own."""
    hidden_paths: tuple[str, ...] = ()
    cpu_time_s: int = 3600
    memory_bytes: int = 32 * 1024 * MiB
    max_processes: int = 512
    """Processes and threads of the sandbox user (torch starts one thread per core)."""
    max_file_bytes: int = 1024 * MiB
    tmp_bytes: int = 1024 * MiB
    open_files: int = 4096

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise SandboxError(
                f"Unknown sandbox mode {self.mode!r}: use one of {', '.join(MODES)} "
                "(ATREX_SANDBOX or --sandbox)."
            )

    @classmethod
    def from_environment(
        cls,
        environ: Mapping[str, str] | None = None,
        *,
        mode: str | None = None,
        hidden_paths: Iterable[str] = (),
    ) -> SandboxPolicy:
        """The policy from ``ATREX_SANDBOX`` (mode), ``ATREX_SANDBOX_USER``/``_GID``,
        ``ATREX_SANDBOX_SECOND_USER``, ``ATREX_SANDBOX_THIRD_USER``,
        ``ATREX_SANDBOX_MORE_USERS`` (comma-separated), ``ATREX_SANDBOX_HIDE``
        (os.pathsep-separated), ``ATREX_SANDBOX_CPU_S``, ``ATREX_SANDBOX_MEMORY_MB``,
        ``ATREX_SANDBOX_PROCESSES``, ``ATREX_SANDBOX_FILE_MB`` and ``ATREX_SANDBOX_TMP_MB``;
        explicit arguments win over the environment."""
        environ = os.environ if environ is None else environ

        def number(name: str, default: int, scale: int = 1) -> int:
            raw = environ.get(name, "").strip()
            if not raw:
                return default * scale
            try:
                value = int(raw)
            except ValueError:
                raise SandboxError(f"{name}={raw!r} is not a whole number.") from None
            if value <= 0:
                raise SandboxError(f"{name} must be positive, not {value}.")
            return value * scale

        hidden = [p for p in environ.get("ATREX_SANDBOX_HIDE", "").split(os.pathsep) if p]
        gid_text = environ.get("ATREX_SANDBOX_GID", "").strip()
        return cls(
            mode=mode or environ.get("ATREX_SANDBOX", "").strip() or "best-effort",
            user=environ.get("ATREX_SANDBOX_USER", "").strip() or "nobody",
            gid=number("ATREX_SANDBOX_GID", 0) if gid_text else None,
            second_user=environ.get("ATREX_SANDBOX_SECOND_USER", "").strip(),
            third_user=environ.get("ATREX_SANDBOX_THIRD_USER", "").strip(),
            more_users=tuple(
                user.strip()
                for user in environ.get("ATREX_SANDBOX_MORE_USERS", "").split(",")
                if user.strip()
            ),
            hidden_paths=tuple(dict.fromkeys([*hidden, *hidden_paths])),
            cpu_time_s=number("ATREX_SANDBOX_CPU_S", cls.cpu_time_s),
            memory_bytes=number("ATREX_SANDBOX_MEMORY_MB", cls.memory_bytes // MiB, MiB),
            max_processes=number("ATREX_SANDBOX_PROCESSES", cls.max_processes),
            max_file_bytes=number("ATREX_SANDBOX_FILE_MB", cls.max_file_bytes // MiB, MiB),
            tmp_bytes=number("ATREX_SANDBOX_TMP_MB", cls.tmp_bytes // MiB, MiB),
        )

    def to_dict(self) -> dict[str, Any]:
        """The limits, for the environment digest (hidden paths are counted, not listed)."""
        return {
            "mode": self.mode,
            "user": self.user,
            "second_user": self.second_user or DEFAULT_SECOND_UID,
            "third_user": self.third_user or DEFAULT_THIRD_UID,
            **({"more_users": list(self.more_users)} if self.more_users else {}),
            "hidden_paths": len(self.hidden_paths),
            "cpu_time_s": self.cpu_time_s,
            "memory_bytes": self.memory_bytes,
            "max_processes": self.max_processes,
            "max_file_bytes": self.max_file_bytes,
            "tmp_bytes": self.tmp_bytes,
        }


def resolve_user(user: str, gid: int | None) -> tuple[int, int]:
    """(uid, gid) of the sandbox user, given as a name or a number."""
    try:
        entry = pwd.getpwnam(user)
        return entry.pw_uid, entry.pw_gid if gid is None else gid
    except KeyError:
        pass
    try:
        uid = int(user)
    except ValueError:
        raise SandboxError(
            f"The sandbox user {user!r} does not exist; set ATREX_SANDBOX_USER to an "
            "unprivileged user of this machine."
        ) from None
    if uid == 0:
        raise SandboxError("The sandbox user must not be root (uid 0).")
    return uid, uid if gid is None else gid


DEFAULT_SECOND_UID = "65533"
DEFAULT_THIRD_UID = "65532"
MAX_USERS = 3
"""Children alive at once, at most: the running operator's and two sanitized children
started ahead of the sanitizer pass (or, during the pass, one per tool)."""


def _other_user(
    user: str, taken: Mapping[int, str], *, default: str, variable: str, purpose: str
) -> tuple[int, int]:
    """(uid, gid) of a sandbox user beside the first, whose uid must not be one of
    ``taken`` (uid: what that user is): ``user`` if given, else uid ``default`` (its own
    gid) if no account of this machine holds it. ``purpose`` ends the message that asks
    for one."""
    if user:
        uid, gid = resolve_user(user, None)
    else:
        uid = gid = int(default)
        try:
            holder = pwd.getpwuid(uid).pw_name
        except KeyError:
            holder = None
        if holder is not None:
            raise SandboxError(
                f"uid {uid} belongs to {holder!r} here; set {variable} to a {purpose}."
            )
    if uid in taken:
        raise SandboxError(f"{variable} is {taken[uid]}; it must be another unprivileged user.")
    return uid, gid


def resolve_second_user(user: str, first: tuple[int, int]) -> tuple[int, int]:
    """(uid, gid) of the second sandbox user, which must differ from the first. Without
    one configured, uid 65533 (its own gid) if no account of this machine holds it."""
    return _other_user(
        user,
        {first[0]: "the sandbox user itself"},
        default=DEFAULT_SECOND_UID,
        variable="ATREX_SANDBOX_SECOND_USER",
        purpose="second unprivileged user for the child that starts ahead of its turn",
    )


def resolve_third_user(
    user: str, first: tuple[int, int], second: tuple[int, int]
) -> tuple[int, int]:
    """(uid, gid) of the third sandbox user, which must differ from the two others.
    Without one configured, uid 65532 (its own gid) if no account of this machine holds
    it."""
    taken = {second[0]: "the second sandbox user", first[0]: "the sandbox user itself"}
    return _other_user(
        user,
        taken,
        default=DEFAULT_THIRD_UID,
        variable="ATREX_SANDBOX_THIRD_USER",
        purpose="third unprivileged user for the sanitizer's children that start ahead",
    )


def resolve_more_users(users: Iterable[str], taken: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """(uid, gid) of each of ``ATREX_SANDBOX_MORE_USERS`` (names or numbers; a number no
    account holds gets its own gid), none of them root or one of ``taken`` or another."""
    resolved: list[tuple[int, int]] = []
    for user in users:
        uid, gid = resolve_user(user, None)
        if uid in {u for u, _ in (*taken, *resolved)}:
            raise SandboxError(
                f"ATREX_SANDBOX_MORE_USERS names uid {uid} twice, or a sandbox user already "
                "in use; each child needs a user of its own."
            )
        resolved.append((uid, gid))
    return resolved


GROUP_FILE_MAX_BYTES = 1 << 20


def chown_tree(folder: Path, uid: int, gid: int) -> None:
    """Give ``folder`` and everything under it to ``uid``:``gid`` (links themselves, never
    followed): a copied cache, for the child that will use it."""
    for path, dirnames, filenames in os.walk(folder):
        os.lchown(path, uid, gid)
        for entry in [*dirnames, *filenames]:
            os.lchown(os.path.join(path, entry), uid, gid)


def rehome_cache_groups(folder: Path, origin: Path) -> int:
    """Make the copy of a Triton cache (``origin`` copied into ``folder``) stand alone:
    Triton finds a compiled kernel through its group file (``<key>/__grp__<name>.json``),
    which lists its files by absolute path, and compiles again when one of them cannot be
    seen; a copy still names the origin's files, which the copy's child (another sandbox
    user) cannot read. Each group file of the copy (a regular file in a real folder: a
    child wrote the origin, links are not followed) that names the origin's files is
    rewritten to name the copies; returns how many."""
    old = os.path.join(os.path.realpath(origin), "")
    new = os.path.join(os.path.realpath(folder), "")
    rewritten = 0
    for key in sorted(folder.iterdir()):
        if key.is_symlink() or not key.is_dir():
            continue
        for target in sorted(key.glob("__grp__*.json")):
            try:
                descriptor = os.open(target, os.O_RDONLY | os.O_NOFOLLOW)
                with os.fdopen(descriptor, "rb") as handle:
                    if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                        continue
                    data = json.loads(handle.read(GROUP_FILE_MAX_BYTES))
                paths = data["child_paths"]
                if not isinstance(paths, dict) or not any(
                    str(path).startswith(old) for path in paths.values()
                ):
                    continue
                data["child_paths"] = {
                    str(name): new + str(path)[len(old) :] if str(path).startswith(old) else path
                    for name, path in paths.items()
                }
                staged = target.with_name(f".{target.name}.rehomed")
                staged.unlink(missing_ok=True)
                flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                with os.fdopen(os.open(staged, flags, 0o600), "w") as handle:
                    json.dump(data, handle)
                os.replace(staged, target)
                rewritten += 1
            except (OSError, ValueError, KeyError, TypeError, AttributeError):
                continue  # not Triton's: left as it is (Triton then compiles that kernel again)
    return rewritten


# --------------------------------------------------------------------------- paths


def _inside(path: str, folder: str) -> bool:
    return path != folder and path.startswith(folder.rstrip("/") + "/")


def _minimal(paths: Iterable[str]) -> list[str]:
    """The paths, without those inside another one of them."""
    unique = sorted(set(paths))
    return [p for p in unique if not any(_inside(p, q) for q in unique if q != p)]


def runtime_paths(package_root: str | None = None) -> list[str]:
    """What the child must be able to read: the interpreter, its libraries, the evaluator."""
    candidates = {
        sys.prefix,
        sys.base_prefix,
        sys.exec_prefix,
        sys.base_exec_prefix,
        os.path.dirname(os.path.realpath(sys.executable)),
        *(sysconfig.get_paths().get(k, "") for k in ("stdlib", "platstdlib", "purelib", "platlib")),
        *site.getsitepackages(),
        *os.environ.get("PYTHONPATH", "").split(os.pathsep),
    }
    if package_root is None:
        package_root = str(Path(__file__).resolve().parent.parent)
    candidates.add(package_root)
    real = {os.path.realpath(p) for p in candidates if p and os.path.isabs(p)}
    return _minimal(p for p in real if os.path.exists(p))


def _can_search(info: os.stat_result, uid: int, gid: int) -> bool:
    if info.st_uid == uid:
        return bool(info.st_mode & stat.S_IXUSR)
    if info.st_gid == gid:
        return bool(info.st_mode & stat.S_IXGRP)
    return bool(info.st_mode & stat.S_IXOTH)


def untraversable_ancestors(paths: Iterable[str], uid: int, gid: int) -> list[str]:
    """Folders above ``paths`` that ``uid`` may not enter (e.g. ``/root`` holding pyenv):
    hidden behind a tmpfs through which only the needed paths are bound back."""
    found = set()
    for path in paths:
        parts = Path(path).parts
        for depth in range(1, len(parts)):
            folder = str(Path(*parts[:depth]))
            try:
                info = os.stat(folder)
            except OSError:
                break
            if not _can_search(info, uid, gid):
                found.add(folder)
    return sorted(found)


# --------------------------------------------------------------------------- libc


_LIBC: Any = None


def _libc() -> Any:
    global _LIBC
    if _LIBC is None:
        _LIBC = ctypes.CDLL(None, use_errno=True)
        _LIBC.mount.argtypes = [
            ctypes.c_char_p,
            ctypes.c_char_p,
            ctypes.c_char_p,
            ctypes.c_ulong,
            ctypes.c_char_p,
        ]
        _LIBC.unshare.argtypes = [ctypes.c_int]
        _LIBC.prctl.argtypes = [ctypes.c_int] + [ctypes.c_ulong] * 4
    return _LIBC


def _check(result: int, what: str) -> None:
    if result != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"{what}: {os.strerror(code)}")


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str = "") -> None:
    _check(
        _libc().mount(
            source.encode() if source else None,
            target.encode(),
            fstype.encode() if fstype else None,
            flags,
            data.encode() if data else None,
        ),
        f"mount {target}",
    )


def _kept_flags(path: str) -> int:
    """Mount flags a bind remount must keep (the kernel refuses to drop locked ones)."""
    flags = os.statvfs(path).f_flag
    return sum(ms for st, ms in _STATVFS_TO_MS if flags & st)


def private_mounts() -> bool:
    """Give this process a mount namespace of its own, its mounts private, so that what it
    mounts is seen by its children only and goes with it (root, Linux; False elsewhere).
    Call it while the process has one thread."""
    try:
        _check(_libc().unshare(CLONE_NEWNS), "unshare")
        _mount(None, "/", None, MS_REC | MS_PRIVATE)
    except (OSError, AttributeError):
        return False
    return True


def mount_tmpfs(path: Path, size_bytes: int) -> None:
    """A size-limited tmpfs on the (empty) folder ``path`` (see ``private_mounts``)."""
    _mount(
        "tmpfs", str(path), "tmpfs", MS_NOSUID | MS_NODEV, f"size={size_bytes // 1024}k,mode=0700"
    )


def unmount(path: Path) -> None:
    """Detach what is mounted on ``path``; nothing when nothing is."""
    _libc().umount2(str(path).encode(), 2)  # MNT_DETACH


def set_child_subreaper() -> bool:
    """Make this process adopt orphans of its descendants (so none escape clean-up)."""
    try:
        _check(_libc().prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), "prctl(PR_SET_CHILD_SUBREAPER)")
    except (OSError, AttributeError):
        return False
    return True


# --------------------------------------------------------------------------- one child


@dataclass
class ChildSandbox:
    """The sandbox of one child process: its plan, computed in the parent, and the
    ``preexec`` that applies it in the forked process before ``exec``."""

    policy: SandboxPolicy
    private_tmp: str
    bundle_dir: str | None
    keep: list[str]
    """Read-only paths the child needs (runtime, bundle), bound back under hidden ones."""
    hidden: list[str]
    uid: int | None
    """The sandbox user's uid when the parent is root; None when it cannot switch."""
    gid: int | None
    privileged: bool
    no_user_reason: str = "no sandbox user"
    devices: list[str] = field(default_factory=list)
    """Device files the child must open read-write (the GPU's), checked before the switch."""
    writable: list[str] = field(default_factory=list)
    """Folders of this child's own that it may write besides its private temp folder (a
    campaign round's Triton cache, see ``evaluator.serve``), bound back writable."""
    report_fd: int = -1
    report: dict[str, Any] = field(default_factory=dict)
    cache_dir: str | None = None
    """The child's Triton cache: a folder of the run's scratch, the child's own and
    writable, bound back like ``private_tmp`` but kept after the child (see
    ``Sandbox.child``)."""

    # -- in the forked process --------------------------------------------------------

    def preexec(self) -> None:
        """Apply the plan (runs between fork and exec; see the module docstring)."""
        active: dict[str, Any] = {}
        missing: dict[str, str] = {}
        try:
            self._apply(active, missing)
        except BaseException as exc:  # report whatever broke, then fail the launch
            missing.setdefault("sandbox", f"{type(exc).__name__}: {exc}")
        payload = json.dumps({"active": active, "missing": missing}).encode()
        if self.report_fd >= 0:
            os.write(self.report_fd, payload)
            os.close(self.report_fd)
        if missing and self.policy.mode == "required":
            raise SandboxError("a required protection is missing")

    def _apply(self, active: dict[str, Any], missing: dict[str, str]) -> None:
        import resource

        parent = os.getppid()
        policy = self.policy
        limits = {
            "cpu_time_s": (resource.RLIMIT_CPU, policy.cpu_time_s, policy.cpu_time_s + 5),
            "file_bytes": (resource.RLIMIT_FSIZE, policy.max_file_bytes, policy.max_file_bytes),
            "core_bytes": (resource.RLIMIT_CORE, 0, 0),
            "open_files": (resource.RLIMIT_NOFILE, policy.open_files, policy.open_files),
            "processes": (resource.RLIMIT_NPROC, policy.max_processes, policy.max_processes),
        }
        if self.uid is None and os.getuid() != 0:
            # RLIMIT_NPROC counts every process of the user: on a developer's machine that
            # is their whole desktop, so the limit only applies to the sandbox user.
            del limits["processes"]
            missing["processes"] = "not limited: the child keeps the caller's user"
        applied = {}
        for name, (which, soft, hard) in limits.items():
            _, current_hard = resource.getrlimit(which)
            if current_hard != resource.RLIM_INFINITY:
                soft, hard = min(soft, current_hard), min(hard, current_hard)
            resource.setrlimit(which, (soft, hard))
            applied[name] = soft
        active["rlimits"] = applied

        namespaces = False
        if self.privileged:
            try:
                _check(_libc().unshare(CLONE_NEWNS | CLONE_NEWNET), "unshare")
                namespaces = True
            except OSError as exc:
                missing["network"] = missing["mounts"] = f"no namespaces: {exc}"
        else:
            missing["network"] = missing["mounts"] = "the evaluator does not run as root"
        if namespaces:
            active["network"] = "own network namespace, no interface up"
            self._mount_plan(active, missing)
        elif os.path.isdir(self.private_tmp):
            active["private_tmp"] = {"path": self.private_tmp, "tmpfs": False}
        os.chdir(self.private_tmp)

        if self.uid is not None and self.gid is not None:
            self._drop_user(active, missing)
        else:
            missing["user"] = self.no_user_reason
        try:
            _check(_libc().prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")
            active["no_new_privs"] = True
        except OSError as exc:
            missing["no_new_privs"] = str(exc)
        # Killed with the process that started it (a campaign's evaluator server that
        # died): set last, since a change of user clears it.
        if _libc().prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0:
            active["parent_death"] = "killed with the process that started it"
            if os.getppid() != parent:
                os._exit(1)  # that process is already gone

    def _mount_plan(self, active: dict[str, Any], missing: dict[str, str]) -> None:
        try:
            _mount(None, "/", None, MS_REC | MS_PRIVATE)
        except OSError as exc:
            missing["mounts"] = f"cannot make mounts private: {exc}"
            return
        hidden_done = []
        problems = []
        readonly = set(self.keep)
        keeps = [
            *self.keep,
            *self.writable,
            self.private_tmp,
            *([self.cache_dir] if self.cache_dir else []),
        ]
        for path in sorted(self.hidden, key=lambda p: (p.count("/"), p)):
            if not os.path.lexists(path):
                continue  # already hidden by a folder above it, or never there
            try:
                self._hide(path, keeps, readonly, writable=path in SHARED_SCRATCH)
                hidden_done.append(path)
            except OSError as exc:
                problems.append(f"{path}: {exc}")
        if problems:
            missing["mounts"] = "; ".join(problems)
        else:
            active["mounts"] = {"hidden": len(hidden_done)}
        uid = self.uid if self.uid is not None else os.getuid()
        gid = self.gid if self.gid is not None else os.getgid()
        size = max(self.policy.tmp_bytes // 1024, 1024)
        try:
            _mount(
                "tmpfs",
                self.private_tmp,
                "tmpfs",
                MS_NOSUID | MS_NODEV,
                f"size={size}k,mode=0700,uid={uid},gid={gid}",
            )
            active["private_tmp"] = {"path": self.private_tmp, "tmpfs": True, "bytes": size * 1024}
        except OSError as exc:
            missing["private_tmp"] = str(exc)

    @staticmethod
    def _hide(path: str, keeps: list[str], readonly: set[str], *, writable: bool = False) -> None:
        if not os.path.isdir(path) or os.path.islink(path):
            _mount("/dev/null", path, None, MS_BIND)
            return
        inside = _minimal(k for k in keeps if _inside(k, path) and os.path.exists(k))
        # Opened before the tmpfs covers them; bound back from /proc/self/fd afterwards.
        handles = [(k, os.open(k, os.O_PATH | os.O_CLOEXEC)) for k in inside]
        try:
            options = (
                f"size={SHARED_SCRATCH_BYTES // 1024}k,mode=1777"
                if writable
                else "size=1024k,mode=0755"
            )
            _mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, options)
            for kept, handle in handles:
                target = kept
                os.makedirs(os.path.dirname(target), mode=0o755, exist_ok=True)
                if os.path.isdir(f"/proc/self/fd/{handle}"):
                    os.makedirs(target, mode=0o755, exist_ok=True)
                else:
                    open(target, "a").close()
                _mount(f"/proc/self/fd/{handle}", target, None, MS_BIND | MS_REC)
                if kept in readonly:
                    flags = MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | _kept_flags(target)
                    _mount(None, target, None, flags)
        finally:
            for _, handle in handles:
                os.close(handle)
        if not writable:
            _mount(None, path, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)

    def _drop_user(self, active: dict[str, Any], missing: dict[str, str]) -> None:
        assert self.uid is not None and self.gid is not None
        os.setgroups([])
        os.setresgid(self.gid, self.gid, self.gid)
        os.seteuid(self.uid)  # a trial: the real uid stays root until the checks pass
        unreadable = [
            p
            for p in [*self.keep, sys.executable]
            if not os.access(p, os.R_OK | os.X_OK, effective_ids=True)
        ]
        unreadable += [
            p
            for p in (self.private_tmp, *self.writable)
            if not os.access(p, os.W_OK | os.X_OK, effective_ids=True)
        ]
        unreadable += [
            d for d in self.devices if not os.access(d, os.R_OK | os.W_OK, effective_ids=True)
        ]
        if unreadable:
            os.seteuid(0)
            os.setresgid(0, 0, 0)
            missing["user"] = (
                f"uid {self.uid} could not read {', '.join(unreadable)}; the child kept root"
            )
            return
        os.setresuid(self.uid, self.uid, self.uid)
        active["user"] = {"uid": self.uid, "gid": self.gid}


# --------------------------------------------------------------------------- the run


PROBE_CODE = r"""
import json, os, socket, sys
hidden = json.loads(sys.argv[1])
seen = {}
for path in hidden:
    try:
        if os.path.isdir(path):
            seen[path] = len(os.listdir(path))
        else:
            with open(path, "rb") as handle:
                seen[path] = len(handle.read(1))
    except OSError:
        seen[path] = 0
sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
sock.settimeout(2)
code = sock.connect_ex(("127.0.0.1", 9))
sock.close()
up = []
try:
    with open("/proc/net/dev") as handle:
        up = [line.split(":")[0].strip() for line in handle.readlines()[2:]]
except OSError:
    pass
print(json.dumps({"uid": os.getuid(), "gid": os.getgid(), "loopback_errno": code,
                  "interfaces": up, "hidden_visible": [p for p, n in seen.items() if n],
                  "cwd_writable": os.access(os.getcwd(), os.W_OK)}))
"""


@dataclass
class Sandbox:
    """The sandbox of one evaluation run: the policy and the run's scratch folder.

    :meth:`child` plans the sandbox of one child; :meth:`launch` starts a command in it
    and returns the process and what was applied. Nothing is applied in this process,
    except that it becomes a child subreaper (orphans of its children come back to it).
    """

    policy: SandboxPolicy
    scratch: Path
    device: str = "cpu"
    privileged: bool | None = None
    """Whether this process may create namespaces and switch users (default: is root)."""
    package_root: str | None = None
    _counter: int = 0
    concurrent: int = 1
    """Operators' children alive at once (``evaluator.concurrency``): where the parent
    cannot switch users, as many more children may be alive as the run asks."""

    def __post_init__(self) -> None:
        if self.privileged is None:
            self.privileged = os.geteuid() == 0
        self.uid: int | None = None
        self.gid: int | None = None
        self.no_user_reason = "the evaluator does not run as root: the child keeps its user"
        self.second: tuple[int, int] | None = None
        self.third: tuple[int, int] | None = None
        self.more: list[tuple[int, int]] = []
        """The users of ``ATREX_SANDBOX_MORE_USERS``, for a concurrent run's children."""
        self.no_overlap_reason: str | None = None
        """Why two children may not run at once (None: they may)."""
        self.no_third_reason: str | None = None
        """Why a third child may not run beside two others (None: it may)."""
        if self.privileged:
            try:
                self.uid, self.gid = resolve_user(self.policy.user, self.policy.gid)
            except SandboxError as exc:
                if self.policy.mode == "required":
                    raise
                self.no_user_reason = exc.message
        if self.uid is not None and self.gid is not None:
            try:
                self.second = resolve_second_user(self.policy.second_user, (self.uid, self.gid))
                self.third = resolve_third_user(
                    self.policy.third_user, (self.uid, self.gid), self.second
                )
            except SandboxError as exc:
                if self.second is None:
                    self.no_overlap_reason = exc.message
                self.no_third_reason = exc.message
        self.no_more_reason: str | None = "ATREX_SANDBOX_MORE_USERS lists none"
        """Why there are no users beyond the third (None: there are)."""
        if self.third is not None and self.second is not None and self.policy.more_users:
            first = (self.uid or 0, self.gid or 0)
            try:
                self.more = resolve_more_users(
                    self.policy.more_users, [first, self.second, self.third]
                )
                self.no_more_reason = None
            except SandboxError as exc:
                if self.policy.mode == "required":
                    raise
                self.no_more_reason = exc.message
        self.runtime = runtime_paths(self.package_root)
        set_child_subreaper()

    # -- planning ---------------------------------------------------------------------

    def prepare_bundle(self, bundle_dir: Path) -> None:
        """Make the extracted bundle readable (not writable) by the sandbox user."""
        os.chmod(self.scratch, 0o711)
        for folder, dirnames, filenames in os.walk(bundle_dir):
            os.chmod(folder, 0o755)
            for name in filenames:
                os.chmod(os.path.join(folder, name), 0o644)
            for name in dirnames:
                os.chmod(os.path.join(folder, name), 0o755)

    @property
    def can_overlap(self) -> bool:
        """Whether a child may start while another runs: they run as two different users
        (or, where the parent cannot switch users, as the caller, like everything else)."""
        return self.no_overlap_reason is None

    @property
    def users(self) -> int:
        """How many children may be alive at once, each as a user none of the others runs
        as (``user`` of ``child``): the sandbox user, the second and the third that could
        be had; where the parent cannot switch users every child runs as the caller, and
        the runner never needs more than ``MAX_USERS`` at once."""
        if not self.can_overlap:
            return 1
        if self.uid is None:
            return MAX_USERS + self.concurrent - 1
        return 1 + (self.second is not None) + (self.third is not None) + len(self.more)

    def child(
        self,
        label: str,
        bundle_dir: Path | None,
        *,
        user: int = 0,
        cache: str | None = None,
        cache_from: Iterable[str] | None = None,
        writable: Iterable[Path] = (),
    ) -> ChildSandbox:
        """The plan of one child: its private temp folder, what it sees and as whom
        (``user``: 0 for the sandbox user, 1 for the second, 2 for the third, for a child
        alive beside others, see ``users``);
        ``writable``: existing folders of this child's own that it may also write (made
        its user's here).

        ``cache`` names the child's Triton cache folder in the run's scratch
        (``caches/<cache>``, the child's own, kept after it so that a later child can use
        what it compiled); ``cache_from`` fills it first with copies of those caches (the
        sanitized child gets the regular children's compiled kernels: nothing compiles
        again under the tool). Copies, so no two children ever write one folder: the
        kernels of the bundle's operators come from children of the same bundle, which
        gives the child nothing its own code could not do."""
        if user >= self.users:
            reason = (self.no_overlap_reason, self.no_third_reason)[user - 1] if user < 3 else (
                self.no_more_reason or "ATREX_SANDBOX_MORE_USERS lists too few"
            )  # fmt: skip
            raise SandboxError(f"A child cannot start beside {user} other(s): {reason}")
        self._counter += 1
        private = self.scratch / f"sandbox-{self._counter}-{label}"
        private.mkdir(mode=0o700)
        uid, gid = self.uid, self.gid
        others = (self.second, self.third, *self.more)
        other = others[user - 1] if user and user <= len(others) else None
        if uid is not None and other is not None:
            uid, gid = other
        own = [os.path.realpath(folder) for folder in writable]
        if uid is not None and gid is not None:
            for folder in (private, *own):
                os.chown(folder, uid, gid)
        keep = list(self.runtime)
        if bundle_dir is not None:
            keep.append(os.path.realpath(bundle_dir))
        cache_dir = self._cache(cache, cache_from or (), uid, gid) if cache else None
        hidden = {
            os.path.realpath(p) if os.path.lexists(p) else p
            for p in (*DEFAULT_HIDDEN, *self.policy.hidden_paths)
        }
        if uid is not None and gid is not None:
            hidden.update(
                untraversable_ancestors(
                    [*keep, *own, str(private), *([cache_dir] if cache_dir else [])], uid, gid
                )
            )
        # A hidden path that holds a runtime path is covered and the runtime bound back;
        # one inside a runtime path is hidden as asked, except the runtime roots themselves.
        hidden -= {*keep, *own}
        devices = []
        if self.device == "cuda":
            # The control, unified-memory and GPU devices CUDA opens (not modeset or tools).
            devices = sorted(
                str(p)
                for p in Path("/dev").glob("nvidia*")
                if (p.name in ("nvidiactl", "nvidia-uvm") or p.name[6:].isdigit())
                and stat.S_ISCHR(p.stat().st_mode)
            )
        return ChildSandbox(
            policy=self.policy,
            devices=devices,
            private_tmp=os.path.realpath(private),
            bundle_dir=str(bundle_dir) if bundle_dir else None,
            keep=keep,
            writable=own,
            hidden=sorted(hidden),
            uid=uid,
            gid=gid,
            privileged=bool(self.privileged),
            no_user_reason=self.no_user_reason,
            cache_dir=cache_dir,
        )

    def cache_folder(self, name: str) -> Path:
        """``caches/<name>`` in the run's scratch: the Triton cache of the child planned
        with ``cache=name`` (which may not exist)."""
        return self.scratch / "caches" / name.replace(os.sep, "_")

    def _cache(
        self, name: str, sources: Iterable[str], uid: int | None, gid: int | None
    ) -> str | None:
        """Create (or reuse) ``caches/<name>`` for one child, filled from ``sources``' caches
        and owned by ``uid``; None when it cannot be made (the child then compiles in its
        private temp folder, as before)."""
        folder = self.cache_folder(name)
        try:
            folder.parent.mkdir(mode=0o711, exist_ok=True)
            folder.mkdir(mode=0o700, exist_ok=True)
            self._fill(folder, sources, uid, gid)
        except OSError:
            return None
        return os.path.realpath(folder)

    def fill_cache(self, child: ChildSandbox, sources: Iterable[str]) -> None:
        """Copy more caches (``sources``, as for ``child(cache_from=...)``) into a started
        child's own, before it gets its job: a sanitized child started while the last
        operator's child still compiled gets that operator's kernels at its turn."""
        if child.cache_dir is not None:
            with contextlib.suppress(OSError):
                self._fill(Path(child.cache_dir), sources, child.uid, child.gid)

    def _fill(self, folder: Path, sources: Iterable[str], uid: int | None, gid: int | None) -> None:
        for source in sources:
            origin = self.cache_folder(source)
            if origin.is_dir() and origin != folder:
                shutil.copytree(origin, folder, dirs_exist_ok=True, symlinks=True)
                rehome_cache_groups(folder, origin)
        if uid is not None and gid is not None:
            chown_tree(folder, uid, gid)

    def environment(self, child: ChildSandbox, device: str) -> dict[str, str]:
        """The child's whole environment, built from the allow-list (no secrets)."""
        env = {name: os.environ[name] for name in ENV_ALLOWED if name in os.environ}
        env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
        env.setdefault("LANG", "C.UTF-8")
        tmp = child.private_tmp
        env.update(
            HOME=tmp,
            TMPDIR=tmp,
            XDG_CACHE_HOME=os.path.join(tmp, ".cache"),
            TRITON_CACHE_DIR=child.cache_dir or os.path.join(tmp, "triton-cache"),
            TORCH_EXTENSIONS_DIR=os.path.join(tmp, "torch-extensions"),
            # The second sandbox user may have no account: getpass.getuser() (torch's
            # caches) reads these first.
            USER="atrex-sandbox",
            LOGNAME="atrex-sandbox",
            PYTHONUNBUFFERED="1",
            PYTHONDONTWRITEBYTECODE="1",
        )
        package_root = self.package_root or str(Path(__file__).resolve().parent.parent)
        inherited = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys([package_root, *inherited]))
        if device == "cpu":
            env["TRITON_INTERPRET"] = "1"
        return env

    # -- launching --------------------------------------------------------------------

    def launch(
        self, command: list[str], child: ChildSandbox, **popen: Any
    ) -> tuple[subprocess.Popen[bytes], dict[str, Any]]:
        """Start ``command`` in the child's sandbox; (process, report of what is active).

        Raises SandboxError when the sandbox cannot be set up as the policy requires.
        """
        read_end, write_end = os.pipe()
        child.report_fd = write_end
        popen.setdefault("env", self.environment(child, self.device))
        try:
            process = subprocess.Popen(  # noqa: S603 - fixed argv, no shell
                command,
                cwd=child.private_tmp,
                preexec_fn=child.preexec,
                start_new_session=True,
                **popen,
            )
        except subprocess.SubprocessError as exc:
            os.close(write_end)
            report = _read_report(read_end)
            raise SandboxError(
                "The evaluation sandbox could not be set up as required: "
                + describe_missing(report.get("missing") or {"sandbox": str(exc)})
            ) from None
        os.close(write_end)
        remember_start(process.pid)
        return process, self._finish(child, _read_report(read_end), popen["env"])

    def launch_forked(
        self,
        fork: Callable[..., Any],
        child: ChildSandbox,
        *,
        log_fd: int,
        passed: Mapping[str, int],
        env: Mapping[str, str] | None = None,
    ) -> tuple[Any, dict[str, Any]]:
        """As :meth:`launch`, for a child that ``fork`` (``evaluator.forkserver``'s
        ``ForkServer.fork``) forks from a warm harness process: it applies the same
        ``preexec`` there, which reports on the same kind of pipe. ``log_fd`` becomes the
        child's stdout and stderr; ``passed`` maps the child's options to the descriptors
        they name (``{"--job-fd": fd, ...}``). Returns a process with
        ``subprocess.Popen``'s ``pid``, ``poll``, ``wait`` and ``kill``."""
        read_end, write_end = os.pipe()
        env = dict(env) if env is not None else self.environment(child, self.device)
        try:
            process = fork(plan=child, env=env, log_fd=log_fd, report_fd=write_end, passed=passed)
        except BaseException:
            os.close(read_end)
            raise
        finally:
            os.close(write_end)
        remember_start(process.pid)
        report = _read_report(read_end)
        if report["missing"] and self.policy.mode == "required":
            process.kill()
            process.wait()
            raise SandboxError(
                "The evaluation sandbox could not be set up as required: "
                + describe_missing(report["missing"])
            )
        return process, self._finish(child, report, env)

    def _finish(
        self, child: ChildSandbox, report: dict[str, Any], env: Mapping[str, str]
    ) -> dict[str, Any]:
        report["active"]["clean_environment"] = sorted(env)
        if self.policy.memory_bytes:
            report["active"]["memory_watchdog"] = {"rss_bytes": self.policy.memory_bytes}
        self._gpu(report)
        child.report = report
        return report

    def _gpu(self, report: dict[str, Any]) -> None:
        if self.device != "cuda":
            return
        visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").strip()
        if visible and "," not in visible:
            report["active"]["gpu_isolation"] = f"CUDA_VISIBLE_DEVICES={visible}"
        else:
            report["missing"]["gpu_isolation"] = (
                "CUDA_VISIBLE_DEVICES does not name exactly one GPU"
            )

    def probe(self) -> dict[str, Any]:
        """Start a tiny Python in a fresh child sandbox and check the protections from the
        inside; the ``sandbox`` section of the environment digest. Raises SandboxError in
        ``required`` mode when a protection is missing."""
        child = self.child("probe", None)
        exposed = [*child.keep, child.private_tmp]
        secret = [
            path
            for path in (os.path.realpath(p) for p in self.policy.hidden_paths)
            if not any(_inside(k, path) or k == path for k in exposed)
        ]
        process, report = self.launch(
            [sys.executable, "-I", "-S", "-c", PROBE_CODE, json.dumps(secret)],
            child,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        try:
            out, err = process.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            kill_tree(process.pid, self.uid)
            out, err = b"", b"timed out"
        active, missing = report["active"], report["missing"]
        try:
            seen = json.loads(out.decode().strip().splitlines()[-1])
        except (ValueError, IndexError):
            missing["probe"] = (
                f"a sandboxed Python did not start: exit {process.returncode}, "
                + err.decode(errors="replace")[-500:]
            )
            seen = {}
        if seen:
            if seen["loopback_errno"] in (0, errno.ECONNREFUSED) and "network" in active:
                del active["network"]
                missing["network"] = "a loopback connection was possible inside the sandbox"
            if seen["hidden_visible"] and "mounts" in active:
                del active["mounts"]
                missing["mounts"] = f"still visible: {', '.join(seen['hidden_visible'])}"
            if "user" in active and seen["uid"] != self.uid:
                del active["user"]
                missing["user"] = f"the child ran as uid {seen['uid']}"
        if "user" in missing and "mounts" in active and seen.get("uid") == 0:
            # Root in the child keeps CAP_SYS_ADMIN: it could unmount what hides the site.
            del active["mounts"]
            missing["mounts"] = "applied, but the child keeps root and could undo them"
        for name in PROTECTIONS:
            if name not in active and name not in missing:
                missing[name] = "not applicable here" if name == "gpu_isolation" else "off"
        if self.device != "cuda":
            missing.pop("gpu_isolation", None)
            active["gpu_isolation"] = "no GPU (cpu run)"
        required_missing = {k: v for k, v in missing.items()}
        result = {
            "mode": self.policy.mode,
            "limits": self.policy.to_dict(),
            "active": sorted(active),
            "missing": missing,
            "details": {k: v for k, v in active.items() if k != "clean_environment"},
            "checked_inside": seen,
            "overlap": (
                "the next operator's child starts while one runs"
                + (f", as uid {self.second[0]}" if self.second else "")
                + (
                    f"; the sanitizer's children start ahead as uid {self.third[0]} too"
                    if self.third
                    else f"; a third user: {self.no_third_reason}"
                    if self.no_third_reason
                    else ""
                )
                + (
                    "; a concurrent run's children also as uid "
                    + ", ".join(str(uid) for uid, _ in self.more)
                    if self.more
                    else ""
                )
                if self.can_overlap
                else f"children start one at a time: {self.no_overlap_reason}"
            ),
        }
        if required_missing and self.policy.mode == "required":
            raise SandboxError(
                "The evaluation sandbox is required but incomplete: "
                + describe_missing(required_missing)
            )
        return result


def describe_missing(missing: Mapping[str, str]) -> str:
    """``name (reason); ...`` for an error message."""
    return "; ".join(f"{name} ({reason})" for name, reason in sorted(missing.items()))


def _read_report(fd: int) -> dict[str, Any]:
    chunks = []
    while chunk := os.read(fd, 1 << 16):
        chunks.append(chunk)
    os.close(fd)
    try:
        report = json.loads(b"".join(chunks) or b"{}")
    except ValueError:
        report = {}
    report.setdefault("active", {})
    report.setdefault("missing", {})
    return report


# --------------------------------------------------------------------------- watching


def _stat_fields(pid: int) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name (``fields[0]`` is the
    state), or None if the process is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            text = handle.read().decode(errors="replace")
    except OSError:
        return None
    return text[text.rfind(")") + 2 :].split()


def _proc_stat(pid: int) -> tuple[int, int, int] | None:
    """(parent pid, process group, session) of a process, or None if it is gone."""
    fields = _stat_fields(pid)
    if fields is None:
        return None
    return int(fields[1]), int(fields[2]), int(fields[3])


def _proc_uid(pid: int) -> int | None:
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None


def start_ticks(pid: int) -> int | None:
    """When a process started (clock ticks since boot), or None if it is gone."""
    fields = _stat_fields(pid)
    try:
        return int(fields[19]) if fields is not None else None
    except (IndexError, ValueError):
        return None


_LAUNCH_TICKS: dict[int, int] = {}
"""The start (clock ticks since boot) of each child this process launched, by pid: known
after the child is reaped, when ``/proc`` no longer has it."""


def remember_start(pid: int) -> None:
    """Note when the child ``pid``, just launched (not yet reaped), started."""
    ticks = start_ticks(pid)
    if ticks is not None:
        _LAUNCH_TICKS[pid] = ticks


def descendants(session: int, uid: int | None) -> list[int]:
    """Processes of the child's session or group, the processes below those (one that
    left the session with setsid is still its parent's child), and orphans adopted by
    this process that run as the sandbox user and started no earlier than the child (a
    process of this one's that was running before the child, a worker pool of the program
    that runs the harness say, cannot be the child's)."""
    me = os.getpid()
    # Its start as noted at launch: once it is reaped (a kill after its wait), /proc has
    # none, and every process of the sandbox user adopted here would pass for its orphan
    # (a child started ahead of its turn as the same user, say, would be killed with it).
    child_started = _LAUNCH_TICKS.get(session) or start_ticks(session)
    found: set[int] = set()
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        pid = int(name)
        info = _proc_stat(pid)
        if info is None or pid == me:
            continue
        parent, group, sid = info
        children.setdefault(parent, []).append(pid)
        if sid == session or group == session:
            found.add(pid)
        elif parent == me and uid is not None and _proc_uid(pid) == uid:
            started = start_ticks(pid)
            if child_started is None or started is None or started >= child_started:
                found.add(pid)
    pending = list(found)
    while pending:
        for child in children.get(pending.pop(), ()):
            if child not in found:
                found.add(child)
                pending.append(child)
    return sorted(found)


TOOLCHAIN_PROGRAMS = frozenset(
    {"ptxas", "cc", "gcc", "g++", "c++", "clang", "clang++", "cc1", "cc1plus", "as", "ld",
     "ld.bfd", "ld.gold", "collect2", "ldconfig", "nvcc", "cicc", "nvlink",
     "fatbinary", "cudafe++", "ninja", "lto-wrapper", "lto1", "sh", "dash", "bash",
     "file", "uname"}
)  # fmt: skip
"""Programs a child may run below it: the compilers Triton (ptxas, a C compiler for its
launchers) and PyTorch's extension builds (ninja, nvcc, through a shell) start, and the two
system tools Python's ``platform`` module runs from library code (``file -b`` for
``platform.architecture()``, ``uname -p`` for ``platform.processor()``; the H200 run of
session 15 saw a ``file -b`` below an honest child's first call and failed the operator for
it). Neither computes anything for a submission, and the submission's own attempts to start
them are still refused by its audit hook. Anything else, a Python interpreter above all, is
the submission computing in a process of its own, out of the profiler's and the fallback
monitor's sight."""
WRITABLE_PLACES = ("/tmp/", "/var/tmp/", "/dev/shm/")
_PROGRAM_NAME = re.compile(
    r"^(?:[a-z0-9_]+(?:-[a-z0-9_]+)?-linux-gnu[a-z]*-)?(?P<name>.+?)(?:-\d+(?:\.\d+)*)?"
    r"(?:[-.]real)?$"
)
"""A program's name without a target prefix, a version suffix or the ``-real``/``.real`` of
the binary behind a wrapper script, as Debian installs the compilers
(``x86_64-linux-gnu-gcc-12``, ``x86_64-linux-gnu-ld.bfd``, ``ldconfig.real``) and as the GPU
machine's ``/opt/gcc/bin/gcc`` runs ``gcc-real``."""


def program_name(path: str) -> str:
    """``/usr/bin/x86_64-linux-gnu-gcc-12`` -> ``gcc``."""
    match = _PROGRAM_NAME.match(os.path.basename(path))
    return match.group("name") if match else os.path.basename(path)


FORK_GRACE_S = 2.0
"""How long a copy of the child (same program, same arguments) may live: between fork and
exec it is still the child's image, for as long as a large process takes to fork."""


def _identity(pid: int) -> tuple[str, bytes] | None:
    """(program, command line) of a process, or None if it is gone or a zombie."""
    try:
        program = os.readlink(f"/proc/{pid}/exe")
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return program, handle.read()
    except OSError:
        return None


def _age_s(pid: int) -> float | None:
    """Seconds since the process started, or None if it is gone."""
    fields = _stat_fields(pid)
    try:
        with open("/proc/uptime", "rb") as handle:
            uptime = float(handle.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    if fields is None:
        return None
    return uptime - int(fields[19]) / os.sysconf("SC_CLK_TCK")


def young_copy(
    pid: int, identity: tuple[str, bytes] | None, child: tuple[str, bytes] | None
) -> bool:
    """Whether ``pid`` (of ``identity``, see :func:`_identity`) is a copy of the child (of
    ``child``) younger than ``FORK_GRACE_S``: a fork on its way to exec a compiler, or one
    compiling for the child (``evaluator.compile_ahead``)."""
    return identity is not None and identity == child and (_age_s(pid) or 0.0) < FORK_GRACE_S


def foreign_processes(
    session: int,
    uid: int | None = None,
    *,
    writable: Iterable[str] = (),
    pids: Iterable[int] | None = None,
) -> list[str]:
    """Processes below the child (``session``) that are not ``TOOLCHAIN_PROGRAMS`` run from
    the system: each as "pid program (arguments)". A program of that name run from a folder
    the child can write (``writable``, ``WRITABLE_PLACES``) is not the system's; a copy of
    the child younger than ``FORK_GRACE_S`` is a fork on its way to exec a compiler.
    ``pids``: the child's tree as :func:`descendants` listed it, if the caller has it."""
    places = tuple(os.path.join(os.path.realpath(p), "") for p in writable) + WRITABLE_PLACES
    child = _identity(session)
    found = []
    for pid in descendants(session, uid) if pids is None else pids:
        if pid == session:
            continue
        identity = _identity(pid)
        if identity is None:
            continue
        program, cmdline = identity
        if program_name(program) in TOOLCHAIN_PROGRAMS and not program.startswith(places):
            continue
        if young_copy(pid, identity, child):
            continue
        command = " ".join(a.decode(errors="replace") for a in cmdline.split(b"\0") if a)
        found.append(f"{pid} {program} ({command[:120]})")
    return found


def _private_bytes(pid: int) -> int | None:
    """The memory only ``pid`` maps (``Private_Clean`` + ``Private_Dirty`` of its
    ``smaps_rollup``): of a fork, what it wrote or allocated since, not the pages it still
    shares with its parent. None where the kernel does not say."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as handle:
            text = handle.read()
    except OSError:
        return None
    total = found = 0
    for line in text.splitlines():
        if line.startswith((b"Private_Clean:", b"Private_Dirty:")):
            parts = line.split()
            if len(parts) >= 2 and parts[1].isdigit():
                total += int(parts[1]) * 1024
                found += 1
    return total if found == 2 else None


def tree_rss_bytes(
    session: int, uid: int | None = None, *, pids: Iterable[int] | None = None
) -> int:
    """Resident memory of every process of a child's tree (``pids``, else as
    :func:`descendants` lists it now), in bytes. A copy of the child younger than
    ``FORK_GRACE_S`` (a fork compiling for it, ``evaluator.compile_ahead``, or on its way to
    exec a compiler) counts its private memory only: its resident pages are mostly the
    child's own, shared, and a dozen of them would count the child a dozen times."""
    page = os.sysconf("SC_PAGE_SIZE")
    tree = list(descendants(session, uid) if pids is None else pids)
    child = _identity(session) if len(tree) > 1 else None
    total = 0
    for pid in tree:
        if pid != session and young_copy(pid, _identity(pid), child):
            private = _private_bytes(pid)
            if private is not None:
                total += private
                continue
        try:
            with open(f"/proc/{pid}/statm", "rb") as handle:
                total += int(handle.read().split()[1]) * page
        except (OSError, ValueError, IndexError):
            continue
    return total


def kill_tree(session: int, uid: int | None = None, rounds: int = 20) -> None:
    """Kill the child's whole tree and reap the orphans adopted by this process."""
    me = os.getpid()
    for attempt in range(rounds):
        pids = descendants(session, uid)
        try:
            os.killpg(session, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        if not pids:
            return
        if attempt:
            time.sleep(0.05)  # SIGKILL is delivered asynchronously
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        for pid in pids:
            info = _proc_stat(pid)
            if info is not None and info[0] == me and pid != session:
                try:
                    os.waitpid(pid, 0)
                except ChildProcessError:
                    pass


def with_hidden(policy: SandboxPolicy, paths: Iterable[str]) -> SandboxPolicy:
    """The policy with more hidden paths."""
    return replace(policy, hidden_paths=tuple(dict.fromkeys([*policy.hidden_paths, *paths])))
