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
