"""The next operator's child starts ahead of its turn (evaluator.runner.ChildStarter).

Real children on CPU: a run with start-ahead on hands later operators a child that has
been up since the previous operator got its job; a child started ahead that died is
replaced; the two children alive at once run as different users, so the running
candidate cannot kill the one waiting (root only: only root can switch users); a child
whose harness cannot start says so.
"""

from __future__ import annotations

import os
import signal
import textwrap
from pathlib import Path

import pytest
import torch

from evaluator.runner import ChildStarter, run_bundle, run_started_child, start_child
from evaluator.sandbox import (
    DEFAULT_SECOND_UID,
    DEFAULT_THIRD_UID,
    Sandbox,
    SandboxError,
    SandboxPolicy,
    resolve_second_user,
    resolve_third_user,
)

from .conftest import TRITON_BASELINE, example_files

pytestmark = pytest.mark.slow

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="switching users needs root")

# Waits for the child started beside it (same parent, running evaluator.child), tries to
# kill it, and prints what happened to its log; then computes honestly.
SIBLING_KILLER = textwrap.dedent(
    """
    import errno, os, signal, time

    def _siblings():
        me, parent = os.getpid(), os.getppid()
        found = []
        for name in os.listdir("/proc"):
            if not name.isdigit() or int(name) == me:
                continue
            try:
                with open(f"/proc/{name}/stat") as handle:
                    ppid = int(handle.read().rsplit(")", 1)[1].split()[1])
                with open(f"/proc/{name}/cmdline", "rb") as handle:
                    command = handle.read()
            except (OSError, ValueError, IndexError):
                continue
            # exec'd, or forked from the harness's fork server (evaluator.forkserver)
            child = b"evaluator.child" in command or b"evaluator.forkserver" in command
            if ppid == parent and child:
                found.append(int(name))
        return found

    _deadline = time.monotonic() + 20
    while not _siblings() and time.monotonic() < _deadline:
        time.sleep(0.05)
    for _pid in _siblings():
        try:
            os.kill(_pid, signal.SIGKILL)
            print(f"sibling-kill: {_pid} killed", flush=True)
        except OSError as _exc:
            print(f"sibling-kill: {_pid} {errno.errorcode.get(_exc.errno)}", flush=True)
    """
)


def run(bundle: Path, suite, tmp_path: Path, *, start_ahead: bool, depth: int = 1) -> dict:
    return run_bundle(
        bundle_path=bundle,
        suite=suite,
        hardware="cpu-dev",
        device="cpu",
        seed=1234,
        time_budget_s=0.02,
        log_dir=tmp_path / "logs",
        start_ahead=start_ahead,
        start_ahead_depth=depth,
    )


def entries(results: dict) -> dict[str, dict]:
    return {entry["operator"]: entry for entry in results["operators"]}


SLOW_IMPORT_S = 1.5


@pytest.mark.parametrize("depth", [2, 1])
def test_with_depth_two_the_child_after_next_warms_up_during_the_turn_before(
    tiny_suite, make_bundle, tmp_path, depth
):
    # Each candidate takes SLOW_IMPORT_S to import: every turn's job lasts at least that.
    files = {
        name: f"import time\ntime.sleep({SLOW_IMPORT_S})\n" + text if name.endswith(".py") else text
        for name, text in example_files(TRITON_BASELINE).items()
    }
    order = tiny_suite.operator_slugs()[:3]
    suite = tiny_suite.restrict(order)
    results = run(make_bundle(files), suite, tmp_path, start_ahead=True, depth=depth)
    assert results["environment"].get("start_ahead_depth", 1) == depth
    operators = entries(results)
    assert all(s["status"] == "pass" for e in operators.values() for s in e["shapes"])
    # Depth 2 starts a child when the operator two before it gets its job: it was up for
    # the rest of that turn (over SLOW_IMPORT_S) and the whole previous one; depth 1 only
    # from the previous operator's job on.
    before, previous, operator = order
    rest_of_before = operators[before]["wall_s"] - operators[before]["phases_s"]["start"]
    assert rest_of_before > SLOW_IMPORT_S
    waited = operators[operator]["ahead_s"] - operators[previous]["wall_s"]
    if depth == 2:
        assert waited >= rest_of_before - 0.5, (waited, operators[operator])
    else:
        assert waited < 0.5, (waited, operators[operator])


@pytest.mark.parametrize("start_ahead", [True, False])
def test_later_operators_get_a_child_started_during_the_previous_turn(
    tiny_suite, tmp_path, start_ahead
):
    results = run(TRITON_BASELINE, tiny_suite, tmp_path, start_ahead=start_ahead)
    assert results["environment"]["start_ahead"] is start_ahead
    operators = entries(results)
    order = tiny_suite.operator_slugs()
    assert all(s["status"] == "pass" for e in operators.values() for s in e["shapes"])
    # The first child is started at its turn; with start-ahead every later one was up
    # for at least the previous operator's whole turn (a fresh child, ~0 s, without).
    assert operators[order[0]]["ahead_s"] < 0.2
    for previous, operator in zip(order, order[1:], strict=False):
        if start_ahead:
            assert operators[operator]["ahead_s"] >= operators[previous]["wall_s"] - 0.5
        else:
            assert operators[operator]["ahead_s"] < 0.2
        phases = operators[operator]["phases_s"]
        assert sum(phases.values()) == pytest.approx(operators[operator]["wall_s"], abs=0.05)


def test_a_child_started_ahead_that_died_is_replaced(tmp_path):
    sandbox = Sandbox(policy=SandboxPolicy(), scratch=tmp_path / "scratch", device="cpu")
    (tmp_path / "scratch").mkdir()
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    with ChildStarter(
        sandbox=sandbox, device="cpu", bundle_dir=bundle, log_dir=tmp_path / "logs"
    ) as starter:
        first = starter.take("rms_norm")
        starter.start_ahead("silu_and_mul")
        ahead = starter._next
        assert ahead is not None and ahead.process.poll() is None
        if sandbox.uid is not None:  # two children alive at once: two users
            assert {first.plan.uid, ahead.plan.uid} == {sandbox.uid, sandbox.second[0]}
        os.kill(ahead.process.pid, signal.SIGKILL)
        ahead.process.wait(timeout=30)
        replacement = starter.take("silu_and_mul")
        assert replacement.process.pid != ahead.process.pid
        assert replacement.process.poll() is None
        first.stop()
        replacement.stop()
        # One started ahead and never taken is stopped when the run ends.
        starter.start_ahead("fused_add_rms_norm")
        leftover = starter._next
        assert leftover is not None
    assert leftover.process.poll() is not None


@root_only
def test_the_running_candidate_cannot_kill_the_child_started_ahead(
    tiny_suite, make_bundle, tmp_path
):
    files = example_files(TRITON_BASELINE)
    files["rms_norm.py"] = SIBLING_KILLER + files["rms_norm.py"]
    bundle = make_bundle({k: v for k, v in files.items() if k != "fused_add_rms_norm.py"})
    suite = tiny_suite.restrict(["rms_norm", "silu_and_mul"])
    results = run(bundle, suite, tmp_path, start_ahead=True)
    log = (tmp_path / "logs" / "rms_norm.log").read_text()
    assert "sibling-kill:" in log, log  # it found the child started ahead, and tried
    assert "killed" not in log and "EPERM" in log, log
    operators = entries(results)
    # The child started ahead lived on to its turn: it was not replaced.
    assert operators["silu_and_mul"]["ahead_s"] >= operators["rms_norm"]["wall_s"] - 0.5
    assert all(s["status"] == "pass" for s in operators["silu_and_mul"]["shapes"])


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_a_child_whose_harness_cannot_start_says_so(tmp_path):
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    child = start_child(
        operator="rms_norm",
        bundle_dir=tmp_path,
        device="cuda",
        log_path=tmp_path / "rms_norm.log",
        sandbox=Sandbox(policy=SandboxPolicy(), scratch=scratch, device="cpu"),
    )
    outcome = run_started_child(
        child,
        job={"operator": "rms_norm", "bundle_dir": str(tmp_path), "device": "cuda"},
        shape_timeout_s=60,
        on_record=lambda record: None,
    )
    assert outcome.status == "runtime_error"
    assert "harness could not start" in outcome.error
    assert "could not start" in (tmp_path / "rms_norm.log").read_text()


def test_the_second_sandbox_user(monkeypatch):
    assert resolve_second_user("12345", (65534, 65534)) == (12345, 12345)
    with pytest.raises(SandboxError, match="the sandbox user itself"):
        resolve_second_user("65534", (65534, 65534))
    policy = SandboxPolicy.from_environment({"ATREX_SANDBOX_SECOND_USER": "4242"})
    assert policy.second_user == "4242" and policy.to_dict()["second_user"] == "4242"
    # Without one configured, uid 65533 unless an account of this machine holds it.
    monkeypatch.setattr("pwd.getpwuid", lambda uid: (_ for _ in ()).throw(KeyError(uid)))
    assert resolve_second_user("", (65534, 65534)) == (65533, 65533)

    class Taken:
        pw_name = "someone"

    monkeypatch.setattr("pwd.getpwuid", lambda uid: Taken())
    with pytest.raises(SandboxError, match="ATREX_SANDBOX_SECOND_USER") as caught:
        resolve_second_user("", (65534, 65534))
    assert f"uid {DEFAULT_SECOND_UID} belongs to 'someone'" in caught.value.message


def test_the_third_sandbox_user(monkeypatch):
    first, second = (65534, 65534), (65533, 65533)
    assert resolve_third_user("12345", first, second) == (12345, 12345)
    with pytest.raises(SandboxError, match="the second sandbox user"):
        resolve_third_user("65533", first, second)
    policy = SandboxPolicy.from_environment({"ATREX_SANDBOX_THIRD_USER": "4243"})
    assert policy.third_user == "4243" and policy.to_dict()["third_user"] == "4243"
    monkeypatch.setattr("pwd.getpwuid", lambda uid: (_ for _ in ()).throw(KeyError(uid)))
    assert resolve_third_user("", first, second) == (65532, 65532)

    class Taken:
        pw_name = "nonroot"

    monkeypatch.setattr("pwd.getpwuid", lambda uid: Taken())
    with pytest.raises(SandboxError, match="ATREX_SANDBOX_THIRD_USER") as caught:
        resolve_third_user("", first, second)
    assert f"uid {DEFAULT_THIRD_UID} belongs to 'nonroot'" in caught.value.message


class _Process:
    def __init__(self) -> None:
        self.returncode: int | None = None

    def poll(self) -> int | None:
        return self.returncode


class _Child:
    """Stands in for a StartedChild: only its process's liveness matters here."""

    def __init__(self, user: int) -> None:
        self.user = user
        self.process = _Process()


def test_children_alive_at_once_never_share_a_sandbox_user(tmp_path):
    sandbox = Sandbox(policy=SandboxPolicy(), scratch=tmp_path, privileged=False)
    assert sandbox.users == 3  # the caller's user for all, as many as the runner needs
    starter = ChildStarter(sandbox=sandbox, device="cpu", bundle_dir=tmp_path, log_dir=tmp_path)
    running = starter.launch(_Child)
    ahead = [starter.launch(_Child), starter.launch(_Child)]
    assert [c.user for c in (running, *ahead)] == [0, 1, 2] and starter.free_users() == 0
    with pytest.raises(SandboxError, match="no sandbox user is free"):
        starter.launch(_Child)
    running.process.returncode = 0  # its turn is over: its user is free again
    assert starter.free_users() == 1 and starter.launch(_Child).user == 0


@root_only
def test_without_a_third_user_two_children_at_most_are_alive(tmp_path, monkeypatch):
    monkeypatch.setattr(
        "evaluator.sandbox.resolve_third_user",
        lambda *args: (_ for _ in ()).throw(SandboxError("no third user here")),
    )
    sandbox = Sandbox(policy=SandboxPolicy(), scratch=tmp_path)
    assert sandbox.can_overlap and sandbox.users == 2
    assert "a third user: no third user here" in sandbox.probe()["overlap"]
    with pytest.raises(SandboxError, match="no third user here"):
        sandbox.child("x", None, user=2)


@root_only
def test_children_start_one_at_a_time_without_a_second_user(tmp_path, monkeypatch):
    monkeypatch.setattr(
        "evaluator.sandbox.resolve_second_user",
        lambda user, first: (_ for _ in ()).throw(SandboxError("no second user here")),
    )
    sandbox = Sandbox(policy=SandboxPolicy(), scratch=tmp_path)
    assert not sandbox.can_overlap
    assert "one at a time: no second user here" in sandbox.probe()["overlap"]
    starter = ChildStarter(sandbox=sandbox, device="cpu", bundle_dir=tmp_path, log_dir=tmp_path)
    assert starter.ahead is False
    with pytest.raises(SandboxError):
        sandbox.child("x", None, user=1)
