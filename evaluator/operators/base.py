"""What every built-in operator provides: reference model, inputs, work model, policy.

An operator is described by an :class:`OperatorSpec`. The reference ``Model`` follows
the upstream Atrex-Bench interface (``Model(**init_kwargs)``, ``forward(**inputs)``),
``make_inputs`` draws the documented tensors in the documented order, and ``work``
gives the semantic W/Q figures as formulas of the shape's kwargs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn


@dataclass(frozen=True)
class Work:
    """Semantic work of one call: FLOPs per dtype key and HBM bytes read/written."""

    w_flops: dict[str, int]
    q_read: int
    q_write: int


@dataclass(frozen=True)
class Fp8CodePolicy:
    """How a ``float8_e4m3fn`` output leaf is compared: code by code, not as numbers.

    The codes are placed on the e4m3fn grid (the 253 finite values from -448 to 448 in
    order, +0 and -0 the same point) and an element's distance is the number of grid
    steps between the candidate's code and the reference's. Every element must be at
    most ``max_steps`` steps away, and at most ``max_step_share`` of a leaf's elements
    may differ at all (rounding ties that a different, valid fp32 summation order breaks
    the other way); that share is reported as the leaf's ``mismatch_share``. A NaN code
    passes only where the reference's is NaN (references saturate at +-448, so never).

    With ``scale_leaf`` (the name of the output leaf holding the scales: one per row,
    ``(T,)`` or ``(T, 1)``, or one per group of columns, ``(T, H/g)``), that leaf is
    compared first, under its own rule, and ``max_abs_error`` is the largest error of the
    dequantised values, each code times its own side's scale. Codes one step apart then
    satisfy ``|q_c*s_c - q_r*s_r| <= step(q_r)*s_r + |s_c - s_r|*|q_c|`` with
    ``step(q) = 2**(max(floor(log2|q|), -6) - 3)`` (``2**-9`` at 0), since one grid step
    is at most ``step(q_r)``. Without a scale leaf the codes are the values.
    """

    max_step_share: float = 1e-3
    max_steps: int = 1
    scale_leaf: str | None = None


@dataclass(frozen=True)
class CorrectnessPolicy:
    """How a candidate's outputs are compared with the reference.

    An element of a floating leaf passes when ``|cand - ref| <= atol + rtol * |ref|``
    (relative term on the reference, never on the candidate), with ``atol = atol_scale *
    max|ref|`` (never below ``atol_floor``), so the absolute slack follows the output's
    magnitude and an all-zero or constant answer cannot pass. A leaf passes when the share
    of failing elements is at most ``max_mismatch_share``; with ``tight``, it must also
    pass that second, tighter rule (for example rtol 1e-6 on at least 99% of the
    elements). Integer and boolean outputs are exact. ``float8_e4m3fn`` leaves are
    compared as codes (:class:`Fp8CodePolicy`; the default one unless ``leaves`` names
    another). ``leaves`` gives a leaf, by its name in messages ("out", a dict key,
    "output[i]"), its own rule; the other leaves use this policy. ``trials`` is the
    operator's, whatever the leaf rules.
    """

    rtol: float
    atol_scale: float
    atol_floor: float = 1e-12
    max_mismatch_share: float = 0.0
    trials: int = 3
    check_dtype: bool = True
    tight: CorrectnessPolicy | None = None
    leaves: tuple[tuple[str, CorrectnessPolicy | Fp8CodePolicy], ...] = ()

    def rule_for(self, name: str | None, dtype: torch.dtype) -> CorrectnessPolicy | Fp8CodePolicy:
        """The rule of the output leaf ``name`` (of dtype ``dtype``)."""
        for leaf, rule in self.leaves:
            if leaf == name:
                return rule
        if dtype == torch.float8_e4m3fn:
            return DEFAULT_FP8_CODES
        return self


DEFAULT_FP8_CODES = Fp8CodePolicy()

# One bf16 step is 2**-8 .. 2**-7 of a value's magnitude. The Triton CPU interpreter
# truncates fp32->bf16, and an operator with two rounding points (silu_and_mul) can then
# land two steps away; rtol = 2**-6 covers that, while an answer scaled by 1.02 still
# fails on every element whose magnitude is above atol / 0.004 (the large ones).
BF16_POLICY = CorrectnessPolicy(rtol=2.0**-6, atol_scale=1e-3)
FP16_POLICY = CorrectnessPolicy(rtol=2.0**-9, atol_scale=1e-4)
FP32_POLICY = CorrectnessPolicy(rtol=1e-5, atol_scale=1e-6)


@dataclass(frozen=True)
class OperatorSpec:
    """A built-in operator: identity, reference, input generator, work model, policy."""

    slug: str
    atrex_id: str
    model_class: type[nn.Module]
    input_maker: Callable[..., dict[str, torch.Tensor]]
    work_model: Callable[[Mapping[str, Any], Mapping[str, Any]], Work]
    policy: CorrectnessPolicy
    dtype: str
    phase: str
    output_names: tuple[str, ...] = field(default=("out",))

    def make_inputs(
        self, *, device: str | torch.device, seed: int, **input_kwargs: Any
    ) -> dict[str, torch.Tensor]:
        """Draw the named forward inputs of one shape from a generator seeded with ``seed``."""
        generator = torch.Generator(device=torch.device(device))
        generator.manual_seed(int(seed))
        return self.input_maker(device=torch.device(device), generator=generator, **input_kwargs)

    def work(self, init_kwargs: Mapping[str, Any] | None, input_kwargs: Mapping[str, Any]) -> Work:
        """The semantic W (FLOPs per dtype) and Q (bytes) of one shape."""
        return self.work_model(init_kwargs or {}, input_kwargs)

    def build_reference(self, init_kwargs: Mapping[str, Any] | None) -> nn.Module:
        """Construct the reference ``Model(**init_kwargs)``."""
        return self.model_class(**(init_kwargs or {}))


def randn_bf16(
    shape: tuple[int, ...],
    *,
    device: torch.device,
    generator: torch.Generator,
    scale: float | None = None,
) -> torch.Tensor:
    """N(0,1) drawn directly in bf16, optionally times a Python float (rounded to bf16)."""
    tensor = torch.randn(shape, dtype=torch.bfloat16, device=device, generator=generator)
    return tensor if scale is None else tensor * scale
