"""The one launcher of the evaluator's command line: environment, scratch folder, process
group, timeout and output (``evaluator.launch``)."""

from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path

import pytest

from evaluator import launch
from evaluator.launch import (
    LaunchTimeout,
    child_environment,
    run_evaluator_command,
    scratch_folder,
)

REPO = Path(__file__).resolve().parents[2]


def fake_python(folder: Path, body: str) -> str:
    """An executable that stands in for the evaluator's interpreter (a shell script)."""
    path = folder / "fake-python"
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def test_evaluator_environment_keeps_sandbox_limits_and_drops_secrets(monkeypatch, tmp_path):
    monkeypatch.setenv("ATREX_SANDBOX_CPU_S", "60")
    monkeypatch.setenv("DJANGO_SECRET_KEY", "s3cret")
    monkeypatch.setenv("DATABASE_URL", "postgres://u:pw@db/x")
    env = child_environment(tmp_path)
    assert env["ATREX_SANDBOX_CPU_S"] == "60"
    assert "DJANGO_SECRET_KEY" not in env and "DATABASE_URL" not in env


def test_environment_puts_this_checkout_first_and_passes_the_gpu_choice(monkeypatch, tmp_path):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(["/elsewhere", str(REPO)]))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.delenv("TRITON_CACHE_DIR", raising=False)
    env = child_environment(tmp_path)
    assert env["PYTHONPATH"].split(os.pathsep) == [str(REPO), "/elsewhere"]
    assert env["CUDA_VISIBLE_DEVICES"] == "3"
    # The evaluator sets the interpreter itself for its CPU children (evaluator.sandbox).
    assert "TRITON_INTERPRET" not in env
    assert env["HOME"] == str(tmp_path)
    assert env["TRITON_CACHE_DIR"] == str(tmp_path / "triton-cache")


@pytest.mark.parametrize("value", ["0", "cpu", "1"])
def test_the_workers_fork_server_choice_reaches_the_evaluator(monkeypatch, tmp_path, value):
    # On by default in the evaluator (evaluator.forkserver.enabled): a worker turns it off
    # with ATREX_FORK_SERVER=0, which must pass the launcher's environment policy.
    monkeypatch.setenv("ATREX_FORK_SERVER", value)
    assert child_environment(tmp_path)["ATREX_FORK_SERVER"] == value
    monkeypatch.delenv("ATREX_FORK_SERVER")
    assert "ATREX_FORK_SERVER" not in child_environment(tmp_path)


def test_the_hosts_openmp_settings_reach_the_evaluator(monkeypatch, tmp_path):
    monkeypatch.setenv("OMP_WAIT_POLICY", "PASSIVE")
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    env = child_environment(tmp_path)
    assert (env["OMP_WAIT_POLICY"], env["OMP_NUM_THREADS"]) == ("PASSIVE", "3")


def test_a_temporary_scratch_folder_is_removed_and_a_given_one_kept(tmp_path):
    with scratch_folder("ceilings") as made:
        assert made.is_dir() and made.name.startswith("atrex-ceilings-")
        (made / "left.txt").write_text("x")
    assert not made.exists()
    given = tmp_path / "run" / "7"
    with scratch_folder("run", given) as used:
        assert used == given and used.is_dir()
    assert given.is_dir()


def test_the_child_runs_this_checkouts_evaluator_in_its_scratch_folder(tmp_path, monkeypatch):
    # A folder with another "evaluator" package on the inherited PYTHONPATH must not win.
    decoy = tmp_path / "decoy" / "evaluator"
    decoy.mkdir(parents=True)
    (decoy / "__init__.py").write_text("raise ImportError('the wrong evaluator')\n")
    monkeypatch.setenv("PYTHONPATH", str(decoy.parent))
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    finished = run_evaluator_command("validate-suite", ["--help"], scratch=scratch, timeout_s=120)
    assert finished.returncode == 0, finished.stderr
    assert "usage: python -m evaluator validate-suite" in finished.stdout


def test_output_is_captured_and_input_sent(tmp_path):
    python = fake_python(
        tmp_path, 'echo "args: $*"\necho "cwd: $(pwd) home: $HOME"\ncat\necho oops >&2\nexit 4\n'
    )
    finished = run_evaluator_command(
        "work", ["--x"], scratch=tmp_path, timeout_s=30, python=python, input_text="[1, 2]"
    )
    assert finished.returncode == 4
    assert "args: -m evaluator work --x" in finished.stdout
    assert f"cwd: {tmp_path} home: {tmp_path}" in finished.stdout
    assert finished.stdout.rstrip().endswith("[1, 2]")
    assert finished.stderr == "oops\n" and finished.output_tail() == "oops"


def test_output_goes_to_the_log_while_on_poll_follows(tmp_path):
    python = fake_python(tmp_path, "echo first\nsleep 1\necho second >&2\n")
    log = tmp_path / "child.log"
    log.write_text("earlier\n")
    polls: list[str] = []
    finished = run_evaluator_command(
        "run",
        scratch=tmp_path,
        timeout_s=30,
        python=python,
        log_path=log,
        on_poll=lambda: polls.append(log.read_text()),
        poll_s=0.1,
    )
    assert finished.returncode == 0 and finished.stdout == ""
    assert log.read_text() == "earlier\nfirst\nsecond\n"
    assert polls and "first" in polls[-1]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (killed, not yet reaped by its new parent) is not running.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def _wait_gone(pid: int, within_s: float = 10.0) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return False


def test_a_timeout_kills_the_child_and_what_it_started(tmp_path):
    pids = tmp_path / "pids"
    python = fake_python(tmp_path, f"sleep 60 &\necho $! > {pids}\nsleep 60\n")
    started = time.monotonic()
    with pytest.raises(LaunchTimeout) as caught:
        run_evaluator_command("ceilings", scratch=tmp_path, timeout_s=1, python=python)
    assert time.monotonic() - started < 30
    assert "python -m evaluator ceilings did not finish within 1 s" in str(caught.value)
    assert caught.value.code == "platform:evaluator-timeout"
    assert _wait_gone(int(pids.read_text()))


def test_what_on_poll_raises_stops_the_child_and_is_raised(tmp_path):
    pids = tmp_path / "pids"
    python = fake_python(tmp_path, f"echo $$ > {pids}\nsleep 60\n")

    class Lost(Exception):
        pass

    def lost() -> None:
        if pids.exists() and pids.read_text().strip():
            raise Lost

    with pytest.raises(Lost):
        run_evaluator_command(
            "run", scratch=tmp_path, timeout_s=60, python=python, on_poll=lost, poll_s=0.05
        )
    assert _wait_gone(int(pids.read_text()))


def test_a_missing_interpreter_is_an_os_error(tmp_path):
    with pytest.raises(OSError):
        run_evaluator_command(
            "ceilings", scratch=tmp_path, timeout_s=5, python=str(tmp_path / "no-python")
        )


def test_kill_group_reaps_a_child_that_already_exited(tmp_path):
    import subprocess

    process = subprocess.Popen(["true"], start_new_session=True)  # noqa: S603, S607
    process.wait()
    launch.kill_group(process)  # no error: the group is gone already
    assert process.returncode == 0


def test_the_work_command_answers_through_the_launcher(tmp_path):
    from evaluator.operators import get_operator

    shape = {"token_count": 3, "hidden_size": 200}
    items = [
        {"operator": "rms_norm", "init_kwargs": {}, "input_kwargs": shape},
        {"operator": "no_such_operator", "input_kwargs": {}},
        "not an object",
    ]
    finished = run_evaluator_command(
        "work", scratch=tmp_path, timeout_s=180, input_text=json.dumps(items)
    )
    assert finished.returncode == 0, finished.stderr
    answer = json.loads(finished.stdout)
    work = get_operator("rms_norm").work({}, shape)
    assert answer[0] == {
        "w_flops": {k: int(v) for k, v in work.w_flops.items() if v},
        "q_read": int(work.q_read),
        "q_write": int(work.q_write),
    }
    assert "not built into the evaluator" in answer[1]["error"]
    assert answer[2] == {"error": "not an object"}


def test_the_work_command_refuses_what_is_not_a_list(tmp_path):
    finished = run_evaluator_command(
        "work", scratch=tmp_path, timeout_s=120, input_text=json.dumps({"operator": "x"})
    )
    assert finished.returncode == 2
    assert "expected a JSON list" in finished.stderr
