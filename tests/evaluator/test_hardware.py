"""Hardware profiles: the published peaks, lookups by dtype, and refusal of bad data."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from evaluator.errors import PlatformError, UnknownHardwareError
from evaluator.hardware import DTYPE_TO_PATH, PATHS, PROFILES, HardwareProfile, get_profile
from tests.release import RELEASE_DIR, require_release


def _yaml_numbers(path: Path) -> dict[str, float]:
    """The ``key: integer`` lines of an upstream hardware YAML (no YAML library needed)."""
    numbers = {}
    for line in path.read_text().splitlines():
        match = re.match(r"\s*(\w+):\s+(\d+)\s*(#.*)?$", line)
        if match:
            numbers[match.group(1)] = float(match.group(2))
    return numbers


def test_builtin_profiles_are_the_four_shipped():
    assert sorted(PROFILES) == ["cpu-dev", "h100-sxm", "h20", "h200-sxm"]


@pytest.mark.parametrize("slug", ["h200-sxm", "h100-sxm"])
def test_hopper_sxm_profiles_use_dense_datasheet_peaks(slug):
    profile = get_profile(slug)
    assert profile.peak_flops == {
        "bf16_tc": 989.4e12,
        "fp16_tc": 989.4e12,
        "fp8_e4m3_tc": 1978.9e12,
        "fp32_tf32_tc": 494.7e12,
        "fp32_strict": 66.9e12,
    }
    assert profile.device_kind == "cuda"
    assert profile.source == "vendor datasheet (dense)"


def test_h200_and_h100_differ_only_in_bandwidth():
    assert get_profile("h200-sxm").hbm_bytes_per_s == 4.8e12
    assert get_profile("h100-sxm").hbm_bytes_per_s == 3.35e12


def test_h20_profile_copies_the_release_yaml():
    require_release()
    yaml_path = RELEASE_DIR / "hardware" / "H20.yaml"
    numbers = _yaml_numbers(yaml_path)
    profile = get_profile("h20")
    assert profile.peak_flops == {path: numbers[path] for path in PATHS}
    assert profile.hbm_bytes_per_s == numbers["hbm"]
    assert "Atrex-Bench" in profile.source and "eb8697d5" in profile.source


def test_cpu_dev_profile_says_it_is_not_comparable():
    profile = get_profile("cpu-dev")
    assert profile.device_kind == "cpu"
    assert set(profile.peak_flops) == set(PATHS)
    assert "development only" in profile.notes
    assert "never comparable to GPU" in profile.notes


def test_unknown_slug_error_lists_known_profiles():
    with pytest.raises(UnknownHardwareError) as excinfo:
        get_profile("b200")
    message = excinfo.value.message
    assert "b200" in message
    for slug in PROFILES:
        assert slug in message
    assert excinfo.value.code == "platform:unknown-hardware"


def test_fp32_work_runs_on_the_strict_path_not_tf32():
    profile = get_profile("h200-sxm")
    assert DTYPE_TO_PATH["fp32"] == "fp32_strict"
    assert profile.peak_for_dtype("fp32") == 66.9e12
    assert profile.peak_for_dtype("fp32_tf32") == 494.7e12
    assert profile.peak_for_dtype("fp8_e4m3") == 1978.9e12


def test_missing_path_is_an_error_naming_path_and_profile():
    no_tf32 = HardwareProfile(
        slug="xpu-a",
        name="XPU-A",
        peak_flops={"bf16_tc": 232.65e12, "fp32_strict": 29.1e12},
        hbm_bytes_per_s=5.3e12,
        source="test",
    )
    with pytest.raises(PlatformError) as excinfo:
        no_tf32.peak_for_dtype("fp32_tf32")
    assert "fp32_tf32_tc" in excinfo.value.message
    assert "xpu-a" in excinfo.value.message


def test_dtype_without_a_path_is_an_error():
    with pytest.raises(PlatformError, match="fp8_e5m2"):
        get_profile("h200-sxm").peak_for_dtype("fp8_e5m2")


def test_round_trip_through_json_keeps_the_profile():
    for profile in PROFILES.values():
        data = json.loads(json.dumps(profile.to_dict()))
        assert HardwareProfile.from_dict(data) == profile


def test_profile_does_not_follow_later_changes_to_the_callers_dict():
    peaks = {"bf16_tc": 1e12}
    profile = HardwareProfile(
        slug="x", name="x", peak_flops=peaks, hbm_bytes_per_s=1e9, source="test"
    )
    peaks["bf16_tc"] = 5e12
    assert profile.peak_for_path("bf16_tc") == 1e12


@pytest.mark.parametrize(
    "changes, fragment",
    [
        ({"peak_flops": {"bf16_tc": -1.0}}, "bf16_tc"),
        ({"peak_flops": {"bf17_tc": 1e12}}, "bf17_tc"),
        ({"peak_flops": {"bf16_tc": float("inf")}}, "bf16_tc"),
        ({"hbm_bytes_per_s": 0}, "hbm_bytes_per_s"),
        ({"device_kind": "tpu"}, "tpu"),
        ({"slug": ""}, "slug"),
    ],
)
def test_bad_profile_data_is_refused(changes, fragment):
    data = {**get_profile("h20").to_dict(), **changes}
    with pytest.raises(PlatformError) as excinfo:
        HardwareProfile.from_dict(data)
    assert fragment in excinfo.value.message


def test_from_dict_refuses_missing_and_unknown_keys():
    data = get_profile("h20").to_dict()
    del data["hbm_bytes_per_s"]
    with pytest.raises(PlatformError, match="hbm_bytes_per_s"):
        HardwareProfile.from_dict(data)
    with pytest.raises(PlatformError, match="clock_mhz"):
        HardwareProfile.from_dict({**get_profile("h20").to_dict(), "clock_mhz": 1980})
