"""``evaluator.compile_ahead`` on the CPU: which records are kept and which fit a revised
kernel, what the recorder keeps, and how a campaign's rounds hand them on. What Triton
compiles from them is checked on the GPU (``test_compile_ahead_gpu.py``)."""

from __future__ import annotations

import json
import os
import threading
import types
from pathlib import Path

import pytest

from evaluator import compile_ahead
from evaluator.compile_ahead import MAX_SPEC_BYTES, MAX_SPECS, Recorder, fitted, valid_specs
from evaluator.runner import ChildOutcome
from evaluator.sandbox import Sandbox, SandboxPolicy
from evaluator.serve import RoundStarter

jit = pytest.importorskip("triton.runtime.jit")


def _norm_kernel(x_ptr, out_ptr, n, BLOCK):  # noqa: N803 (a kernel's parameters)
    pass


def _renamed_kernel(x_ptr, y_ptr, n, BLOCK):  # noqa: N803
    pass


def _record(names: list[str], function: str = "_norm_kernel") -> dict[str, str]:
    data = {"name": "atrex_candidate_rms_norm_0badcafe._norm_kernel", "key": "k"}
    data["signature"] = {name: "i32" for name in names}
    return {"function": function, "data": json.dumps(data)}


def test_only_well_formed_records_of_bounded_size_are_kept():
    good = _record(["x_ptr", "out_ptr", "n", "BLOCK"])
    kept = valid_specs(
        [
            good,
            {"function": "f"},  # no data
            {"function": 3, "data": "{}"},
            {"function": "f", "data": "x" * (MAX_SPEC_BYTES + 1)},
            {"function": "", "data": "{}"},
            "not a record",
        ]
    )
    assert kept == [good]
    assert valid_specs({"function": "f", "data": "{}"}) == []  # not a list
    assert len(valid_specs([good] * (MAX_SPECS + 10))) == MAX_SPECS


def test_a_record_fits_only_a_function_with_the_same_parameters_in_order():
    function = jit.JITFunction(_norm_kernel)
    data = fitted(function, _record(["x_ptr", "out_ptr", "n", "BLOCK"])["data"])
    assert data is not None
    # Renamed for this round's module (the candidate's module name changes every round).
    assert json.loads(data)["name"] == function._fn_name
    assert fitted(function, _record(["x_ptr", "y_ptr", "n", "BLOCK"])["data"]) is None
    assert fitted(function, _record(["out_ptr", "x_ptr", "n", "BLOCK"])["data"]) is None
    assert fitted(function, "not json") is None
    assert fitted(function, json.dumps({"signature": ["x_ptr"]})) is None


def test_the_modules_jit_functions_are_found_by_name_and_others_ignored():
    module = types.ModuleType("candidate")
    module._norm_kernel = jit.JITFunction(_norm_kernel)
    module.helper = lambda: None
    module.number = 3
    other = types.ModuleType("helpers")
    other._renamed_kernel = jit.JITFunction(_renamed_kernel)
    other._norm_kernel = jit.JITFunction(_renamed_kernel)  # the first module's name wins
    found = compile_ahead.jit_functions([module, other])
    assert set(found) == {"_norm_kernel", "_renamed_kernel"}
    assert found["_norm_kernel"] is module._norm_kernel


def test_records_that_fit_no_function_are_skipped_without_triton_compiling():
    module = types.ModuleType("candidate")
    module._norm_kernel = jit.JITFunction(_norm_kernel)
    result = compile_ahead.compile_ahead(
        [module],
        [
            _record(["x_ptr", "y_ptr", "n", "BLOCK"]),  # its parameters changed
            _record(["x_ptr", "out_ptr", "n", "BLOCK"], function="_gone_kernel"),
            {"function": "_norm_kernel"},  # malformed: not even counted
        ],
    )
    assert result["compiled"] == 0 and result["failed"] == 0
    assert result["skipped"] == 2 and result["forks"] == 0


class _Kernel:
    """A compiled kernel's state as Triton keeps it: ``function`` set at the first launch."""

    def __init__(self, function):
        self.function = function


def _compile(recorder_hook, name, data):
    recorder_hook(
        key="k",
        repr=name,
        fn=types.SimpleNamespace(name=name),
        compile={"key": "k", "specialization_data": data},
        is_manual_warmup=False,
        already_compiled=False,
    )


def test_the_recorder_keeps_what_was_launched_once_each_and_chains_the_hook(monkeypatch):
    knobs = pytest.importorskip("triton.knobs")
    calls = []
    monkeypatch.setattr(knobs.runtime, "jit_post_compile_hook", lambda **kw: calls.append(kw))
    recorder = Recorder()
    assert recorder.install()
    hook = knobs.runtime.jit_post_compile_hook
    _compile(hook, "_norm_kernel", '{"a": 1}')
    _compile(hook, "_norm_kernel", '{"a": 1}')  # the same specialisation again
    _compile(hook, "_norm_kernel", '{"a": 2}')
    assert len(calls) == 3, "the hook installed before the recorder's was not called"
    with recorder.paused():
        _compile(hook, "_norm_kernel", '{"a": 3}')  # compiled ahead: reported apart
    launched = {"function": "_norm_kernel", "data": '{"a": 3}'}
    idle = {"function": "_norm_kernel", "data": '{"a": 4}'}
    recorder.ahead(launched, _Kernel(function=object()))
    recorder.ahead(idle, _Kernel(function=None))
    assert recorder.specs() == [
        {"function": "_norm_kernel", "data": '{"a": 1}'},
        {"function": "_norm_kernel", "data": '{"a": 2}'},
        launched,
    ]


def test_the_launch_is_read_from_the_kernels_state_or_unknown():
    assert compile_ahead.launched(_Kernel(function=None)) is False
    assert compile_ahead.launched(_Kernel(function=1)) is True
    assert compile_ahead.launched(object()) is None
    assert compile_ahead.launched(None) is None


def _rounds(tmp_path: Path, **options) -> RoundStarter:
    policy = SandboxPolicy.from_environment(mode="best-effort")
    sandbox = Sandbox(policy=policy, scratch=tmp_path, device="cpu")
    return RoundStarter(
        sandbox=sandbox, sandbox_report={}, device="cpu", root=tmp_path, triton_cache=False,
        **options,
    )  # fmt: skip


def test_a_campaigns_next_round_gets_what_its_operators_last_round_compiled(tmp_path):
    rounds = _rounds(tmp_path)
    assert rounds.job_extras("rms_norm") == {"record_compiles": True}
    first = [_record(["x_ptr", "out_ptr", "n", "BLOCK"])]
    rounds.compiled("rms_norm", [*first, {"function": 1}])
    assert rounds.job_extras("rms_norm") == {"record_compiles": True, "compile_ahead": first}
    assert rounds.job_extras("silu_and_mul") == {"record_compiles": True}
    rounds.compiled("rms_norm", [])  # a round that compiled nothing keeps the last list
    assert rounds.job_extras("rms_norm")["compile_ahead"] == first
    second = [_record(["x_ptr", "out_ptr", "n", "BLOCK", "ROWS"])]
    rounds.compiled("rms_norm", second)
    assert rounds.job_extras("rms_norm")["compile_ahead"] == second


def test_with_compiling_ahead_off_rounds_still_record_but_get_nothing(tmp_path, monkeypatch):
    from evaluator.serve import compile_ahead_enabled

    rounds = _rounds(tmp_path, compile_ahead=False)
    rounds.compiled("rms_norm", [_record(["x_ptr", "out_ptr", "n", "BLOCK"])])
    assert rounds.job_extras("rms_norm") == {"record_compiles": True}
    monkeypatch.setenv("ATREX_COMPILE_AHEAD", "0")
    assert not compile_ahead_enabled()
    monkeypatch.setenv("ATREX_COMPILE_AHEAD", "1")
    assert compile_ahead_enabled()


def test_a_run_outside_a_campaign_neither_records_nor_compiles_ahead(tmp_path):
    from evaluator.runner import ChildStarter

    policy = SandboxPolicy.from_environment(mode="best-effort")
    sandbox = Sandbox(policy=policy, scratch=tmp_path, device="cpu")
    starter = ChildStarter(sandbox=sandbox, device="cpu", bundle_dir=tmp_path, log_dir=tmp_path)
    assert starter.job_extras("rms_norm") == {}


def test_the_time_compiling_ahead_is_a_phase_of_its_own():
    outcome = ChildOutcome()
    for mark, at in (
        ("hello", 0.1), ("ready", 0.2), ("imported", 0.3), ("compiled_ahead", 1.0),
        ("shape_start", 1.1), ("done", 3.0),
    ):  # fmt: skip
        outcome.mark(mark, at)
    phases = outcome.phases()
    assert phases["precompile"] == pytest.approx(0.7)
    assert phases["variants"] == pytest.approx(0.1)
    without = ChildOutcome()
    for mark, at in (("hello", 0.1), ("ready", 0.2), ("imported", 0.3), ("shape_start", 1.1)):
        without.mark(mark, at)
    assert "precompile" not in without.phases()
    assert without.phases()["variants"] == pytest.approx(0.8)


FORKING_CHILD = """
import os, time
block = bytearray(200 * 1024 * 1024)
for index in range(0, len(block), 4096):  # every page resident
    block[index] = 1
forks = []
for _ in range(3):  # copies of the child, as compile_ahead makes: they share its pages
    pid = os.fork()
    if pid == 0:
        time.sleep(1.5)
        os._exit(0)
    forks.append(pid)
print("ready", flush=True)
for pid in forks:
    os.waitpid(pid, 0)
"""


def test_young_forks_of_the_child_count_their_own_memory_not_the_childs_again():
    import subprocess
    import sys

    from evaluator.sandbox import descendants, tree_rss_bytes

    process = subprocess.Popen(
        [sys.executable, "-c", FORKING_CHILD], stdout=subprocess.PIPE, start_new_session=True
    )
    try:
        assert process.stdout.readline().strip() == b"ready"
        pids = descendants(process.pid, None)
        assert len(pids) == 4, pids
        with open(f"/proc/{process.pid}/statm", "rb") as handle:
            own = int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        assert own > 200 * 1024 * 1024
        # Each fork's resident set is the child's 200 MB again: counted whole, the tree
        # would hold four times the child's memory.
        assert tree_rss_bytes(process.pid, pids=pids) < own * 1.5
    finally:
        process.wait(timeout=30)


def test_what_runs_meanwhile_runs_once_even_with_nothing_to_compile():
    module = types.ModuleType("candidate")
    module._norm_kernel = jit.JITFunction(_norm_kernel)
    ran = []
    result = compile_ahead.compile_ahead(
        [module],
        [_record(["x_ptr", "y_ptr", "n", "BLOCK"])],  # fits nothing: no compile, no fork
        meanwhile=lambda: ran.append(threading.current_thread() is threading.main_thread()),
    )
    assert ran == [True] and result["skipped"] == 1 and result["forks"] == 0


def test_each_launcher_is_built_by_one_fork_only():
    function = jit.JITFunction(_norm_kernel)
    signature = {"x_ptr": "*bf16", "out_ptr": "*bf16", "n": "i32", "BLOCK": "constexpr"}

    def work(constants, **changes):
        data = json.dumps({"signature": {**signature, **changes}, "constants": constants})
        return (function, data, {})

    items = [
        work({"BLOCK": 1024}),
        work({"BLOCK": 4096}),  # another block: the same launcher
        work({"BLOCK": 1024, "n": 1}),  # n specialised to a constant: another launcher
        work({"BLOCK": 2048, "n": 1}),
        work({"BLOCK": 1024}, out_ptr="*fp32"),  # other types: another launcher
        (function, "not json", {}),
    ]
    assert compile_ahead.launcher_builders(items) == {items[0][1], items[2][1], items[4][1]}
