"""Achievable ceilings of one device: copy bandwidth and a large bf16 GEMM rate.

A worker measures these when it starts and reports them with its registration, so that
staff can see a GPU that runs below its siblings (clocks held down, a bad HBM stack, a
wrong power cap) before its results reach the board. They are never used for scoring:
roofline fractions are always against the hardware profile's datasheet peaks.

On CUDA: a device-to-device copy of a 1 GiB buffer (bandwidth counts the bytes read and
the bytes written, as HBM datasheets do) and an 8192^3 bf16 matmul, each timed with CUDA
events over several repetitions after a warm-up; the best repetition is reported, as a
ceiling is what the device can reach. On CPU the same two measurements run at a small
size in about a second: a development figure, labelled as such.

Imports torch only inside :func:`measure_ceilings`; never imports Django.
"""

from __future__ import annotations

import os
import platform
import time
from dataclasses import dataclass
from typing import Any

from evaluator import HARNESS_VERSION

SCHEMA = "atrex-ceilings/1"


@dataclass(frozen=True)
class CeilingSizes:
    """How large the two measurements are and how often they are repeated."""

    copy_bytes: int
    gemm_n: int
    repeats: int
    warmup: int


SIZES = {
    # 1 GiB is far beyond L2 (50 MB on H100/H200); 8192^3 bf16 saturates the tensor cores.
    "cuda": CeilingSizes(copy_bytes=1 << 30, gemm_n=8192, repeats=20, warmup=3),
    # Small enough that the whole command (torch import included) takes a few seconds.
    "cpu": CeilingSizes(copy_bytes=64 << 20, gemm_n=256, repeats=5, warmup=1),
}


def visible_gpu_index() -> int:
    """The ``nvidia-smi`` index of the GPU this process sees as ``cuda:0``.

    ``nvidia-smi`` ignores ``CUDA_VISIBLE_DEVICES``, so a worker pinned to GPU 3 must ask
    for row 3, not row 0. UUIDs or an unset variable fall back to 0.
    """
    first = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
    return int(first) if first.isdigit() else 0


def _best_seconds(run, *, repeats: int, warmup: int, timer) -> float:
    for _ in range(warmup):
        run()
    return min(timer(run) for _ in range(repeats))


def _cuda_timer(torch):
    def timed(run) -> float:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        run()
        end.record()
        torch.cuda.synchronize()
        return start.elapsed_time(end) / 1e3

    return timed


def _cpu_timer(run) -> float:
    started = time.perf_counter()
    run()
    return time.perf_counter() - started


def _copy_seconds(torch, target, sizes: CeilingSizes, timer) -> float:
    """Best time of one copy of ``sizes.copy_bytes`` from one buffer to another."""
    source = torch.ones(sizes.copy_bytes // 4, dtype=torch.float32, device=target)
    destination = torch.empty_like(source)
    seconds = _best_seconds(
        lambda: destination.copy_(source), repeats=sizes.repeats, warmup=sizes.warmup, timer=timer
    )
    if not torch.equal(destination[-16:], source[-16:]):
        raise RuntimeError("the copy measurement did not copy: the device is not working")
    return seconds


def _gemm_seconds(torch, target, sizes: CeilingSizes, timer) -> float:
    """Best time of one ``gemm_n``-cubed bf16 matrix product."""
    n = sizes.gemm_n
    generator = torch.Generator(device=target).manual_seed(0)
    left = torch.randn(n, n, device=target, dtype=torch.bfloat16, generator=generator)
    right = torch.randn(n, n, device=target, dtype=torch.bfloat16, generator=generator)
    product = torch.empty(n, n, device=target, dtype=torch.bfloat16)
    seconds = _best_seconds(
        lambda: torch.matmul(left, right, out=product),
        repeats=sizes.repeats,
        warmup=sizes.warmup,
        timer=timer,
    )
    if not bool(torch.isfinite(product[:4, :4].float()).all()):
        raise RuntimeError("the GEMM measurement produced non-finite values")
    return seconds


def measure_ceilings(device: str = "cuda", *, sizes: CeilingSizes | None = None) -> dict[str, Any]:
    """Measure copy bandwidth (bytes/s) and bf16 GEMM rate (FLOP/s) on ``device``.

    Returns a document with schema ``atrex-ceilings/1``: the figures, the sizes used, the
    device's name, driver, clocks and the torch/triton versions. Raises ``RuntimeError``
    when ``device`` is ``cuda`` and no GPU is visible.
    """
    from evaluator.environment import collect_environment, gpu_clocks

    kind = "cuda" if device.startswith("cuda") else "cpu"
    sizes = sizes or SIZES[kind]
    started = time.perf_counter()
    import torch

    if kind == "cuda":
        if not torch.cuda.is_available():
            raise RuntimeError("--device cuda was asked for, but torch sees no CUDA device")
        target = torch.device("cuda", 0)
        timer = _cuda_timer(torch)
        device_name = torch.cuda.get_device_name(target)
    else:
        target = torch.device("cpu")
        timer = _cpu_timer
        device_name = None

    copy_s = _copy_seconds(torch, target, sizes, timer)
    gemm_s = _gemm_seconds(torch, target, sizes, timer)
    if kind == "cuda":
        torch.cuda.empty_cache()

    environment = collect_environment(kind)
    if kind == "cuda":
        environment["device_name"] = device_name
        environment["clocks_start"] = gpu_clocks(visible_gpu_index())
    return {
        "schema": SCHEMA,
        "harness_version": HARNESS_VERSION,
        "device": kind,
        "device_name": environment["device_name"] or platform.machine(),
        "development_only": kind == "cpu",
        "copy_bytes_per_s": 2 * sizes.copy_bytes / copy_s,
        "bf16_gemm_flops_per_s": 2 * sizes.gemm_n**3 / gemm_s,
        "copy_buffer_bytes": sizes.copy_bytes,
        "gemm_n": sizes.gemm_n,
        "repeats": sizes.repeats,
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "environment": environment,
        "wall_s": time.perf_counter() - started,
    }
