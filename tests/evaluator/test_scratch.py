"""Folders of killed runs and fork servers are swept; nothing else is (``evaluator.scratch``)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from evaluator.sandbox import start_ticks
from evaluator.scratch import (
    OWNER_FILE,
    claim_folder,
    pid_namespace,
    sweep_killed_folders,
)

REPO = Path(__file__).resolve().parents[2]

# A process that makes and claims a run's folder, leaves a file in it, and is killed.
KILLED = """
import os, signal, sys, tempfile
from evaluator.scratch import claim_folder
folder = tempfile.mkdtemp(prefix="atrex-run-", dir=sys.argv[1])
claim_folder(folder)
os.mkdir(os.path.join(folder, "bundle"))
open(os.path.join(folder, "bundle", "rms_norm.py"), "w").write("# a submission's code")
print(folder, flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def killed_folder(root: Path) -> Path:
    done = subprocess.run(
        [sys.executable, "-c", KILLED, str(root)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=60,
    )
    assert done.returncode == -9, done.stderr
    folder = Path(done.stdout.strip())
    assert (folder / "bundle" / "rms_norm.py").is_file()
    return folder


def test_a_killed_processs_folder_is_swept_and_a_live_ones_is_kept(tmp_path):
    killed = killed_folder(tmp_path)
    live = Path(tempfile.mkdtemp(prefix="atrex-forkserver-", dir=tmp_path))
    claim_folder(live)
    unclaimed = Path(tempfile.mkdtemp(prefix="atrex-run-", dir=tmp_path))  # being made
    other = tmp_path / "not-ours"
    other.mkdir()
    (other / OWNER_FILE).write_text((killed / OWNER_FILE).read_text())

    assert sweep_killed_folders(tmp_path) == [str(killed)]
    assert not killed.exists()
    assert live.is_dir() and unclaimed.is_dir() and other.is_dir()
    assert sweep_killed_folders(tmp_path) == []


def test_a_pid_used_again_by_another_process_does_not_keep_a_folder(tmp_path):
    folder = tmp_path / "atrex-run-reused"
    folder.mkdir()
    # This process's pid, but not its start: the process that claimed it is gone.
    start = start_ticks(os.getpid()) or 0
    (folder / OWNER_FILE).write_text(f"{os.getpid()} {start + 1} {pid_namespace()}\n")
    assert sweep_killed_folders(tmp_path) == [str(folder)]


def test_a_claim_from_another_pid_namespace_or_unreadable_keeps_its_folder(tmp_path):
    killed = killed_folder(tmp_path)
    pid, start, _ = (killed / OWNER_FILE).read_text().split()
    (killed / OWNER_FILE).write_text(f"{pid} {start} pid:[1]\n")  # a container's process
    garbled = tmp_path / "atrex-forkserver-garbled"
    garbled.mkdir()
    (garbled / OWNER_FILE).write_text("not a claim\n")
    assert sweep_killed_folders(tmp_path) == []
    assert killed.is_dir() and garbled.is_dir()


def test_a_link_or_another_users_folder_is_never_swept(tmp_path):
    killed = killed_folder(tmp_path)
    target = tmp_path / "elsewhere"
    killed.rename(target)
    link = tmp_path / "atrex-run-link"
    link.symlink_to(target)
    assert sweep_killed_folders(tmp_path) == []
    assert (target / "bundle" / "rms_norm.py").is_file() and link.is_symlink()
    if os.geteuid() != 0:
        return
    foreign = killed_folder(tmp_path)
    os.chown(foreign, 65534, 65534)
    assert sweep_killed_folders(tmp_path) == []
    assert foreign.is_dir()


@pytest.mark.slow  # a run: its sandbox's probe child
def test_a_run_sweeps_what_killed_runs_left_and_removes_its_own_folder(tmp_path, monkeypatch):
    from evaluator.runner import run_bundle

    root = tmp_path / "tmp"
    root.mkdir()
    killed = killed_folder(root)
    monkeypatch.setattr(tempfile, "tempdir", str(root))
    empty = tmp_path / "empty.zip"
    empty.write_bytes(b"")
    results = run_bundle(
        bundle_path=empty, suite="atrex-bench-v0.1", hardware="cpu-dev", device="cpu"
    )
    assert results["error"]["code"] == "bundle:empty"
    assert not killed.exists()
    assert not [p for p in root.iterdir() if p.name.startswith("atrex-run-")]
