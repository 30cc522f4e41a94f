"""Fallback attribution on CPU: PyTorch compute inside a candidate's call is caught."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from evaluator import elf_symbols
from evaluator.counted_time import SCHEDSTAT, CountedClock
from evaluator.elf_symbols import (
    cxx_qualified_name,
    itanium_qualified_name,
    real_path,
    real_path_resolver,
    remember_real_paths,
    shared_object_function_names,
)
from evaluator.fallback import measure_fallback, monitor_for, prepare_monitoring, report_for
from evaluator.fallback_cpu import FallbackMonitor, is_allowed_op
from evaluator.fallback_cuda import (
    MEMCPY,
    MEMSET,
    NEUTRAL,
    OTHER,
    OWN,
    CudaFallbackMonitor,
    DeviceActivity,
    KernelOrigins,
    activities_from_profile,
    attribution_report,
    classify_activity,
    device_only_profiler_config,
    kernel_origins,
)
from evaluator.fallback_report import NO_KERNEL_WARNING, NO_MONITOR_WARNING
from evaluator.operators import get_operator

from .conftest import PYTORCH_EAGER, TRITON_BASELINE

CPU = torch.device("cpu")
THRESHOLD = 0.8
SHAPES = {
    "rms_norm": {"token_count": 8, "hidden_size": 200},
    "silu_and_mul": {"shape": [8, 600]},
    "fused_add_rms_norm": {"token_count": 8, "hidden_size": 300},
}

TRIVIAL_TRITON_PART = """
import torch
import triton
import triton.language as tl
from torch import nn


@triton.jit
def _touch(out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(out_ptr + offsets, mask=mask), mask=mask)


class Model(nn.Module):
    def __init__(self, eps=1e-6):
        super().__init__()
        self.eps = eps

    def forward(self, x, weight):
        xf = x.float()
        out = (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
               * weight.float()).to(x.dtype)
        _touch[(1,)](out, 16, BLOCK=16)  # a real Triton launch that does nothing useful
        return out
"""

SMALL_TORCH_HELPER = """
import torch
from torch import nn
from triton_rms import Model as TritonModel


class Model(TritonModel):
    def forward(self, x, weight):
        # A tiny torch op on the (H,) weight; the (T, H) work stays in Triton.
        return super().forward(x, weight.float().to(weight.dtype))
"""


def load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def own_share(model, operator: str, own_code_dir: Path | None = None, **input_kwargs):
    spec = get_operator(operator)
    kwargs = input_kwargs or SHAPES[operator]
    inputs = spec.make_inputs(device=CPU, seed=3, **kwargs)
    work = spec.work({}, kwargs)
    with torch.inference_mode():
        return measure_fallback(
            lambda: model(**inputs),
            device=CPU,
            q_bytes=work.q_read + work.q_write,
            own_code_dir=own_code_dir,
        )


@pytest.mark.parametrize("operator", sorted(SHAPES))
def test_on_cpu_own_time_is_time_in_the_bundles_own_triton_kernels(operator):
    # With the bundle's folder, the share is also bounded by the time inside launches of
    # its own Triton kernels: the Triton example spends nearly all its call there...
    triton = load(TRITON_BASELINE / f"{operator}.py", f"own_triton_{operator}").Model()
    report = own_share(triton, operator, own_code_dir=TRITON_BASELINE)
    assert report.share_in_own_kernels is not None and report.share_in_own_kernels > 0.8
    assert report.own_kernel_share >= THRESHOLD and report.own_s > 0
    # ... and the same kernels counted from another folder are not the bundle's own.
    elsewhere = own_share(triton, operator, own_code_dir=PYTORCH_EAGER)
    assert elsewhere.share_in_own_kernels == 0.0 and elsewhere.own_kernel_share == 0.0
    assert elsewhere.top_ops[0]["op"].startswith("outside its Triton kernels")


@pytest.mark.parametrize("operator", sorted(SHAPES))
def test_pure_pytorch_example_is_flagged(operator):
    model = load(PYTORCH_EAGER / f"{operator}.py", f"eager_{operator}").Model()
    report = own_share(model, operator)
    assert report.own_kernel_share < THRESHOLD
    assert report.share_by_time < THRESHOLD  # flagged by time alone, too
    assert report.top_ops and report.top_ops[0]["op"].startswith("aten.")


def test_a_call_the_host_was_taken_from_does_not_make_pytorch_look_own():
    # Pure PyTorch work; in one call of three the process loses the CPU (a busy host, here
    # a sleep) outside any PyTorch op. Over the three calls' total that wait made the time
    # share 85 % "own" on a loaded CI host; each call's own share, taken at the median,
    # stays what PyTorch's calls are.
    x = torch.randn(256, 1024)
    calls = [0]

    def work():
        calls[0] += 1
        if calls[0] == 2:
            time.sleep(0.05)
        return torch.nn.functional.silu(x) * x.sum(-1, keepdim=True)

    with torch.inference_mode():
        report = measure_fallback(work, device=CPU, q_bytes=None)
    assert calls[0] == 3
    assert report.share_by_time < 0.5, report
    assert report.own_kernel_share < THRESHOLD


BUSY_LOOP = "import time\nend = time.monotonic() + {seconds}\nwhile time.monotonic() < end: pass\n"


@contextlib.contextmanager
def busy_cores(processes: int, seconds: float = 120) -> Iterator[None]:
    """``processes`` busy-loop processes competing for the cores (each also ends by itself
    after ``seconds``, should this process die first); killed on leaving."""
    code = BUSY_LOOP.format(seconds=seconds)
    load = [subprocess.Popen([sys.executable, "-c", code]) for _ in range(processes)]
    try:
        time.sleep(0.2)  # let them start spinning
        yield
    finally:
        for process in load:
            process.kill()
        for process in load:
            process.wait()


HELPER_THREAD_PART = """
import threading

import numpy as np
import torch
import triton
import triton.language as tl
from torch import nn


@triton.jit
def _touch(out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(out_ptr + offsets, mask=mask), mask=mask)


def _bf16_to_f32(t):
    return (t.view(torch.int16).numpy().astype(np.int32) << 16).view(np.float32)


def _rms_norm(x, weight, eps, found):
    xf, wf = _bf16_to_f32(x), _bf16_to_f32(weight)
    for _ in range(50):  # the work of a large shape, in NumPy
        result = xf / np.sqrt((xf * xf).mean(-1, keepdims=True) + eps) * wf
    bits = result.view(np.int32)
    found.append(((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.int16))


class Model(nn.Module):
    def __init__(self, eps=1e-6):
        super().__init__()
        self.eps = eps

    def forward(self, x, weight):
        # Not this thread's clock: the work is a helper's, this thread only waits for it.
        found = []
        helper = threading.Thread(target=_rms_norm, args=(x, weight, self.eps, found))
        helper.start()
        helper.join()
        out = torch.from_numpy(found[0]).view(torch.bfloat16)
        _touch[(1,)](out, 16, BLOCK=16)  # a real launch of its own, doing nothing useful
        return out
"""


@pytest.mark.slow
def test_honest_triton_kernel_stays_own_while_other_processes_load_the_cores(tmp_path):
    # Four busy loops on a 2-core host take the process off the CPU at random points; with
    # wall time, a wait that fell outside the kernel launch made one call in about six of
    # this smoke shape an own share under 0.8 (as low as 0.32). CPU time does not run while
    # the process waits. Each call is its own measurement here (the runner takes the
    # median of three), so one unlucky call would show.
    operator, shape = "rms_norm", {"token_count": 1, "hidden_size": 128}
    honest = load(TRITON_BASELINE / f"{operator}.py", "loaded_triton_rms_norm").Model()
    eager = load(PYTORCH_EAGER / f"{operator}.py", "loaded_eager_rms_norm").Model()
    (tmp_path / "cheat.py").write_text(TRIVIAL_TRITON_PART)
    cheat = load(tmp_path / "cheat.py", "loaded_cheat_rms_norm").Model()
    spec = get_operator(operator)
    inputs = spec.make_inputs(device=CPU, seed=3, **shape)

    def measure(model, own_code_dir, calls=1):
        return measure_fallback(
            lambda: model(**inputs),
            device=CPU,
            q_bytes=None,
            calls=calls,
            own_code_dir=own_code_dir,
        )

    with torch.inference_mode():
        for model in (honest, eager, cheat):
            model(**inputs)  # compiled and warm before the load starts
        # Two busy loops a core (four on the 2-core CI host), whatever the host's size.
        with busy_cores(processes=min(16, max(4, 2 * len(os.sched_getaffinity(0))))):
            honest_shares = [measure(honest, TRITON_BASELINE).own_kernel_share for _ in range(40)]
            eager_reports = [measure(eager, None, calls=3) for _ in range(5)]
            cheat_reports = [measure(cheat, tmp_path, calls=3) for _ in range(5)]
    assert min(honest_shares) >= THRESHOLD, sorted(honest_shares)
    # The same load does not make PyTorch look own, by time alone or in own kernels.
    assert max(r.share_by_time for r in eager_reports) < THRESHOLD
    assert max(r.own_kernel_share for r in eager_reports) < THRESHOLD
    # The trivial Triton part's interpreted launch is real time in the bundle's own code,
    # so by time alone the cheat sits near the threshold in the interpreter (0.80-0.81
    # was seen under this load, in 2 of 5 whole runs on 2026-12-02); the verdict's share
    # takes the work done in its own kernels, which stays far below.
    assert max(r.own_kernel_share for r in cheat_reports) < THRESHOLD
    assert max(r.share_in_own_kernels for r in cheat_reports) < THRESHOLD


def test_work_in_a_helper_thread_the_call_waits_for_is_not_own(tmp_path):
    # The shares count the calling thread's waits for anything but a CPU (the join here)
    # as the wall clock did: its CPU time alone would see the one trivial launch and a join
    # that costs no CPU, and call this own (0.84).
    (tmp_path / "helper_thread.py").write_text(HELPER_THREAD_PART)
    model = load(tmp_path / "helper_thread.py", "helper_thread_rms_norm").Model()
    shape = {"token_count": 64, "hidden_size": 1024}
    spec = get_operator("rms_norm")
    inputs = spec.make_inputs(device=CPU, seed=3, **shape)
    expected = spec.build_reference({})(**inputs)
    with torch.inference_mode():
        report = measure_fallback(
            lambda: model(**inputs), device=CPU, q_bytes=None, own_code_dir=tmp_path
        )
        torch.testing.assert_close(model(**inputs), expected, atol=2e-2, rtol=2e-2)
    assert report.share_in_own_kernels < THRESHOLD, report
    assert report.own_kernel_share < THRESHOLD
    assert report.top_ops[0]["op"].startswith("outside its Triton kernels")


@pytest.mark.skipif(not os.access(SCHEDSTAT, os.R_OK), reason="needs Linux schedstat")
def test_a_wait_for_anything_but_a_cpu_counts_against_the_call():
    # Waiting on a pipe or a socket (another process doing the work) uses no CPU of this
    # process; the wall clock counted it and so does the monitor, outside the own kernels.
    # Here the wait is a sleep beside an honest Triton kernel.
    model = load(TRITON_BASELINE / "rms_norm.py", "waiting_triton_rms_norm").Model()
    spec = get_operator("rms_norm")
    inputs = spec.make_inputs(device=CPU, seed=3, token_count=1, hidden_size=128)

    def call():
        time.sleep(0.1)
        return model(**inputs)

    monitor = FallbackMonitor(own_code_dir=TRITON_BASELINE)
    with torch.inference_mode():
        for _ in range(3):
            monitor.call(call)
    report = monitor.report(q_bytes=None)
    # Counted, not taken off as a wait for a CPU: most of the 100 ms (a sleep taken off
    # would count ~0). The kernel books the end of a sleep as run-queue time while the
    # process waits for a CPU: 0.4 ms in one CI run, 5.3 ms of a 50 ms sleep in another on
    # the loaded 2-core machine (session 16), so the bound leaves 40 ms.
    assert min(monitor.call_waited_s) >= 0.06
    assert report.share_in_own_kernels < THRESHOLD and report.own_kernel_share < THRESHOLD
    assert report.top_ops[0]["op"].startswith("outside its Triton kernels")
    assert report.share_by_time == 1.0  # no PyTorch compute: the kernels' time alone decides


@pytest.mark.skipif(not os.access(SCHEDSTAT, os.R_OK), reason="needs Linux schedstat")
def test_the_clock_reads_only_the_schedstat_it_opened(tmp_path):
    # A candidate that closes the clock's descriptor and opens a file of its own under the
    # same number (a run-queue wait as long as it likes) gets the wall time, not a wait
    # taken off.
    forged = tmp_path / "schedstat"
    forged.write_text("0 999999999999999 0\n")
    with CountedClock() as clock:
        mark = clock.mark()
        os.close(clock._schedstat)
        descriptor = os.open(forged, os.O_RDONLY)
        try:
            assert descriptor == clock._schedstat
            time.sleep(0.02)
            counted, wall, waited = clock.since(mark)
        finally:
            os.close(descriptor)
    assert counted == wall >= 0.02 and waited == 0.0


@pytest.mark.parametrize("operator", sorted(SHAPES))
def test_triton_example_is_not_flagged(operator):
    model = load(TRITON_BASELINE / f"{operator}.py", f"triton_{operator}").Model()
    report = own_share(model, operator)
    assert report.own_kernel_share >= 0.99, report.top_ops
    # The interpreter's own argument copies (storage.cpu(), copy_) are not counted.
    assert report.top_ops == []


def test_trivial_triton_launch_around_pytorch_compute_is_flagged(tmp_path):
    (tmp_path / "cheat.py").write_text(TRIVIAL_TRITON_PART)
    model = load(tmp_path / "cheat.py", "cheat_rms_norm").Model()
    report = own_share(model, "rms_norm")
    assert report.own_kernel_share < THRESHOLD
    names = [op["op"] for op in report.top_ops]
    assert "aten.mean.dim" in names and "aten.pow.Tensor_Scalar" in names


def test_small_torch_helper_beside_a_triton_kernel_is_not_flagged(tmp_path, monkeypatch):
    (tmp_path / "triton_rms.py").write_text((TRITON_BASELINE / "rms_norm.py").read_text())
    (tmp_path / "helper.py").write_text(SMALL_TORCH_HELPER)
    monkeypatch.syspath_prepend(str(tmp_path))
    model = load(tmp_path / "helper.py", "helper_rms_norm").Model()
    report = own_share(model, "rms_norm", token_count=64, hidden_size=128)
    assert report.own_kernel_share >= THRESHOLD
    assert report.top_ops  # the helper's ops are still listed


def test_views_and_allocations_are_not_compute():
    monitor = FallbackMonitor()
    x = torch.randn(4, 6)

    def call():
        y = torch.empty_like(x)
        z = x.view(6, 4).reshape(24).view(4, 6).t()  # reshape of contiguous = a view
        return y, z, torch.zeros(3), x[1:, ::2], x.unsqueeze(0).expand(2, 4, 6)

    with torch.inference_mode():
        monitor.call(call)
    assert monitor.report(q_bytes=None).top_ops == []


def test_clone_and_casts_count_as_compute():
    monitor = FallbackMonitor()
    x = torch.randn(4, 6)
    with torch.inference_mode():
        monitor.call(lambda: (x.clone(), x.to(torch.bfloat16), x.t().contiguous()))
    names = {op["op"] for op in monitor.report(q_bytes=None).top_ops}
    assert "aten.clone.default" in names and "aten._to_copy.default" in names


def test_allowed_op_table():
    assert is_allowed_op(torch.ops.aten.empty.memory_format)
    assert is_allowed_op(torch.ops.aten.view.default)
    assert not is_allowed_op(torch.ops.aten.mm.default)
    assert not is_allowed_op(torch.ops.aten.copy_.default)


def test_monitor_source_is_dedented():
    # The cheat above must be a real, parseable module.
    compile(textwrap.dedent(TRIVIAL_TRITON_PART), "cheat.py", "exec")


# --------------------------------------------------------------------------- CUDA attribution
# The profiler's events are replaced by DeviceActivity records, so the rules run on CPU.

ORIGINS = KernelOrigins(
    own_triton=frozenset({"_rms_norm_kernel", "triton_poi_fused_mul_0"}),
    foreign_triton=frozenset({"triton_poi_fused_mul_0"}),  # inductor defines it too
    own_extension=frozenset({"mykernels::rms_norm_fwd"}),
)
CUBLAS = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_execute_kernel__5x_cublas"
ELEMENTWISE = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>"
)


def kernel(name, us=10, launched_by=None, kind="kernel"):
    return DeviceActivity(name=name, duration_ns=us * 1000, kind=kind, launched_by=launched_by)


@pytest.mark.parametrize(
    ("activity", "verdict"),
    [
        (kernel("_rms_norm_kernel"), OWN),
        (kernel("_rms_norm_kernel_0d1d2d3de"), OWN),  # Triton 2.x specialisation suffix
        (kernel("_rms_norm_kernel_fast"), OTHER),  # a different name, not a suffix
        (kernel("void mykernels::rms_norm_fwd<float, 4>(float const*, float*, int)"), OWN),
        (kernel(CUBLAS, launched_by="aten::mm"), OTHER),
        (kernel(ELEMENTWISE, launched_by="aten::add"), OTHER),
        (kernel("triton_red_fused_mean_pow_0", launched_by="## Call CompiledFxGraph ##"), OTHER),
        (kernel("Memcpy DtoD (Device -> Device)", kind=MEMCPY), OTHER),
        (kernel("Memset (Device)", kind=MEMSET), NEUTRAL),
        (
            kernel(
                "void at::native::vectorized_elementwise_kernel<FillFunctor>",
                launched_by="aten::fill_",
            ),
            NEUTRAL,
        ),
        (
            kernel(
                "void at::native::vectorized_elementwise_kernel<FillFunctor>",
                launched_by="aten::zero_",
            ),
            NEUTRAL,
        ),
        (kernel("some_unknown_kernel"), OTHER),
    ],
)
def test_device_activities_are_classified_by_origin(activity, verdict):
    assert classify_activity(activity, ORIGINS) == verdict


def test_own_kernel_name_launched_inside_an_aten_op_is_not_own():
    # A Triton kernel that borrows the name PyTorch launches from aten::mm gains nothing.
    origins = KernelOrigins(own_triton=frozenset({CUBLAS}))
    assert classify_activity(kernel(CUBLAS), origins) == OWN
    assert classify_activity(kernel(CUBLAS, launched_by="aten::mm"), origins) == OTHER


def test_kernel_name_also_defined_outside_the_bundle_counts_as_other_with_a_warning():
    report = attribution_report(
        [kernel("triton_poi_fused_mul_0", us=90), kernel("_rms_norm_kernel", us=10)], ORIGINS
    )
    assert report.own_kernel_share == pytest.approx(0.1)
    assert any("triton_poi_fused_mul_0" in w for w in report.warnings)


def test_share_is_own_over_own_plus_other_with_memsets_excluded():
    report = attribution_report(
        [
            kernel("_rms_norm_kernel", us=60),
            kernel(CUBLAS, us=20, launched_by="aten::mm"),
            kernel(CUBLAS, us=20, launched_by="aten::mm"),
            kernel("Memset (Device)", us=500, kind=MEMSET),
            kernel(ELEMENTWISE, us=5, launched_by="aten::add"),
        ],
        ORIGINS,
    )
    assert report.own_kernel_share == pytest.approx(60 / 105)
    assert report.own_s == pytest.approx(60e-6) and report.neutral_s == pytest.approx(500e-6)
    assert report.own_activities == 1
    assert report.compute_s == pytest.approx(45e-6)
    assert report.top_ops[0] == {
        "op": CUBLAS,
        "calls": 2,
        "time_ms": pytest.approx(0.04),
        "launched_by": "aten::mm",
    }
    assert [op["op"] for op in report.top_ops] == [CUBLAS, ELEMENTWISE]
    assert report.to_dict()["own_s"] == report.own_s


def test_no_kernel_at_all_is_share_zero_with_a_warning():
    report = attribution_report([kernel("Memset (Device)", kind=MEMSET)], ORIGINS)
    assert report.own_kernel_share == 0.0
    assert report.warnings == [NO_KERNEL_WARNING]


def test_cuda_monitor_leaves_the_first_call_out(tmp_path):
    # The first call compiles and autotunes: its benchmark runs would pad the share.
    monitor = CudaFallbackMonitor(own_code_dir=tmp_path)
    monitor.call_activities = [
        [kernel("own_in_nothing", us=1000)],
        [kernel(CUBLAS, us=10, launched_by="aten::mm")],
        [kernel(CUBLAS, us=10, launched_by="aten::mm")],
    ]
    report = monitor.report(q_bytes=None)
    assert report.own_kernel_share == 0.0 and report.top_ops[0]["calls"] == 2
    single = CudaFallbackMonitor(own_code_dir=tmp_path)
    single.call_activities = [[kernel(CUBLAS, us=10, launched_by="aten::mm")]]
    assert single.report(q_bytes=None).compute_s == pytest.approx(10e-6)


def test_monitor_for_picks_the_device_kind(tmp_path):
    assert isinstance(monitor_for(torch.device("cpu")), FallbackMonitor)
    cuda = monitor_for(torch.device("cuda", 0), own_code_dir=str(tmp_path))
    assert isinstance(cuda, CudaFallbackMonitor) and cuda.own_code_dir == tmp_path
    assert cuda.device == torch.device("cuda", 0)
    prepare_monitoring(torch.device("cpu"))  # nothing to prepare on CPU, and no error
    placeholder = report_for(None, q_bytes=1)
    assert placeholder.own_kernel_share is None and placeholder.warnings == [NO_MONITOR_WARNING]


class _FakeEvent:
    def __init__(self, name, device, corr, linked, kind, ns=1000, start=0):
        self._values = (name, device, corr, linked, kind, ns, start)

    def name(self):
        return self._values[0]

    def device_type(self):
        return self._values[1]

    def correlation_id(self):
        return self._values[2]

    def linked_correlation_id(self):
        return self._values[3]

    def activity_type(self):
        return self._values[4]

    def duration_ns(self):
        return self._values[5]

    def start_ns(self):
        return self._values[6]

    def end_ns(self):
        return self._values[6] + self._values[5]


def test_profiler_events_become_activities_with_their_launching_op():
    from types import SimpleNamespace

    from torch.autograd import DeviceType

    cpu, cuda = DeviceType.CPU, DeviceType.CUDA
    events = [
        _FakeEvent("aten::mm", cpu, 7, 0, "cpu_op", ns=10_000, start=1000),
        _FakeEvent("cudaLaunchKernel", cpu, 99, 7, "cuda_runtime", ns=10, start=2000),
        _FakeEvent(CUBLAS, cuda, 99, 7, "kernel", 5000),
        # The profiler's bookkeeping reuses ids (0 included): never a launching op.
        _FakeEvent("Activity Buffer Request", cpu, 8, 0, "overhead", start=50_000),
        _FakeEvent("Lazy Function Loading", cpu, 0, 0, "cpu_op", start=50_000),
        _FakeEvent("_rms_norm_kernel", cuda, 100, 8, "kernel", 3000),
        _FakeEvent("_rms_norm_kernel", cuda, 104, 0, "kernel", 3000),
        _FakeEvent("Memset (Device)", cuda, 101, 0, "gpu_memset"),
        _FakeEvent("Memcpy DtoD (Device -> Device)", cuda, 102, 0, "gpu_memcpy"),
        _FakeEvent("annotation", cuda, 103, 0, "gpu_user_annotation"),
    ]
    fake = SimpleNamespace(
        profiler=SimpleNamespace(kineto_results=SimpleNamespace(events=lambda: events))
    )
    activities = activities_from_profile(fake)
    assert activities == [
        DeviceActivity(CUBLAS, 5000, "kernel", "aten::mm"),
        DeviceActivity("_rms_norm_kernel", 3000, "kernel", None),
        DeviceActivity("_rms_norm_kernel", 3000, "kernel", None),
        DeviceActivity("Memset (Device)", 1000, MEMSET, None),
        DeviceActivity("Memcpy DtoD (Device -> Device)", 1000, MEMCPY, None),
    ]


def test_of_host_events_sharing_an_id_the_last_host_op_launched_the_kernel():
    from types import SimpleNamespace

    from torch.autograd import DeviceType

    cpu, cuda = DeviceType.CPU, DeviceType.CUDA
    events = [
        _FakeEvent("aten::add", cpu, 5, 0, "cpu_op"),
        _FakeEvent("aten::mul", cpu, 5, 0, "cpu_op"),
        _FakeEvent("Activity Buffer Request", cpu, 5, 0, "overhead"),  # not a host op
        _FakeEvent("k1", cuda, 90, 5, "kernel", 100),
        _FakeEvent("k2", cuda, 91, 6, "kernel", 100),
        _FakeEvent("record", cpu, 6, 0, "user_annotation"),  # listed after k2: still its op
        _FakeEvent("k3", cuda, 92, 6, "kernel", 100),
    ]
    fake = SimpleNamespace(
        profiler=SimpleNamespace(kineto_results=SimpleNamespace(events=lambda: events))
    )
    assert [a.launched_by for a in activities_from_profile(fake)] == [
        "aten::mul",
        "record",
        "record",
    ]


class _UntypedEvent(_FakeEvent):
    """An event as torch 2.11 gives it on the H200: no ``activity_type`` (session 12's
    probe, bench/h200_session/launcher_probe.py), a user-annotation and a hidden flag."""

    def __init__(self, name, device, corr, linked, ns=1000, *, annotation=False, hidden=False):
        super().__init__(name, device, corr, linked, "", ns)
        self._flags = (annotation, hidden)

    def __getattribute__(self, attribute):
        if attribute == "activity_type":
            raise AttributeError(attribute)
        return super().__getattribute__(attribute)

    def is_user_annotation(self):
        return self._flags[0]

    def is_hidden_event(self):
        return self._flags[1]


def _untyped_profile(events):
    from types import SimpleNamespace

    return SimpleNamespace(
        profiler=SimpleNamespace(kineto_results=SimpleNamespace(events=lambda: events))
    )


def test_without_activity_types_the_launching_op_is_still_found():
    from torch.autograd import DeviceType

    cpu, cuda = DeviceType.CPU, DeviceType.CUDA
    # The order and ids of the H200 probe: the op, then the profiler's bookkeeping under
    # the op's id, the runtime call linked to the op, the kernel linked to the op.
    events = [
        _UntypedEvent("aten::mul", cpu, 1, 0),
        _UntypedEvent("Activity Buffer Request", cpu, 1, 0),
        _UntypedEvent("cudaLaunchKernel", cpu, 10, 1),
        _UntypedEvent("Lazy Function Loading", cpu, 1, 0),
        _UntypedEvent("void at::native::vectorized_elementwise_kernel<4>", cuda, 10, 1),
        _UntypedEvent("aten::fill_", cpu, 5, 0),
        _UntypedEvent("hidden bookkeeping", cpu, 5, 0, hidden=True),
        _UntypedEvent("void at::native::FillFunctor", cuda, 31, 5),
        _UntypedEvent("cudaMemsetAsync", cpu, 48, 7),
        _UntypedEvent("aten::sum", cpu, 7, 0),
        _UntypedEvent("Memset (Device)", cuda, 48, 7),
    ]
    activities = activities_from_profile(_untyped_profile(events))
    assert [(a.launched_by, a.kind) for a in activities] == [
        ("aten::mul", "kernel"),
        ("aten::fill_", "kernel"),
        ("aten::sum", MEMSET),
    ]


def test_without_activity_types_a_record_function_span_is_not_device_work(tmp_path):
    from torch.autograd import DeviceType

    cpu, cuda = DeviceType.CPU, DeviceType.CUDA
    (tmp_path / "kernel.py").write_text(
        "import triton\n\n@triton.jit\ndef _own_rms_kernel(x):\n    pass\n"
    )
    # A bundle wraps PyTorch's kernels in record_function regions named after a Triton
    # kernel of its own, nested to multiply the span: the spans are not kernels.
    events = [
        _UntypedEvent("_own_rms_kernel", cpu, 3, 0, annotation=True),
        _UntypedEvent("aten::mul", cpu, 4, 0),
        _UntypedEvent("void at::native::vectorized_elementwise_kernel<4>", cuda, 20, 4, 1000),
        *[
            _UntypedEvent("_own_rms_kernel", cuda, 30 + i, 0, 5000, annotation=True)
            for i in range(8)
        ],
    ]
    activities = activities_from_profile(_untyped_profile(events))
    assert [a.name for a in activities] == ["void at::native::vectorized_elementwise_kernel<4>"]
    report = attribution_report(activities, kernel_origins(tmp_path))
    assert report.own_kernel_share == 0.0


def test_cxx_names_from_profiler_and_from_symbols_agree():
    assert cxx_qualified_name("void ns::kernel<float, 4>(float const*, float*, int)") == (
        "ns::kernel"
    )
    assert cxx_qualified_name("my_kernel") == "my_kernel"
    assert cxx_qualified_name("void (anonymous namespace)::k<(int)3>(float*)") == (
        "(anonymous namespace)::k"
    )
    assert itanium_qualified_name("_ZN2ns6kernelIfLi4EEEvPKfPfi") == "ns::kernel"
    assert itanium_qualified_name("_ZN12_GLOBAL__N_11kIL_Z3EEvPf") == "(anonymous namespace)::k"
    assert itanium_qualified_name("_Z9my_kernelPfi") == "my_kernel"
    assert itanium_qualified_name("plain_c_kernel") == "plain_c_kernel"


JIT_MODULE = """
import triton
import triton.language as tl


@triton.jit
def own_plain_kernel(x_ptr):
    pass


@triton.autotune(configs=[triton.Config({})], key=[])
@triton.jit
def own_tuned_kernel(x_ptr):
    pass


class Holder:
    hidden_kernel = triton.jit(own_plain_kernel.fn)


def not_a_kernel():
    pass
"""

FOREIGN_MODULE = """
import triton


@triton.jit
def library_kernel(x_ptr):
    pass
"""


def test_own_triton_kernels_are_found_by_source_file(tmp_path, monkeypatch):
    bundle = tmp_path / "bundle"
    library = tmp_path / "library"
    bundle.mkdir()
    library.mkdir()
    (bundle / "own_kernels_mod.py").write_text(JIT_MODULE)
    (library / "library_kernels_mod.py").write_text(
        FOREIGN_MODULE + "\n" + "from own_kernels_mod import own_plain_kernel as reexported\n"
    )
    (bundle / "uses_library_mod.py").write_text("from library_kernels_mod import library_kernel\n")
    monkeypatch.syspath_prepend(str(bundle))
    monkeypatch.syspath_prepend(str(library))
    for name in ("own_kernels_mod", "library_kernels_mod", "uses_library_mod"):
        monkeypatch.delitem(sys.modules, name, raising=False)
        importlib.import_module(name)
    origins = kernel_origins(bundle)
    assert {"own_plain_kernel", "own_tuned_kernel"} <= origins.own_triton
    # A library's kernel imported into the bundle is still the library's.
    assert "library_kernel" not in origins.own_triton
    assert "library_kernel" in origins.foreign_triton
    assert "not_a_kernel" not in origins.own_triton | origins.foreign_triton
    # Re-exported by a library module, the bundle's kernel is still the bundle's.
    assert "own_plain_kernel" not in origins.foreign_triton
    # triton.language's device helpers (tl.softmax...) never clash with a kernel's name.
    assert "softmax" not in origins.foreign_triton


@pytest.mark.slow  # 4.3 s: scans of every module torch loaded, remembered and fresh
def test_a_remembered_module_scan_finds_what_a_fresh_one_finds(tmp_path, monkeypatch):
    """``ModuleScanMemo``: the modules outside the bundle are read again only when the
    loaded modules change (a module imported, a global added); the bundle's own modules
    are read at every scan. Each answer is compared with a scan that remembers nothing."""
    from evaluator import fallback_cuda
    from evaluator.fallback_cuda import ModuleScanMemo, triton_kernel_names

    bundle, library = tmp_path / "bundle", tmp_path / "library"
    bundle.mkdir()
    library.mkdir()
    (bundle / "memo_own_mod.py").write_text(JIT_MODULE + "\nLATER = {}\n")
    (library / "memo_library_mod.py").write_text(FOREIGN_MODULE)
    (library / "memo_late_mod.py").write_text(FOREIGN_MODULE.replace("library_", "late_"))
    monkeypatch.syspath_prepend(str(bundle))
    monkeypatch.syspath_prepend(str(library))
    for name in ("memo_own_mod", "memo_library_mod", "memo_late_mod"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    own_mod = importlib.import_module("memo_own_mod")
    library_mod = importlib.import_module("memo_library_mod")
    memo = ModuleScanMemo()
    reads = [0]
    module_values = fallback_cuda._module_values

    def counted(module, *, nested):
        reads[0] += 1
        return module_values(module, nested=nested)

    monkeypatch.setattr(fallback_cuda, "_module_values", counted)

    def scan():
        reads[0] = 0
        remembered = triton_kernel_names(bundle, memo)
        read = reads[0]
        assert remembered == triton_kernel_names(bundle)  # as a fresh scan finds
        return remembered, read

    (own, foreign), first = scan()
    assert {"own_plain_kernel", "own_tuned_kernel"} <= own and "library_kernel" in foreign
    assert first > 100  # every loaded module read
    _, again = scan()
    assert again == 1  # nothing changed: the bundle's one module read again, no other
    # A kernel the bundle builds later, in a container of its module: found at once.
    own_mod.LATER["k"] = own_mod.triton.jit(own_mod.not_a_kernel)
    (own, _), again = scan()
    assert "not_a_kernel" in own and again == 1
    # A library module imported after the first scan: read.
    importlib.import_module("memo_late_mod")
    (_, foreign), again = scan()
    assert "late_kernel" in foreign and again > 100
    # A global added to a module outside the bundle: every module read again.
    library_mod.added_later = library_mod.library_kernel
    _, again = scan()
    assert again > 100
    _, again = scan()
    assert again == 1
    # A module that names no file is not read; once it names one, with its globals' count
    # unchanged, it is.
    (library / "memo_ghost_mod.py").write_text(FOREIGN_MODULE.replace("library_", "ghost_"))
    monkeypatch.delitem(sys.modules, "memo_ghost_mod", raising=False)
    ghost = importlib.import_module("memo_ghost_mod")
    ghost_file, ghost.__file__ = ghost.__file__, None
    (_, foreign), again = scan()
    assert "ghost_kernel" not in foreign and again > 100
    ghost.__file__ = ghost_file
    (_, foreign), again = scan()
    assert "ghost_kernel" in foreign and again > 100


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
def test_extension_function_names_are_read_from_the_shared_object(tmp_path):
    source = tmp_path / "ext.cpp"
    source.write_text(
        "namespace mykernels { template <typename T> void rms_norm_fwd(T* x, int n) { x[0] = n; }\n"
        "template void rms_norm_fwd<float>(float*, int); }\n"
        'extern "C" void plain_c_kernel(float* x) { x[0] = 1; }\n'
    )
    library = tmp_path / "libext.so"
    subprocess.run(["g++", "-shared", "-fPIC", "-o", str(library), str(source)], check=True)
    names = shared_object_function_names(str(library))
    assert {"mykernels::rms_norm_fwd", "plain_c_kernel"} <= names
    assert shared_object_function_names(str(source)) == frozenset()  # not ELF: nothing


def test_one_scans_resolver_gives_realpaths_answers(tmp_path, monkeypatch):
    """Each folder resolved once: a file in a linked folder, a linked file (resolved in
    full, wherever it points), a relative name, "..", a name that does not exist."""
    monkeypatch.setattr(elf_symbols, "_REAL_PATHS", elf_symbols._REAL_PATHS)
    real, other = tmp_path / "real", tmp_path / "other"
    real.mkdir()
    other.mkdir()
    (real / "mod.py").write_text("")
    (other / "target.py").write_text("")
    (tmp_path / "linked").symlink_to(real)
    (real / "alias.py").symlink_to(other / "target.py")
    (real / "hop.py").symlink_to("alias.py")  # a relative link to a link
    monkeypatch.chdir(real)
    paths = [
        str(tmp_path / "linked" / "mod.py"),
        str(tmp_path / "linked" / "alias.py"),
        str(tmp_path / "linked" / "hop.py"),
        str(real / "mod.py"),
        "mod.py",
        str(tmp_path / "linked" / ".."),
        str(tmp_path / "linked" / "missing.py"),
        "<frozen importlib._bootstrap>",
    ]
    resolve = real_path_resolver()
    assert [resolve(path) for path in paths] == [os.path.realpath(path) for path in paths]
    # Asked again (the scan's second look at a module), the same.
    assert [resolve(path) for path in paths] == [os.path.realpath(path) for path in paths]


def test_the_module_scan_resolves_each_folder_once(tmp_path, monkeypatch):
    """``triton_kernel_names`` reads every loaded module's file, at every shape's report:
    it resolves each folder once, not the path of every module (in a child whose
    installed files were not remembered, or of modules loaded after the warm-up)."""
    from evaluator import fallback_cuda

    monkeypatch.setattr(elf_symbols, "_REAL_PATHS", elf_symbols.MappingProxyType({}))
    files = [getattr(m, "__file__", None) for m in list(sys.modules.values())]
    files = [f for f in files if isinstance(f, str)]
    folders = {os.path.dirname(f) for f in files}
    assert len(files) > 3 * len(folders)  # torch, triton: many modules a folder
    calls = [0]
    realpath = os.path.realpath

    def counted(path, *args, **kwargs):
        calls[0] += 1
        return realpath(path, *args, **kwargs)

    monkeypatch.setattr(os.path, "realpath", counted)
    own, _foreign = fallback_cuda.triton_kernel_names(tmp_path)
    assert calls[0] < len(folders) + 50, (calls[0], len(folders), len(files))
    assert own == frozenset()


def test_real_paths_are_remembered_only_inside_the_given_roots(tmp_path, monkeypatch):
    # The fallback monitor resolves every loaded file at each shape; files of folders no
    # candidate can write are resolved once. A link that leaves those folders, or a file
    # outside them, is resolved afresh each time: the candidate could change it.
    monkeypatch.setattr(elf_symbols, "_REAL_PATHS", elf_symbols._REAL_PATHS)
    installed, elsewhere = tmp_path / "installed", tmp_path / "elsewhere"
    installed.mkdir()
    elsewhere.mkdir()
    (installed / "lib.py").write_text("")
    (installed / "alias.py").symlink_to(installed / "lib.py")
    (elsewhere / "own.py").write_text("")
    (elsewhere / "other.py").write_text("")
    (installed / "out.py").symlink_to(elsewhere / "own.py")
    paths = [str(installed / name) for name in ("lib.py", "alias.py", "out.py")]
    remember_real_paths([*paths, str(elsewhere / "own.py")], [str(installed)])
    assert dict(elf_symbols._REAL_PATHS) == {
        str(installed / "lib.py"): str(installed / "lib.py"),
        str(installed / "alias.py"): str(installed / "lib.py"),
    }
    with pytest.raises(TypeError):
        elf_symbols._REAL_PATHS["x"] = "y"  # read-only
    (installed / "out.py").unlink()
    (installed / "out.py").symlink_to(elsewhere / "other.py")
    assert real_path(str(installed / "out.py")) == str(elsewhere / "other.py")
    assert real_path(str(installed / "alias.py")) == str(installed / "lib.py")


def test_a_cuda_monitor_told_of_more_calls_gives_no_share_from_its_first_alone():
    # Its first call is watched without the host's ops (only the calls after it give the
    # share): a report after that call alone would be wrong, so there is none.
    monitor = CudaFallbackMonitor(device=None, calls=3)
    assert monitor.first_call_device_only
    with pytest.raises(RuntimeError, match="more calls than it watched"):
        monitor.report(q_bytes=None)
    assert not CudaFallbackMonitor(device=None, calls=1).first_call_device_only
    assert not CudaFallbackMonitor(device=None).first_call_device_only


def test_a_call_profiled_for_its_device_activity_only_has_no_external_correlation():
    # Those ids tie a kernel to the host op that launched it; such a call records no host
    # op. (The GPU test test_the_first_call_is_watched_for_its_device_activity_only checks
    # that the calls after it still get their launchers.)
    from torch._C._profiler import _ExperimentalConfig

    config = device_only_profiler_config()
    assert config is not None  # this torch has the switch
    off = _ExperimentalConfig(disable_external_correlation=True).__getstate__()
    assert config.__getstate__() == off != _ExperimentalConfig().__getstate__()
