"""The compute-sanitizer pass with real child processes on the CPU (the Triton interpreter),
the tool played by ``fake_compute_sanitizer.py``: one sanitized child for all operators,
each report blamed on the operator whose window of the log holds it, a crashed child
replaced from the next operator, and a candidate that prints sanitizer-looking lines or
fake markers, or leaves a thread to report later, shifts no blame. The tools' children
start while the last operator is measured, wait for their jobs until every operator's child
has ended, and run at once where there are sandbox users enough (else one after another);
racecheck skips the operators whose compiled kernels use no shared memory, and an operator
memcheck failed keeps memcheck's report."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest

from evaluator.runner import run_bundle
from evaluator.sandbox import SandboxError
from evaluator.sanitizer import smallest_shape
from evaluator.suite import Suite, load_suite

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
    # Reads out of bounds from a thread it leaves running, after its call has returned: once
    # the next operator's call has been reported (so in that one's window, after its report;
    # a fixed delay raced with the next operator's start on a loaded machine).
    "late": """
def _after(fd):
    import threading, time

    def later():
        deadline = time.monotonic() + 60
        while "ATREX_TEST_REPORTED" not in _os.environ and time.monotonic() < deadline:
            time.sleep(0.01)
        _os.write(fd, b"oob _late_kernel\\n")

    threading.Thread(target=later).start()
""",
    # Reads out of bounds, and its process dies a second later (a hardware exception's end).
    "crash": """
def _after(fd):
    import signal, time
    _os.write(fd, b"oob _crash_kernel\\n")
    _os.environ["ATREX_TEST_REPORTED"] = "1"
    time.sleep(1.0)
    _os.kill(_os.getpid(), signal.SIGKILL)
""",
    "honest": "\ndef _after(fd):\n    pass\n",
    # Its call runs a cuBLAS GEMM in which racecheck reports a hazard (as on the H200).
    "library_race": """
def _after(fd):
    _os.write(fd, b"race nvjet_sm90_tst_64x8_64x16_4x1_v_bz_bias_TNT\\n")
""",
    # A race inside its own compiled kernel.
    "own_race": """
def _after(fd):
    _os.write(fd, b"race _silu_kernel\\n")
""",
}
# What the Triton interpreter never writes: a compiled kernel in the regular child's own
# Triton cache, as Triton lays it out (<key>/<name>.json with the "shared" bytes it launches
# with, <name>.ptx, and the group file that names them by absolute path). Written at import
# by the regular child only (the sanitized one has FAKE_SANITIZER_FD and a copy of it).
CACHE_ENTRY = """
def _compiled(name, shared, ptx):
    import json
    root = _os.environ.get("TRITON_CACHE_DIR")
    if not root or "FAKE_SANITIZER_FD" in _os.environ:
        return
    folder = _os.path.join(root, "KEY" + name.upper())
    _os.makedirs(folder, exist_ok=True)
    files = {f"{name}.json": json.dumps({"name": name, "shared": shared, "num_warps": 4}),
             f"{name}.ptx": ptx}
    for file, text in files.items():
        with open(_os.path.join(folder, file), "w") as handle:
            handle.write(text)
    group = {"child_paths": {file: _os.path.join(folder, file) for file in files}}
    with open(_os.path.join(folder, f"__grp__{name}.json"), "w") as handle:
        json.dump(group, handle)
"""
PTX_WITHOUT_SHARED = ".visible .entry {name}()\n{{\n\tld.global.b32 %r1, [%rd1];\n\tret;\n}}\n"
PTX_WITH_SHARED = (
    ".extern .shared .align 16 .b8 global_smem[];\n.visible .entry {name}()\n{{\n"
    "\tst.shared.b32 [%r2], %r1;\n\tbar.sync 0;\n\tld.shared.b32 %r3, [%r4];\n\tret;\n}}\n"
)


def _kernel(name: str, shared: int, ptx: str) -> str:
    """A role's line that writes one compiled kernel into the regular child's cache."""
    return CACHE_ENTRY + f"\n_compiled({name!r}, {shared}, {ptx.format(name=name)!r})\n"


@pytest.fixture
def fake_sanitizer(monkeypatch) -> Path:
    # In the repository, not under /tmp: the sandbox hides /tmp from the child's tools.
    assert os.access(FAKE, os.X_OK), f"{FAKE} must be executable"
    monkeypatch.setenv("ATREX_COMPUTE_SANITIZER", str(FAKE))
    return FAKE


def _bundle(root: Path, roles: dict[str, str], extra: dict[str, str] | None = None) -> Path:
    root.mkdir()
    for operator, role in roles.items():
        source = (TRITON_BASELINE / f"{operator}.py").read_text()
        more = (extra or {}).get(operator, "")
        (root / f"{operator}.py").write_text(source + HOOK + ROLES[role] + more)
    return root


def _sanitized_shapes_only(operators: list[str]) -> Suite:
    """The v1 suite cut down to ``operators`` and, of their smoke shapes, the one the pass
    sanitizes (the smallest): what these tests prove is about children, logs and blame,
    never about a shape, and the other smoke shapes were measured only to be ignored."""
    suite = load_suite("atrex-bench-v1").restrict(operators)
    sanitized = {
        (operator, smallest_shape(suite.shapes_for(operator, "smoke")).shape_id)
        for operator in operators
    }
    kept = tuple(s for s in suite.shapes if not s.smoke or (s.operator, s.shape_id) in sanitized)
    return replace(suite, shapes=kept)


def test_the_sanitized_suite_keeps_one_smoke_shape_an_operator_the_one_sanitized():
    operators = ["fused_add_rms_norm", "l2_norm", "rms_norm"]
    full = load_suite("atrex-bench-v1")
    trimmed = _sanitized_shapes_only(operators)
    for operator in operators:
        (kept,) = trimmed.shapes_for(operator, "smoke")
        assert kept == smallest_shape(full.shapes_for(operator, "smoke"))
        assert trimmed.shapes_for(operator, "full") == full.shapes_for(operator, "full")


def _sanitized(bundle: Path, operators: list[str], tmp_path: Path) -> dict:
    suite = _sanitized_shapes_only(operators)
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


def _overlap(a: dict, b: dict) -> bool:
    """Whether two sanitized children were running at the same time (their job to their
    exit, counted from the pass's beginning)."""
    return a["job_at_s"] < b["gone_at_s"] and b["job_at_s"] < a["gone_at_s"]


@pytest.mark.slow
def test_the_tools_start_ahead_run_at_once_and_racecheck_skips_kernels_without_shared_memory(
    tmp_path, fake_sanitizer, tiny_suite
):
    roles = {"fused_add_rms_norm": "honest", "rms_norm": "oob", "silu_and_mul": "honest"}
    kernels = {
        "rms_norm": _kernel("_rms_kernel", 16, PTX_WITH_SHARED),
        "silu_and_mul": _kernel("_silu_kernel", 0, PTX_WITHOUT_SHARED),
    }
    bundle = _bundle(tmp_path / "bundle", roles, kernels)
    results = run_bundle(
        bundle_path=bundle,
        suite=tiny_suite,
        hardware="cpu-dev",
        device="cpu",
        time_budget_s=0.02,
        log_dir=tmp_path / "logs",
        validation_variants=False,
        start_ahead=True,
        sanitizer_tools=("memcheck", "racecheck"),
    )
    entries = {e["operator"]: e for e in results["operators"]}
    section = results["environment"]["sanitizer"]
    memcheck, racecheck = section["tools"]["memcheck"], section["tools"]["racecheck"]

    # racecheck: not for silu_and_mul, whose one compiled kernel uses no shared memory; for
    # rms_norm (its kernel does) and fused_add_rms_norm (no compiled kernel: cannot tell).
    assert racecheck["skipped"] == {
        "silu_and_mul": "none of its 1 compiled kernel(s) uses shared memory"
    }
    assert racecheck["operators"] == ["fused_add_rms_norm", "rms_norm"]
    assert racecheck["reasons"]["rms_norm"].startswith("shared memory in _rms_kernel")
    assert racecheck["reasons"]["fused_add_rms_norm"].startswith("cannot tell")
    assert memcheck["operators"] == ["fused_add_rms_norm", "rms_norm", "silu_and_mul"]

    # Verdicts as when the tools ran in turn: rms_norm's out-of-bounds read is memcheck's
    # (racecheck saw it too, but an operator memcheck failed keeps memcheck's report).
    (caught,) = _memory_errors(entries["rms_norm"])
    assert "compute-sanitizer (memcheck) found an out-of-bounds" in caught["error"]
    assert memcheck["failed"] == ["rms_norm"] and racecheck["failed"] == []
    (race_child,) = racecheck["children"]
    assert "_oob_kernel" in (tmp_path / "logs" / race_child["log"]).read_text()
    for honest in ("fused_add_rms_norm", "silu_and_mul"):
        assert entries[honest]["verdict"] == "pass", entries[honest]["shapes"]

    # Both tools' children were started while the last operator was measured (each had
    # been up for a good part of that operator's turn when its job came, where one started
    # for the pass is up a moment) and ran at the same time. A quarter of the turn: beside
    # two busy loops they were up for 0.8-1.0 of it, and in a loaded fresh-clone run for
    # 0.47 (0.3 s of a 0.64-s turn), which the half this asked before failed.
    (mem_child,) = memcheck["children"]
    last = entries["silu_and_mul"]
    for child in (mem_child, race_child):
        assert child["ended"] == "done"
        assert child["ahead_s"] > last["wall_s"] / 4, (child, last["wall_s"])
    assert section["concurrent"] == 2 and _overlap(mem_child, race_child)
    assert section["pass_s"] >= max(memcheck["seconds"], racecheck["seconds"])


@pytest.mark.slow
def test_a_race_racecheck_reports_inside_a_library_kernel_only_is_not_the_submissions(
    tmp_path, fake_sanitizer
):
    roles = {"rms_norm": "library_race", "silu_and_mul": "own_race"}
    kernels = {
        "rms_norm": _kernel("_rms_kernel", 16, PTX_WITH_SHARED),
        "silu_and_mul": _kernel("_silu_kernel", 16, PTX_WITH_SHARED),
    }
    bundle = _bundle(tmp_path / "bundle", roles, kernels)
    results = run_bundle(
        bundle_path=bundle,
        suite=_sanitized_shapes_only(list(roles)),
        hardware="cpu-dev",
        device="cpu",
        time_budget_s=0.02,
        log_dir=tmp_path / "logs",
        validation_variants=False,
        sanitizer_tools=("racecheck",),
    )
    entries = {e["operator"]: e for e in results["operators"]}
    racecheck = results["environment"]["sanitizer"]["tools"]["racecheck"]
    assert racecheck["operators"] == ["rms_norm", "silu_and_mul"]
    # cuBLAS's hazard stays cuBLAS's: the operator passes, with a warning and the digest.
    assert entries["rms_norm"]["verdict"] == "pass", entries["rms_norm"]["shapes"]
    assert _memory_errors(entries["rms_norm"]) == []
    assert any("inside library kernels only" in w for w in entries["rms_norm"]["warnings"])
    (headline,) = racecheck["library_races"]["rms_norm"]
    assert "nvjet_sm90_tst_64x8_64x16_4x1_v_bz_bias_TNT" in headline
    # A hazard in its own kernel fails it.
    (caught,) = _memory_errors(entries["silu_and_mul"])
    assert "a shared-memory data race" in caught["error"] and "_silu_kernel" in caught["error"]
    assert racecheck["failed"] == ["silu_and_mul"]


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="switching users needs root")
@pytest.mark.parametrize("missing", ["third", "second"])
def test_with_fewer_sandbox_users_fewer_children_start_ahead_and_run_at_once(
    tmp_path, fake_sanitizer, tiny_suite, monkeypatch, missing
):
    # Without a third user only memcheck's child starts beside the last operator's, and
    # racecheck's at the pass; without a second, none starts ahead and the tools take turns.
    def refused(*args):
        raise SandboxError(f"no {missing} user here")

    monkeypatch.setattr(f"evaluator.sandbox.resolve_{missing}_user", refused)
    roles = {"rms_norm": "oob", "silu_and_mul": "honest"}  # fused_add_rms_norm: missing
    bundle = _bundle(tmp_path / "bundle", roles)
    results = run_bundle(
        bundle_path=bundle,
        suite=tiny_suite,
        hardware="cpu-dev",
        device="cpu",
        time_budget_s=0.02,
        log_dir=tmp_path / "logs",
        validation_variants=False,
        start_ahead=True,
        sanitizer_tools=("memcheck", "racecheck"),
    )
    entries = {e["operator"]: e for e in results["operators"]}
    assert entries["fused_add_rms_norm"]["status"] == "missing"
    section = results["environment"]["sanitizer"]
    memcheck, racecheck = section["tools"]["memcheck"], section["tools"]["racecheck"]
    assert memcheck["operators"] == racecheck["operators"] == ["rms_norm", "silu_and_mul"]
    (caught,) = _memory_errors(entries["rms_norm"])
    assert "compute-sanitizer (memcheck) found an out-of-bounds" in caught["error"]
    assert memcheck["failed"] == ["rms_norm"] and racecheck["failed"] == []
    assert entries["silu_and_mul"]["verdict"] == "pass"
    (mem_child,) = memcheck["children"]
    (race_child,) = racecheck["children"]
    turn = entries["silu_and_mul"]["wall_s"]
    assert race_child["ahead_s"] < turn / 2  # started for the pass
    if missing == "third":
        assert mem_child["ahead_s"] > turn / 2  # started during the last operator's turn
        assert section["concurrent"] == 2 and _overlap(mem_child, race_child)
    else:
        assert mem_child["ahead_s"] < turn / 2
        assert section["concurrent"] == 1 and not _overlap(mem_child, race_child)
        assert results["environment"]["start_ahead"] is False
