"""Operator children forked from the harness's fork server (evaluator/forkserver.py): the
same sandboxed child as an exec'd one, without importing torch again each time."""

from __future__ import annotations

import json
import os
import signal
import textwrap
from pathlib import Path

import pytest

from evaluator import forkserver
from evaluator.runner import ChildStarter, run_bundle
from evaluator.sandbox import Sandbox, SandboxPolicy

from .conftest import TRITON_BASELINE, example_files


def _ppid(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def _sandbox(tmp_path: Path) -> tuple[Sandbox, Path]:
    (tmp_path / "scratch").mkdir()
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    return Sandbox(policy=SandboxPolicy(), scratch=tmp_path / "scratch", device="cpu"), bundle


def _servers() -> set[int]:
    return {server.process.pid for server in forkserver._servers.values() if server.alive()}


def test_children_are_forked_from_one_warm_server_and_exec_d_without_it(tmp_path, monkeypatch):
    monkeypatch.setenv("ATREX_FORK_SERVER", "cpu")
    sandbox, bundle = _sandbox(tmp_path)
    with ChildStarter(
        sandbox=sandbox, device="cpu", bundle_dir=bundle, log_dir=tmp_path / "logs"
    ) as starter:
        first = starter.take("rms_norm")
        second = starter.take("silu_and_mul")
        parents = {_ppid(first.process.pid), _ppid(second.process.pid)}
        assert len(parents) == 1 and parents <= _servers(), (parents, _servers())
        assert first.process.poll() is None and second.process.poll() is None
        first.stop()
        second.stop()
        # A child's exit status comes back through the server (killed: -SIGKILL).
        assert first.process.returncode == -signal.SIGKILL
        monkeypatch.setenv("ATREX_FORK_SERVER", "0")
        execd = starter.take("l2_norm")
        assert _ppid(execd.process.pid) == os.getpid()
        assert b"evaluator.child" in Path(f"/proc/{execd.process.pid}/cmdline").read_bytes()
        execd.stop()


@pytest.mark.slow
def test_a_server_that_died_is_replaced_and_its_children_still_reaped(tmp_path, monkeypatch):
    monkeypatch.setenv("ATREX_FORK_SERVER", "cpu")
    sandbox, bundle = _sandbox(tmp_path)
    with ChildStarter(
        sandbox=sandbox, device="cpu", bundle_dir=bundle, log_dir=tmp_path / "logs"
    ) as starter:
        orphan = starter.take("rms_norm")
        (server,) = {_ppid(orphan.process.pid)}
        os.kill(server, signal.SIGKILL)
        fresh = starter.take("silu_and_mul")
        assert _ppid(fresh.process.pid) not in (server, os.getpid())
        # The orphan was adopted by this process (the sandbox makes it a subreaper).
        orphan.stop()
        assert orphan.process.returncode is not None
        fresh.stop()
        assert fresh.process.returncode == -signal.SIGKILL


PROBE = textwrap.dedent(
    """
    import json, os, sys

    def _descriptors():
        found = {}
        for name in os.listdir("/proc/self/fd"):
            try:
                found[int(name)] = os.readlink(f"/proc/self/fd/{name}")
            except OSError:
                pass
        return found

    print("probe:" + json.dumps({
        "environ": dict(os.environ), "cwd": os.getcwd(), "uid": os.getuid(),
        "fds": _descriptors(), "sid": os.getsid(0) == os.getpid(),
    }), flush=True)
    """
)


def test_a_forked_child_sees_what_an_exec_d_one_sees(
    tiny_suite, make_bundle, tmp_path, monkeypatch
):
    """Its environment is exactly the planned one, its working folder its private one,
    it leads its own session, and holds no descriptor of the server's (no socket)."""
    files = example_files(TRITON_BASELINE)
    bundle = make_bundle({"rms_norm.py": PROBE + files["rms_norm.py"]})
    seen = {}
    for mode in ("1", "0"):
        monkeypatch.setenv("ATREX_FORK_SERVER", mode)
        out = tmp_path / mode
        results = run_bundle(
            bundle_path=bundle, suite=tiny_suite.restrict(["rms_norm"]), hardware="cpu-dev",
            device="cpu", seed=7, time_budget_s=0.02, log_dir=out / "logs",
        )  # fmt: skip
        (entry,) = [e for e in results["operators"] if e["operator"] == "rms_norm"]
        assert all(s["status"] == "pass" for s in entry["shapes"]), entry
        log = (out / "logs" / "rms_norm.log").read_text()
        line = next(x for x in log.splitlines() if x.startswith("probe:"))
        seen[mode] = json.loads(line[len("probe:") :])
    forked, execd = seen["1"], seen["0"]
    assert forked["sid"] and execd["sid"]
    assert forked["uid"] == execd["uid"]
    private = forked["environ"]["TMPDIR"]
    assert forked["cwd"] == private and forked["environ"]["HOME"] == private
    # The same variables, with each child's own folders in them.
    assert sorted(forked["environ"]) == sorted(execd["environ"])
    for name, value in execd["environ"].items():
        if name not in forkserver.PER_CHILD_ENVIRONMENT:
            assert forked["environ"][name] == value, name
    assert not [t for t in forked["fds"].values() if t.startswith("socket:")], forked["fds"]
    assert set(forked["fds"]) - {0, 1, 2} and len(forked["fds"]) <= len(execd["fds"]) + 1


@pytest.mark.parametrize(
    "value, cpu, cuda",
    [("", True, True), ("cpu", True, False), ("1", True, True), ("0", False, False),
     ("off", False, False)],
)  # fmt: skip
def test_the_switch(value, cpu, cuda):
    environ = {"ATREX_FORK_SERVER": value} if value else {}
    assert forkserver.enabled("cpu", environ) is cpu
    assert forkserver.enabled("cuda:0", environ) is cuda


@pytest.mark.slow
def test_a_device_servers_children_inherit_tritons_hash_of_its_install():
    # Computed once in the server (files only, no device) instead of in every CUDA child's
    # start-up; a CPU server (its children interpret their kernels) leaves it to no one.
    import subprocess
    import sys

    probe = textwrap.dedent(
        """
        import os, sys
        from evaluator import forkserver
        from triton.runtime.cache import triton_key
        forkserver._server_imports()
        print(triton_key.cache_info().currsize)
        """
    )
    counts = {}
    for interpret in ("0", "1"):
        environ = {**os.environ, "TRITON_INTERPRET": interpret}
        done = subprocess.run(
            [sys.executable, "-c", probe], capture_output=True, text=True, env=environ,
            timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
        counts[interpret] = int(done.stdout.split()[-1])
    assert counts == {"0": 1, "1": 0}
