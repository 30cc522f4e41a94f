"""The child's integrity guard: changes to clocks, torch and the harness are named."""

from __future__ import annotations

import threading
import time
import types

import pytest
import torch
from torch.overrides import TorchFunctionMode

import evaluator
import evaluator.correctness
import evaluator.timing
from evaluator.integrity import IntegrityGuard, OutsideWorkError, TamperingError


@pytest.fixture
def guard():
    return IntegrityGuard()


def test_an_untouched_process_passes(guard):
    torch.ones(8).sum()
    guard.check("now")
    guard.check_threads("now")


def test_replaced_clocks_are_named(guard, monkeypatch):
    monkeypatch.setattr(time, "perf_counter_ns", lambda: 0)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: None)
    with pytest.raises(TamperingError) as caught:
        guard.check("after a call")
    assert "time.perf_counter_ns" in caught.value.message
    assert "torch.cuda.synchronize" in caught.value.message
    assert "after a call" in caught.value.message


def test_a_swapped_function_body_in_the_harness_is_named(guard, monkeypatch):
    monkeypatch.setattr(evaluator.correctness.derive_seed, "__code__", (lambda *a: 0).__code__)
    with pytest.raises(TamperingError, match=r"evaluator\.correctness\.derive_seed\.__code__"):
        guard.check("now")


def test_a_patched_method_of_a_harness_class_is_named(guard, monkeypatch):
    monkeypatch.setattr(evaluator.timing.CpuTimer, "time_once", lambda self, fn: (1e-9, 1e-9))
    with pytest.raises(TamperingError, match=r"evaluator\.timing\.CpuTimer\.time_once"):
        guard.check("now")


def test_a_method_added_to_torch_tensor_is_named(guard, monkeypatch):
    monkeypatch.setattr(torch.Tensor, "pow", lambda self, e: self, raising=False)
    with pytest.raises(TamperingError, match=r"torch\.Tensor\.pow"):
        guard.check("now")


def test_the_only_critical_check_looks_at_clocks_and_harness_only(guard, monkeypatch):
    monkeypatch.setattr(torch, "rsqrt", lambda t: t)
    guard.check("now", critical_only=True)
    with pytest.raises(TamperingError, match=r"torch\.rsqrt"):
        guard.check("now")


def test_a_submodule_imported_later_is_not_tampering(guard, monkeypatch):
    monkeypatch.setattr(evaluator, "late_submodule", types.ModuleType("late"), raising=False)
    guard.check("now")


def test_an_active_torch_mode_is_named(guard):
    with TorchFunctionMode(), pytest.raises(TamperingError, match="torch function/dispatch mode"):
        guard.check("now")


def test_a_thread_left_running_is_outside_work(guard):
    release = threading.Event()
    worker = threading.Thread(target=release.wait, daemon=True)
    worker.start()
    try:
        with pytest.raises(OutsideWorkError, match="still running"):
            guard.check_threads("after a call")
    finally:
        release.set()
        worker.join()
    guard.check_threads("after it finished")


def test_a_lazily_filled_private_cache_is_not_tampering():
    import types as pytypes

    from evaluator.integrity import _Namespace

    module = pytypes.ModuleType("fake_lib")
    module._cached_count = None
    module.synchronize = lambda: None
    watched = _Namespace("fake_lib", module.__dict__, allow_new=True)
    module._cached_count = 1  # a library filling its own cache
    assert watched.changes() == []
    module.synchronize = lambda: "patched"  # a replaced function still counts
    assert watched.changes() == ["fake_lib.synchronize"]


SETTINGS_PROBE = r"""
import sys
import torch
from evaluator.integrity import IntegrityGuard, TamperingError
from evaluator.operators._moe_gemm import strict_fp32_matmul

guard = IntegrityGuard()
with strict_fp32_matmul():  # what the fused_moe reference does: no change
    torch.ones(4, 4) @ torch.ones(4, 4)
guard.check("after the reference")
print("reference: no change")
change = sys.argv[1]
if change == "default_dtype":
    torch.set_default_dtype(torch.float64)
elif change == "new_api":
    torch.backends.cuda.matmul.fp32_precision = "tf32"
elif change == "legacy_api":
    torch.backends.cuda.matmul.allow_tf32 = True
try:
    guard.check("after a call")
except TamperingError as error:
    print(error)
"""


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ("default_dtype", "default_dtype (torch.float32 -> torch.float64)"),
        ("new_api", "cuda.matmul.fp32_precision (ieee -> tf32)"),
        ("legacy_api", "cuda.matmul.fp32_precision (ieee -> tf32)"),
    ],
)
def test_a_changed_process_wide_torch_setting_is_tampering(change, named):
    # In a process of its own: the TF32 settings cannot be put back in this one (PyTorch
    # refuses the older API once the newer was used).
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", SETTINGS_PROBE, change],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "reference: no change", done.stdout
    assert "tampering" in lines[1] and named in lines[1], done.stdout
    assert "which the reference runs under too" in lines[1]


def test_code_is_genuine_only_when_compiled_from_the_file_it_names():
    from evaluator import measure
    from evaluator.code_origin import genuine

    assert genuine(measure.evaluate_shape.__code__)
    assert genuine(IntegrityGuard.check.__code__)  # a method, nested in a class body
    scope: dict = {}
    forged = "def evaluate_shape(*args, **kwargs):\n    return None\n"
    exec(compile(forged, measure.__file__, "exec"), scope)
    assert not genuine(scope["evaluate_shape"].__code__)
    # The same source at another line, or under a name with no file, is not genuine either.
    exec(compile("\n" * 3 + forged, measure.__file__, "exec"), scope)
    assert not genuine(scope["evaluate_shape"].__code__)
    exec(compile(forged, "<string>", "exec"), scope)
    assert not genuine(scope["evaluate_shape"].__code__)


COPY_PROBE = r"""
import copy
from evaluator.fallback_report import FallbackReport
from evaluator.integrity import IntegrityGuard

guard = IntegrityGuard()
copy.copy(FallbackReport(own_kernel_share=0.0))  # the harness's first copy of a report
guard.check("after the harness copied its own report")
print("no change")
"""


def test_the_harness_copying_its_own_objects_is_not_tampering():
    # copy.copy caches the class's slot names in its __dict__ on first use (copyreg); in a
    # fresh process that first use can fall inside a candidate's call (seen on the H200:
    # "the candidate changed ...FallbackReport.__slotnames__").
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", COPY_PROBE], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "no change"


CODE_WATCH_PROBE = r"""
import sys, tempfile
import evaluator.correctness as correctness
from evaluator.integrity import IntegrityGuard, TamperingError, confine_bundle_code

reads = []
counting = [False]

def count(event, args):  # installed first: confine_bundle_code keeps later hooks out
    if counting[0] and event == "object.__getattr__" and args[1] == "__code__":
        reads.append(args[1])

sys.addaudithook(count)

def code_reads(guard):
    reads.clear(); counting[0] = True
    guard.check("now")
    counting[0] = False
    return len(reads)

def caught(guard):
    try:
        guard.check("after the call")
    except TamperingError as exc:
        return exc.message
    return "nothing"

guard = IntegrityGuard()
print("reads before:", code_reads(guard))
bundle = tempfile.mkdtemp()
confine_bundle_code(harness_dir="evaluator", bundle_dir=bundle, guard=guard)
print("reads after:", code_reads(guard))

def own(): return 1
own.__code__ = (lambda: 2).__code__  # not a watched function: the bundle's own business
print("own swap:", caught(guard))

original = correctness.derive_seed.__code__
correctness.derive_seed.__code__ = (lambda *a: 0).__code__
correctness.derive_seed.__code__ = original  # undone before the check
print("swap undone:", caught(guard))

second = IntegrityGuard()  # a second confinement's hook is kept out by the first
confine_bundle_code(harness_dir="evaluator", bundle_dir=bundle, guard=second)
correctness.derive_seed.__defaults__ = (7,)
print("second guard:", caught(second))
"""


def test_under_the_childs_hook_code_swaps_are_recorded_not_read():
    # In the child, reading a function's __code__ is an audit event for every hook; the
    # hook records swaps of the watched functions instead, even one undone before a check.
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", CODE_WATCH_PROBE], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    lines = dict(line.split(": ", 1) for line in done.stdout.strip().splitlines())
    assert int(lines["reads before"]) > 100  # the plain guard reads every function's code
    assert lines["reads after"] == "0"
    assert lines["own swap"] == "nothing"
    assert "evaluator.correctness.derive_seed.__code__" in lines["swap undone"]
    # Without a hook of its own, a guard still compares every function's code.
    assert "evaluator.correctness.derive_seed.__code__" in lines["second guard"]
