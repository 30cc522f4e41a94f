"""``python -m evaluator run``: exit codes, results file, progress, and no Django."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from .conftest import REPO, TRITON_BASELINE

pytestmark = pytest.mark.slow

POISONED_DJANGO = "raise SystemExit('the evaluator imported django')\n"


def evaluator_cli(*args, tmp_path, extra_env=None):
    """Run the CLI in a subprocess where importing django kills the process."""
    poison = tmp_path / "poison"
    (poison / "django").mkdir(parents=True, exist_ok=True)
    (poison / "django" / "__init__.py").write_text(POISONED_DJANGO)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), str(poison)]),
        **(extra_env or {}),
    }
    env.pop("DJANGO_SETTINGS_MODULE", None)
    return subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "evaluator", *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def tiny_suite_file(tiny_suite, tmp_path_factory):
    path = tmp_path_factory.mktemp("suite") / "tiny-suite.json"
    path.write_text(tiny_suite.to_json())
    return path


@pytest.fixture(scope="module")
def finished_run(tiny_suite_file, tmp_path_factory):
    """One whole CLI run of two operators, read by the tests that only look at a finished
    run: (the completed process, results path, progress path)."""
    tmp_path = tmp_path_factory.mktemp("finished-run")
    out, progress = tmp_path / "r.json", tmp_path / "p.jsonl"
    completed = evaluator_cli(
        "run",
        str(TRITON_BASELINE),
        "--suite",
        str(tiny_suite_file),
        "--operators",
        "rms_norm,silu_and_mul",
        "--device",
        "cpu",
        "--seed",
        "42",
        "--time-budget-s",
        "0.02",
        "--out",
        str(out),
        "--progress",
        str(progress),
        tmp_path=tmp_path,
        extra_env={"PYTHONPROFILEIMPORTTIME": "1"},
    )
    return completed, out, progress


def test_run_writes_results_progress_and_a_table_without_django(finished_run):
    completed, out, progress = finished_run
    assert completed.returncode == 0, completed.stderr[-3000:]
    results = json.loads(out.read_text())
    assert [e["operator"] for e in results["operators"]] == ["rms_norm", "silu_and_mul"]
    assert all(s["status"] == "pass" for e in results["operators"] for s in e["shapes"])
    assert results["suite"]["shape_set"] == "smoke" and results["hardware"]["slug"] == "cpu-dev"
    importance = [e["importance"] for e in results["operators"]]
    assert sum(importance) == pytest.approx(1.0)  # renormalised among the chosen operators
    events = [json.loads(line)["event"] for line in progress.read_text().splitlines()]
    assert events[0] == "start" and events[-1] == "done"
    assert "rms_norm" in completed.stderr and "aggregate" in completed.stderr
    # No django module in the parent's import log, nor in the children's (their logs).
    logs = out.with_name(out.name + ".logs")
    child_imports = "".join(p.read_text() for p in logs.glob("*.log"))
    # The children (and the fork server they are forked from, evaluator/forkserver.py)
    # have the poisoned django on their path too: one that imported it would have died,
    # and a fork server that died would have left children exec'd, which the run says.
    assert "the child is exec'd" not in completed.stderr
    for text in (completed.stderr, child_imports):
        assert not [
            line
            for line in text.splitlines()
            if line.startswith("import time:") and "django" in line
        ]


def test_bundle_error_exits_2_and_still_writes_results(tmp_path):
    bundle = tmp_path / "empty.zip"
    bundle.write_bytes(b"")
    out = tmp_path / "r.json"
    completed = evaluator_cli(
        "run", str(bundle), "--device", "cpu", "--out", str(out), tmp_path=tmp_path
    )
    assert completed.returncode == 2
    assert "bundle:empty" in completed.stderr
    assert json.loads(out.read_text())["error"]["code"] == "bundle:empty"


def test_unknown_operator_choice_exits_2(tmp_path):
    out = tmp_path / "r.json"
    completed = evaluator_cli(
        "run",
        str(TRITON_BASELINE),
        "--device",
        "cpu",
        "--operators",
        "not_an_op",
        "--out",
        str(out),
        tmp_path=tmp_path,
    )
    assert completed.returncode == 2 and "not_an_op" in completed.stderr
    assert json.loads(out.read_text())["error"]["message"]


def test_platform_failure_exits_1(tmp_path):
    out = tmp_path / "r.json"
    completed = evaluator_cli(
        "run",
        str(TRITON_BASELINE),
        "--device",
        "cpu",
        "--hardware",
        "no-such-gpu",
        "--out",
        str(out),
        tmp_path=tmp_path,
    )
    assert completed.returncode == 1
    error = json.loads(out.read_text())["error"]
    assert error["code"].startswith("platform:")


def test_a_run_killed_midway_leaves_the_finished_operators(tmp_path, tiny_suite_file):
    """After each operator the run rewrites ``<out>.partial.json``: killed during the second
    operator, the first one's measured results are there, marked partial."""
    import signal
    import time

    out, progress = tmp_path / "r.json", tmp_path / "p.jsonl"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    process = subprocess.Popen(
        [sys.executable, "-m", "evaluator", "run", str(TRITON_BASELINE), "--suite",
         str(tiny_suite_file), "--operators", "rms_norm,silu_and_mul", "--device", "cpu",
         "--time-budget-s", "0.05", "--out", str(out), "--progress", str(progress)],
        cwd=tmp_path, env=env, start_new_session=True,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    partial = tmp_path / "r.partial.json"
    deadline = time.monotonic() + 240
    while not partial.exists() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    assert partial.exists() and not out.exists()
    document = json.loads(partial.read_text())
    assert document["partial"] is True and document["finished_at"] is None
    (first,) = document["operators"]
    assert first["operator"] == "rms_norm" and first["shapes"]
    assert all(shape["status"] == "pass" for shape in first["shapes"])
    assert document["operators_pending"] == ["silu_and_mul"]
    assert document["scores"]["aggregate"] == pytest.approx(first["score"])


def test_a_finished_run_removes_its_checkpoint(finished_run):
    completed, out, _ = finished_run
    assert completed.returncode == 0, completed.stderr[-2000:]
    assert out.exists() and not out.with_name("r.partial.json").exists()
    assert "partial" not in json.loads(out.read_text())


@pytest.mark.parametrize(
    ("value", "depth"), [("", 2), ("1", 1), ("2", 2), ("3", None), ("x", None)]
)
def test_the_start_ahead_depth_from_the_environment(monkeypatch, value, depth):
    from evaluator.cli import start_ahead_depth_from_environment
    from evaluator.errors import UserError

    monkeypatch.setenv("ATREX_START_AHEAD_DEPTH", value)
    if depth is None:
        with pytest.raises(UserError, match="set it to 1 or 2"):
            start_ahead_depth_from_environment()
    else:
        assert start_ahead_depth_from_environment() == depth
