"""Roofline: the formula reproduces every published SOL time; fractions; bottlenecks."""

from __future__ import annotations

import json
import math

import pytest

from evaluator.errors import PlatformError
from evaluator.hardware import HardwareProfile, get_profile
from evaluator.roofline import bottleneck, roofline_fraction, t_sol_seconds
from tests.release import DATA_DIR, require_release

needs_release = pytest.mark.usefixtures("release_data")


@pytest.fixture
def release_data():
    return require_release()


# The release's second SKU (hardware/XPU-A.yaml): no TF32 path, other ratios than H20.
XPU_A = HardwareProfile(
    slug="xpu-a",
    name="XPU-A",
    peak_flops={
        "bf16_tc": 232650000000000,
        "fp16_tc": 232650000000000,
        "fp8_e4m3_tc": 465300000000000,
        "fp32_strict": 29100000000000,
    },
    hbm_bytes_per_s=5300000000000,
    source="Atrex-Bench release, hardware/XPU-A.yaml",
)
H200 = get_profile("h200-sxm")


def _published_shapes() -> list[tuple[str, str, dict]]:
    rows = []
    for path in sorted(DATA_DIR.glob("*/roofline.json")):
        for shape_id, shape in json.loads(path.read_text())["shapes"].items():
            rows.append((path.parent.name, shape_id, shape))
    return rows


def _sol_ms(shape: dict, hardware: HardwareProfile) -> float:
    seconds = t_sol_seconds(
        w_flops=shape["semantic_W_flops"],
        q_read=shape["semantic_Q_read_bytes"],
        q_write=shape["semantic_Q_write_bytes"],
        hardware=hardware,
    )
    return seconds * 1000


@needs_release
@pytest.mark.parametrize("sku, hardware", [("H20", get_profile("h20")), ("XPU-A", XPU_A)])
def test_formula_reproduces_every_published_sol_time(sku, hardware):
    rows = _published_shapes()
    assert len(rows) == 440
    mismatches = [
        (op, sid, shape["SOL_time_ms"][sku], _sol_ms(shape, hardware))
        for op, sid, shape in rows
        if not math.isclose(_sol_ms(shape, hardware), shape["SOL_time_ms"][sku], rel_tol=1e-9)
    ]
    assert mismatches == []


@needs_release
def test_published_check_is_sharp_enough_to_catch_a_wrong_peak():
    # fp8 GEMM shapes are compute-bound on H20: giving fp8 the bf16 peak must break them.
    h20 = get_profile("h20")
    fp8_at_bf16_rate = HardwareProfile.from_dict(
        {**h20.to_dict(), "peak_flops": {**h20.peak_flops, "fp8_e4m3_tc": 148.0e12}}
    )
    wrong = [
        (op, sid)
        for op, sid, shape in _published_shapes()
        if not math.isclose(
            _sol_ms(shape, fp8_at_bf16_rate), shape["SOL_time_ms"]["H20"], rel_tol=1e-9
        )
    ]
    assert ("block_scaled_mm", "0") in wrong
    assert all(op in {"block_scaled_mm", "fp8_blockscale_fused_moe"} for op, _ in wrong)


def test_compute_bound_time_is_work_over_peak():
    assert t_sol_seconds(w_flops={"bf16": 989.4e12}, q_read=0, q_write=0, hardware=H200) == 1.0


def test_memory_bound_time_is_bytes_over_bandwidth():
    seconds = t_sol_seconds(
        w_flops={"bf16": 1000}, q_read=2_400_000, q_write=2_400_000, hardware=H200
    )
    assert seconds == pytest.approx(4_800_000 / 4.8e12, rel=1e-15)


def test_several_dtypes_add_their_compute_times():
    seconds = t_sol_seconds(
        w_flops={"bf16": 989.4e12, "fp8_e4m3": 1978.9e12, "fp32": 66.9e12},
        q_read=1,
        q_write=1,
        hardware=H200,
    )
    assert seconds == pytest.approx(3.0, rel=1e-12)


def test_no_work_and_no_bytes_take_no_time():
    assert t_sol_seconds(w_flops={}, q_read=0, q_write=0, hardware=H200) == 0.0


def test_a_dtype_the_profile_lacks_is_an_error():
    with pytest.raises(PlatformError, match="fp32_tf32_tc"):
        t_sol_seconds(w_flops={"fp32_tf32": 10}, q_read=1, q_write=1, hardware=XPU_A)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"w_flops": {"bf16": -1}, "q_read": 0, "q_write": 0},
        {"w_flops": {}, "q_read": -5, "q_write": 0},
        {"w_flops": {"bf16": float("nan")}, "q_read": 0, "q_write": 0},
    ],
)
def test_negative_or_nan_counts_are_refused(kwargs):
    with pytest.raises(PlatformError):
        t_sol_seconds(hardware=H200, **kwargs)


def test_fraction_is_sol_over_measured_and_not_clipped():
    assert roofline_fraction(t_sol_s=2e-6, t_measured_s=8e-6) == 0.25
    assert roofline_fraction(t_sol_s=3e-6, t_measured_s=2e-6) == 1.5


@pytest.mark.parametrize("measured", [0.0, -1e-6, float("inf"), float("nan")])
def test_fraction_refuses_an_impossible_measurement(measured):
    with pytest.raises(PlatformError):
        roofline_fraction(t_sol_s=1e-6, t_measured_s=measured)


# On H200 bf16 the ridge is 989.4e12 / 4.8e12 = 206.125 FLOP per byte.
@pytest.mark.parametrize(
    "intensity, expected",
    [
        (1.0, "memory"),
        (0.94 * 206.125, "memory"),
        (0.96 * 206.125, "balanced"),
        (206.125, "balanced"),
        (1.04 * 206.125, "balanced"),
        (1.06 * 206.125, "compute"),
        (5000.0, "compute"),
    ],
)
def test_bottleneck_uses_a_five_percent_band_around_the_ridge(intensity, expected):
    q_total = 1_000_000
    w = round(intensity * q_total)
    label = bottleneck(
        w_flops={"bf16": w}, q_read=q_total // 2, q_write=q_total // 2, hardware=H200
    )
    assert label == expected


def test_bottleneck_edge_cases():
    assert bottleneck(w_flops={}, q_read=0, q_write=0, hardware=H200) == "no_compute"
    assert bottleneck(w_flops={"bf16": 0}, q_read=0, q_write=0, hardware=H200) == "no_compute"
    assert bottleneck(w_flops={}, q_read=10, q_write=0, hardware=H200) == "memory"
    assert bottleneck(w_flops={"bf16": 10}, q_read=0, q_write=0, hardware=H200) == "compute"


def test_bottleneck_of_several_dtypes_compares_summed_compute_time():
    # bf16 alone is memory-bound; the fp32 work (strict path, 66.9 TFLOP/s) tips it over.
    q = 4_800_000  # 1 microsecond at 4.8 TB/s
    bf16_only = {"bf16": 100_000_000}  # ~0.1 us
    assert bottleneck(w_flops=bf16_only, q_read=q, q_write=0, hardware=H200) == "memory"
    mixed = {**bf16_only, "fp32": 133_800_000}  # +2 us
    assert bottleneck(w_flops=mixed, q_read=q, q_write=0, hardware=H200) == "compute"
