"""The harness's temporary folders, and the sweep of those whose process was killed.

A run's folder (``atrex-run-*``: the bundle's copy, the children's private folders and
caches) and a fork server's (``atrex-forkserver-*``) are removed by the process that made
them when it ends. A process killed outright (a run past its time limit, whose process
group the worker kills; a worker killed mid-run) removes nothing, and its folder, a copy
of a submission's code among it, would stay in the temporary folder for good.

So each such folder is claimed when made (``claim_folder``): ``OWNER_FILE`` in it names
the process (its pid and its start time, which tells a pid used again from the process
that held it). ``sweep_killed_folders`` removes the folders whose owner is gone; each run
sweeps before it makes its own. A folder is swept only if it is a real directory (not a
link) of this user, directly in the temporary folder, named with one of the prefixes, and
claimed by a process of this PID namespace that no longer exists: a folder being made (not
yet claimed), another user's, a live process's or one claimed in another namespace (a
container sharing the temporary folder) is left.

Standard library only (and ``evaluator.sandbox``'s reading of ``/proc``).
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from collections.abc import Iterable
from pathlib import Path

from evaluator.sandbox import start_ticks

OWNER_FILE = ".atrex-owner"
PREFIXES = ("atrex-run-", "atrex-forkserver-")
"""The folders of the harness's own that ``sweep_killed_folders`` looks at."""


def pid_namespace() -> str:
    """This process's PID namespace (``pid:[inode]``), '-' where it cannot be read."""
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return "-"


def claim_folder(folder: str | os.PathLike[str]) -> None:
    """Write this process's ``OWNER_FILE`` into ``folder`` (just made by this process)."""
    pid = os.getpid()
    started = start_ticks(pid)
    claim = f"{pid} {'-' if started is None else started} {pid_namespace()}\n"
    Path(folder, OWNER_FILE).write_text(claim)


def owner_alive(folder: Path) -> bool:
    """Whether the process that claimed ``folder`` still runs (True when unclaimed or the
    claim cannot be read: such a folder is never swept)."""
    try:
        pid_text, start, namespace = Path(folder, OWNER_FILE).read_text().split()
        pid = int(pid_text)
    except (OSError, ValueError):
        return True
    if namespace != pid_namespace() or namespace == "-":
        return True  # a pid of another namespace (a container sharing the folder) says nothing
    now = start_ticks(pid)
    if now is None:
        return False
    return start == "-" or str(now) == start


def sweep_killed_folders(
    root: str | os.PathLike[str] | None = None, prefixes: Iterable[str] = PREFIXES
) -> list[str]:
    """Remove the folders in ``root`` (the temporary folder by default) named with one of
    ``prefixes`` whose claiming process is gone; the paths removed."""
    base = Path(root if root is not None else tempfile.gettempdir())
    wanted = tuple(prefixes)
    removed = []
    try:
        names = os.listdir(base)
    except OSError:
        return removed
    uid = os.geteuid()
    for name in names:
        if not name.startswith(wanted):
            continue
        folder = base / name
        try:
            info = folder.lstat()
        except OSError:
            continue
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != uid or owner_alive(folder):
            continue
        # rmtree on a directory never follows the links inside it; a child's folder of
        # another user in it is this user's to remove where this user made it (root).
        shutil.rmtree(folder, ignore_errors=True)
        if not folder.exists():
            removed.append(str(folder))
    return removed
