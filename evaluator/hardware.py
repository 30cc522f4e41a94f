"""Hardware profiles: peak dense FLOP/s per execution path and HBM bandwidth.

Pure stdlib, so the web side can import it. A profile is the denominator of every
roofline fraction, so its numbers and their source are part of what a leaderboard
publishes: leaderboards are kept per (suite version, hardware profile).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from evaluator.errors import PlatformError, UnknownHardwareError

PATHS: tuple[str, ...] = ("bf16_tc", "fp16_tc", "fp8_e4m3_tc", "fp32_tf32_tc", "fp32_strict")
"""Execution paths a profile may give a peak for (tensor-core paths and strict fp32)."""

DTYPE_TO_PATH: dict[str, str] = {
    "bf16": "bf16_tc",
    "fp16": "fp16_tc",
    "fp32": "fp32_strict",
    "fp32_tf32": "fp32_tf32_tc",
    "fp8_e4m3": "fp8_e4m3_tc",
}
"""How a dtype key of a work model (``w_flops``) maps to an execution path."""

DEVICE_KINDS: tuple[str, ...] = ("cuda", "cpu")

_PROFILE_KEYS = frozenset(
    {"slug", "name", "peak_flops", "hbm_bytes_per_s", "source", "notes", "device_kind"}
)


def _bad_profile(message: str) -> PlatformError:
    return PlatformError(message, code="platform:bad-hardware-profile")


def _is_positive_number(value: Any) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value > 0
    )


@dataclass(frozen=True)
class HardwareProfile:
    """Peak dense FLOP/s per execution path and HBM bytes/s of one device kind.

    ``peak_flops`` maps a path of ``PATHS`` to FLOP/s; a path may be absent (a device
    without a TF32 tensor-core path, say), and asking for it is then an error.
    """

    slug: str
    name: str
    peak_flops: dict[str, float]
    hbm_bytes_per_s: float
    source: str
    notes: str = ""
    device_kind: str = "cuda"

    def __post_init__(self) -> None:
        if not self.slug:
            raise _bad_profile("A hardware profile needs a non-empty slug.")
        unknown = sorted(set(self.peak_flops) - set(PATHS))
        if unknown:
            raise _bad_profile(
                f"Hardware profile {self.slug!r} names unknown execution path(s) "
                f"{', '.join(unknown)}; known paths: {', '.join(PATHS)}."
            )
        for path, value in self.peak_flops.items():
            if not _is_positive_number(value):
                raise _bad_profile(
                    f"Hardware profile {self.slug!r}: peak for path {path!r} must be a "
                    f"positive finite number, got {value!r}."
                )
        if not _is_positive_number(self.hbm_bytes_per_s):
            raise _bad_profile(
                f"Hardware profile {self.slug!r}: hbm_bytes_per_s must be a positive finite "
                f"number, got {self.hbm_bytes_per_s!r}."
            )
        if self.device_kind not in DEVICE_KINDS:
            raise _bad_profile(
                f"Hardware profile {self.slug!r}: device_kind must be one of "
                f"{', '.join(DEVICE_KINDS)}, got {self.device_kind!r}."
            )
        # A private copy, so that a caller mutating the dict it passed in cannot change us.
        object.__setattr__(self, "peak_flops", dict(self.peak_flops))

    def peak_for_path(self, path: str) -> float:
        """Peak dense FLOP/s of an execution path; PlatformError if the profile lacks it."""
        try:
            return float(self.peak_flops[path])
        except KeyError:
            defined = ", ".join(p for p in PATHS if p in self.peak_flops) or "none"
            raise PlatformError(
                f"Hardware profile {self.slug!r} has no peak for execution path {path!r} "
                f"(it defines: {defined}).",
                code="platform:missing-hardware-path",
            ) from None

    def peak_for_dtype(self, dtype: str) -> float:
        """Peak dense FLOP/s for a work-model dtype key (``"bf16"``, ``"fp8_e4m3"``, ...).

        The dtype is mapped through ``DTYPE_TO_PATH``; an unknown dtype or a path the
        profile does not define raises PlatformError naming the path and the profile.
        """
        path = DTYPE_TO_PATH.get(dtype)
        if path is None:
            raise PlatformError(
                f"No execution path is known for dtype {dtype!r} (hardware profile "
                f"{self.slug!r}); known dtypes: {', '.join(DTYPE_TO_PATH)}.",
                code="platform:missing-hardware-path",
            )
        return self.peak_for_path(path)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of the profile (the ``hardware`` block of results.json)."""
        return {
            "slug": self.slug,
            "name": self.name,
            "peak_flops": dict(self.peak_flops),
            "hbm_bytes_per_s": self.hbm_bytes_per_s,
            "source": self.source,
            "notes": self.notes,
            "device_kind": self.device_kind,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> HardwareProfile:
        """Build a profile from ``to_dict()`` output; PlatformError on missing or odd keys."""
        missing = sorted({"slug", "name", "peak_flops", "hbm_bytes_per_s"} - set(data))
        if missing:
            raise _bad_profile(f"Hardware profile data lacks key(s): {', '.join(missing)}.")
        extra = sorted(set(data) - _PROFILE_KEYS)
        if extra:
            raise _bad_profile(f"Hardware profile data has unknown key(s): {', '.join(extra)}.")
        if not isinstance(data["peak_flops"], dict):
            raise _bad_profile("Hardware profile data: peak_flops must be an object.")
        return cls(
            slug=str(data["slug"]),
            name=str(data["name"]),
            peak_flops=dict(data["peak_flops"]),
            hbm_bytes_per_s=data["hbm_bytes_per_s"],
            source=str(data.get("source", "")),
            notes=str(data.get("notes", "")),
            device_kind=str(data.get("device_kind", "cuda")),
        )


_HOPPER_SXM_PEAKS: dict[str, float] = {
    "bf16_tc": 989.4e12,
    "fp16_tc": 989.4e12,
    "fp8_e4m3_tc": 1978.9e12,
    "fp32_tf32_tc": 494.7e12,
    "fp32_strict": 66.9e12,
}

_BUILTIN: tuple[HardwareProfile, ...] = (
    HardwareProfile(
        slug="h200-sxm",
        name="NVIDIA H200 SXM",
        peak_flops=dict(_HOPPER_SXM_PEAKS),
        hbm_bytes_per_s=4.8e12,
        source="vendor datasheet (dense)",
        notes=(
            "Dense (sparsity off) datasheet peaks. Measured on one H200 (torch 2.11, "
            "triton 3.6): a device-to-device copy moves 4.27 TB/s (89% of 4.8) and an "
            "8192^3 bf16 GEMM runs at 716 TFLOP/s (72% of 989.4); fractions are against "
            "the datasheet figures, not these."
        ),
        device_kind="cuda",
    ),
    HardwareProfile(
        slug="h100-sxm",
        name="NVIDIA H100 SXM",
        peak_flops=dict(_HOPPER_SXM_PEAKS),
        hbm_bytes_per_s=3.35e12,
        source="vendor datasheet (dense)",
        notes="Dense (sparsity off) datasheet peaks; same compute peaks as H200 SXM.",
        device_kind="cuda",
    ),
    HardwareProfile(
        slug="h20",
        name="NVIDIA H20",
        peak_flops={
            "bf16_tc": 148.0e12,
            "fp16_tc": 148.0e12,
            "fp8_e4m3_tc": 296.0e12,
            "fp32_tf32_tc": 74.0e12,
            "fp32_strict": 44.0e12,
        },
        hbm_bytes_per_s=4.0e12,
        source=(
            "Atrex-Bench release eb8697d5 (Apache-2.0, Alibaba Group), configs/hardware/"
            "H20.yaml; upstream gives 'internal measurement', retrieved 2026-04-23"
        ),
        notes=(
            "Dense peaks as published with Atrex-Bench (arXiv:2607.14541); the paper's "
            "SOL_time_ms for H20 is computed with these figures. FP8 tensor-core "
            "throughput is 2x the BF16/FP16 path."
        ),
        device_kind="cuda",
    ),
    HardwareProfile(
        slug="cpu-dev",
        name="CPU development profile (nominal 2-core box)",
        peak_flops={path: 1e11 for path in PATHS},
        hbm_bytes_per_s=2e10,
        source="nominal figures chosen by the project, not measured",
        notes=(
            "For development only: roofline fractions computed with this profile exist "
            "to exercise the pipeline on a CPU (often through the Triton interpreter) and "
            "are never comparable to GPU figures or to each other across machines."
        ),
        device_kind="cpu",
    ),
)

PROFILES: MappingProxyType[str, HardwareProfile] = MappingProxyType(
    {profile.slug: profile for profile in _BUILTIN}
)
"""The built-in profiles by slug (read-only)."""


def get_profile(slug: str) -> HardwareProfile:
    """The built-in profile ``slug``; UnknownHardwareError listing the known slugs if none."""
    try:
        return PROFILES[slug]
    except KeyError:
        raise UnknownHardwareError(
            f"Unknown hardware profile {slug!r}; known profiles: {', '.join(sorted(PROFILES))}."
        ) from None
