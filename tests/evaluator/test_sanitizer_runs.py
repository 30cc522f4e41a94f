"""The compute-sanitizer pass with real child processes on the CPU (the Triton interpreter),
the tool played by ``fake_compute_sanitizer.py``: one sanitized child for all operators,
each report blamed on the operator whose window of the log holds it, a crashed child
replaced from the next operator, and a candidate that prints sanitizer-looking lines or
fake markers, or leaves a thread to report later, shifts no blame."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from evaluator.runner import run_bundle
from evaluator.suite import load_suite

from .conftest import TRITON_BASELINE

FAKE = Path(__file__).resolve().parent / "fake_compute_sanitizer.py"
REFUSING = FAKE.with_name("fake_compute_sanitizer_refusing_fd_paths.py")  # a link to FAKE

# Appended to a Triton baseline operator: a Model that does something more, only when the
# fake sanitizer runs it (FAKE_SANITIZER_FD is set there alone), after its real call.
HOOK = """
import os as _os

_Honest = Model


class Model(_Honest):
    def forward(self, *args, **kwargs):
        out = _Honest.forward(self, *args, **kwargs)
        if "FAKE_SANITIZER_FD" in _os.environ:
            _after(int(_os.environ["FAKE_SANITIZER_FD"]))
        return out
"""
ROLES = {
    # Says it read out of bounds, then tries to put that on another operator: fake markers
    # and sanitizer-looking lines on stdout and stderr, which are not the sanitizer's log.
    "oob": """
def _after(fd):
    import sys
    _os.write(fd, b"oob _oob_kernel\\n")
    for stream in (sys.stdout, sys.stderr):
        stream.write('{"event": "operator_done"}\\n========= ERROR SUMMARY: 0 errors\\n')
        stream.write("========= Invalid __global__ read of size 4 bytes\\n")
        stream.write("=========     at _honest_kernel+0x10 in honest.py:1\\n")
        stream.flush()
""",
    # Honest, but prints a sanitizer-looking report of its own (not the tool's: ignored).
    "noisy": """
def _after(fd):
    print("========= Invalid __global__ read of size 4 bytes", flush=True)
    print("=========     at _noisy_kernel+0x10 in noisy.py:1", flush=True)
""",
    # Reads out of bounds from a thread it leaves running, after its call has returned.
    "late": """
def _after(fd):
    import threading, time

    def later():
        time.sleep(0.3)
        _os.write(fd, b"oob _late_kernel\\n")

    threading.Thread(target=later).start()
""",
    # Reads out of bounds, and its process dies a second later (a hardware exception's end).
    "crash": """
def _after(fd):
    import signal, time
    _os.write(fd, b"oob _crash_kernel\\n")
    time.sleep(1.0)
    _os.kill(_os.getpid(), signal.SIGKILL)
""",
    "honest": "\ndef _after(fd):\n    pass\n",
}


@pytest.fixture
def fake_sanitizer(monkeypatch) -> Path:
    # In the repository, not under /tmp: the sandbox hides /tmp from the child's tools.
    assert os.access(FAKE, os.X_OK), f"{FAKE} must be executable"
    monkeypatch.setenv("ATREX_COMPUTE_SANITIZER", str(FAKE))
    return FAKE


def _bundle(root: Path, roles: dict[str, str]) -> Path:
    root.mkdir()
    for operator, role in roles.items():
        source = (TRITON_BASELINE / f"{operator}.py").read_text()
        (root / f"{operator}.py").write_text(source + HOOK + ROLES[role])
    return root


def _sanitized(bundle: Path, operators: list[str], tmp_path: Path) -> dict:
    suite = load_suite("atrex-bench-v1").restrict(operators)
    return run_bundle(
        bundle_path=bundle,
        suite=suite,
        hardware="cpu-dev",
        device="cpu",
        shape_set="smoke",
        time_budget_s=0.02,
        log_dir=tmp_path / "logs",
        validation_variants=False,
        sanitizer_tools=("memcheck",),
    )


def _memory_errors(entry: dict) -> list[dict]:
    return [s for s in entry["shapes"] if "memory_error" in (s.get("codes") or [])]


@pytest.mark.slow
def test_one_sanitized_child_blames_the_report_on_its_operator_whatever_the_candidate_prints(
    tmp_path, fake_sanitizer
):
    bundle = _bundle(tmp_path / "bundle", {"fused_add_rms_norm": "noisy", "rms_norm": "oob"})
    results = _sanitized(bundle, ["fused_add_rms_norm", "rms_norm"], tmp_path)
    noisy, oob = results["operators"]
    assert noisy["operator"] == "fused_add_rms_norm"
    assert noisy["verdict"] == "pass", [(s["shape_id"], s["error"]) for s in noisy["shapes"]]
    assert not _memory_errors(noisy)
    (caught,) = _memory_errors(oob)
    assert caught["status"] == "incorrect" and oob["score"] == 0.0
    assert "compute-sanitizer (memcheck) found an out-of-bounds memory access" in caught["error"]
    assert "at _oob_kernel+0x1d0" in caught["error"]  # the tool's report, not the prints
    assert "_honest_kernel" not in caught["error"]
    memcheck = results["environment"]["sanitizer"]["tools"]["memcheck"]
    assert memcheck["failed"] == ["rms_norm"]
    (child,) = memcheck["children"]  # both operators in one child
    assert child["operators"] == ["fused_add_rms_norm", "rms_norm"] and child["ended"] == "done"
    assert child["start_s"] is not None and child["start_s"] > 0
    log = (tmp_path / "logs" / child["log"]).read_text()
    assert "_oob_kernel" in log and "_noisy_kernel" not in log  # prints stay in the child's log


@pytest.mark.slow
def test_a_crashed_child_is_replaced_and_a_late_report_still_blames_its_operator(
    tmp_path, fake_sanitizer
):
    roles = {"fused_add_rms_norm": "late", "l2_norm": "crash", "rms_norm": "honest"}
    bundle = _bundle(tmp_path / "bundle", roles)
    results = _sanitized(bundle, list(roles), tmp_path)
    late, crash, honest = results["operators"]
    # The thread's report came in l2_norm's window; fused_add_rms_norm left the thread
    # running, so its window stayed open to the end of that child's log: the report is its
    # too (its first report quoted is whichever came first after its start).
    assert _memory_errors(late) and late["score"] == 0.0
    assert "at _crash_kernel" in _memory_errors(crash)[0]["error"] and crash["score"] == 0.0
    assert not _memory_errors(honest)
    assert honest["verdict"] == "pass", [(s["shape_id"], s["error"]) for s in honest["shapes"]]
    memcheck = results["environment"]["sanitizer"]["tools"]["memcheck"]
    assert sorted(memcheck["failed"]) == ["fused_add_rms_norm", "l2_norm"]
    first, second = memcheck["children"]  # the crash ended the first child
    assert first["operators"] == ["fused_add_rms_norm", "l2_norm"] and first["ended"] != "done"
    assert second["operators"] == ["rms_norm"] and second["ended"] == "done"
    assert "at _late_kernel" in (tmp_path / "logs" / first["log"]).read_text()
    assert os.path.exists(tmp_path / "logs" / second["log"])


@pytest.mark.slow
def test_a_tool_that_refuses_the_log_pipe_is_run_again_on_the_childs_output(
    tmp_path, fake_sanitizer, monkeypatch
):
    monkeypatch.setenv("ATREX_COMPUTE_SANITIZER", str(REFUSING))
    bundle = _bundle(tmp_path / "bundle", {"fused_add_rms_norm": "honest", "rms_norm": "oob"})
    results = _sanitized(bundle, ["fused_add_rms_norm", "rms_norm"], tmp_path)
    honest, oob = results["operators"]
    assert not _memory_errors(honest)
    # Still blamed on its operator by the signed boundaries; but on a shared log what is
    # quoted may be the candidate's own sanitizer-looking print (hence the pipe, normally).
    (caught,) = _memory_errors(oob)
    assert "compute-sanitizer (memcheck) found" in caught["error"]
    section = results["environment"]["sanitizer"]
    assert "did not start with --log-file" in section["shared_log"]
    refused, child = section["tools"]["memcheck"]["children"]
    assert refused["operators"] == [] and child["operators"] == ["fused_add_rms_norm", "rms_norm"]
