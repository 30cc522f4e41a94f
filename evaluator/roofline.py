"""The roofline (speed-of-light) time of a shape and the fraction a kernel reaches.

Pure stdlib. The formula is the one of the Atrex-Bench release (OPERATORS.md A.5):

    T_sol = max( sum over dtypes d of W_d / P_path(d),  (Q_read + Q_write) / B_hbm )

with W_d the FLOPs done in dtype d, P_path(d) the profile's dense peak of the execution
path of d (``DTYPE_TO_PATH``: fp32 is the strict, non-tensor-core path), Q the bytes read
and written and B_hbm the HBM bandwidth. It reproduces every published ``SOL_time_ms``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from evaluator.errors import PlatformError
from evaluator.hardware import HardwareProfile

BOTTLENECKS: tuple[str, ...] = ("memory", "compute", "balanced", "no_compute")
RIDGE_BAND = 0.05
"""Half-width of the "balanced" band around the ridge point (5%, as upstream)."""


def _check_count(name: str, value: int | float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise PlatformError(f"Work model: {name} must be a number, got {value!r}.")
    if not math.isfinite(value) or value < 0:
        raise PlatformError(f"Work model: {name} must be finite and >= 0, got {value!r}.")
    return float(value)


def compute_seconds(*, w_flops: Mapping[str, int | float], hardware: HardwareProfile) -> float:
    """Time the FLOPs alone take at peak: sum over dtypes of W_d / P_path(d), in seconds.

    A dtype with zero FLOPs still needs a path on the profile (an unknown dtype is a data
    error, whatever its count).
    """
    total = 0.0
    for dtype, flops in w_flops.items():
        count = _check_count(f"w_flops[{dtype!r}]", flops)
        total += count / hardware.peak_for_dtype(dtype)
    return total


def memory_seconds(*, q_read: int, q_write: int, hardware: HardwareProfile) -> float:
    """Time the bytes alone take at peak bandwidth: (Q_read + Q_write) / B_hbm, in seconds."""
    moved = _check_count("q_read", q_read) + _check_count("q_write", q_write)
    return moved / hardware.hbm_bytes_per_s


def t_sol_seconds(
    *,
    w_flops: Mapping[str, int | float],
    q_read: int,
    q_write: int,
    hardware: HardwareProfile,
) -> float:
    """Speed-of-light time of one shape on ``hardware``, in seconds.

    T_sol = max(sum_d W_d / P_path(d), (Q_read + Q_write) / B_hbm). ``w_flops`` is keyed
    by dtype names ("bf16", "fp8_e4m3", "fp32", ...), mapped through ``DTYPE_TO_PATH``.
    Zero work and zero bytes give 0.0. Negative or non-finite counts, unknown dtypes and
    paths the profile lacks raise PlatformError.
    """
    return max(
        compute_seconds(w_flops=w_flops, hardware=hardware),
        memory_seconds(q_read=q_read, q_write=q_write, hardware=hardware),
    )


def roofline_fraction(*, t_sol_s: float, t_measured_s: float) -> float:
    """Fraction of the roofline a kernel reached: T_sol / T_measured.

    Not clipped: a value above 1.0 means the measurement or the work model is wrong and
    is for an admin to review. A non-positive or non-finite measured time, or a negative
    T_sol, is a harness error (PlatformError).
    """
    if not math.isfinite(t_measured_s) or t_measured_s <= 0:
        raise PlatformError(f"Measured time must be positive and finite, got {t_measured_s!r}.")
    if not math.isfinite(t_sol_s) or t_sol_s < 0:
        raise PlatformError(f"T_sol must be finite and >= 0, got {t_sol_s!r}.")
    return t_sol_s / t_measured_s


def bottleneck(
    *,
    w_flops: Mapping[str, int | float],
    q_read: int,
    q_write: int,
    hardware: HardwareProfile,
) -> str:
    """Which roof bounds the shape: "memory", "compute", "balanced" or "no_compute".

    Compares the compute time T_c = sum_d W_d / P_path(d) with the memory time
    T_m = Q / B_hbm: "memory" if T_c < 0.95 T_m, "compute" if T_c > 1.05 T_m, else
    "balanced". For a single dtype this is upstream's rule on arithmetic intensity
    (AI = W/Q against 0.95 and 1.05 times the ridge P/B). No work and no bytes is
    "no_compute"; work with no bytes is "compute"; bytes with no work is "memory".
    """
    t_compute = compute_seconds(w_flops=w_flops, hardware=hardware)
    t_memory = memory_seconds(q_read=q_read, q_write=q_write, hardware=hardware)
    if t_compute == 0 and t_memory == 0:
        return "no_compute"
    if t_compute < (1 - RIDGE_BAND) * t_memory:
        return "memory"
    if t_compute > (1 + RIDGE_BAND) * t_memory:
        return "compute"
    return "balanced"
