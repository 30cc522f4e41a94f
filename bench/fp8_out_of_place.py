"""The fp8 operators' quantisation as it was before it worked in place (the code of
evaluator/operators/ at a22f28c), to prove the in-place code gives the same bits.

``out_of_place()`` puts the old helpers, generators' quantisers and reference forwards back
into the operator modules for the duration of a ``with`` block; ``same_bits`` compares two
tensors' bytes (NaN-safe, -0 distinct from +0); ``compare_shape`` draws one shape's inputs
and runs its reference both ways. Used by tests/evaluator/operators/test_fp8_in_place.py on
the CPU and by bench/h200_session/fp8_quantise_check.py on CUDA.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any
from unittest import mock

import torch

from evaluator.operators import (
    _moe_gemm,
    _norms_quant,
    block_scaled_mm,
    fp8_blockscale_fused_moe,
    fp8_dynamic_per_token_quant,
    fused_rmsnorm_quant,
    get_operator,
    per_token_group_quant_fp8,
)

# The operators whose generator or reference quantises to fp8 (and was changed).
OPERATORS = (
    "block_scaled_mm",
    "fp8_blockscale_fused_moe",
    "fp8_dynamic_per_token_quant",
    "fused_rmsnorm_quant",
    "per_token_group_quant_fp8",
)


# ------------------------------------------------------------------ the old helpers
def block_max(values, block_rows, block_cols, *, signed=False):
    rows, cols = values.shape
    grid_rows, grid_cols = _moe_gemm.check_blocks(rows, cols, block_rows, block_cols)
    blocked = values.reshape(grid_rows, block_rows, grid_cols, block_cols)
    return (blocked if signed else blocked.abs()).amax(dim=(1, 3))


def scale_blocks(values, scales, block_rows, block_cols, *, divide=False, in_place=False):
    """The old, out-of-place scale_blocks (``in_place`` accepted and ignored)."""
    rows, cols = values.shape
    grid = _moe_gemm.check_blocks(rows, cols, block_rows, block_cols)
    blocked = values.reshape(grid[0], block_rows, grid[1], block_cols)
    per_block = scales[:, None, :, None]
    scaled = blocked / per_block if divide else blocked * per_block
    return scaled.reshape(rows, cols)


def saturating_fp8(values, *, in_place=False):
    """The old, out-of-place saturating cast (``in_place`` accepted and ignored)."""
    return values.clamp(-448.0, 448.0).to(torch.float8_e4m3fn)


# ------------------------------------------------------------------ the old generators
def _moe_dequantise(weights, scales, block_rows, block_cols):
    return scale_blocks(weights.float(), scales.float(), block_rows, block_cols)


def _moe_quantise_blocks(values, block_rows, block_cols):
    values_f32 = values.float()
    scales = _moe_gemm.divide_by_fp8_max(
        block_max(values_f32, block_rows, block_cols).clamp_min(1e-12)
    )
    quantised = saturating_fp8(
        scale_blocks(values_f32, scales, block_rows, block_cols, divide=True)
    )
    return quantised, scales


def _moe_quantise_experts(weights, block_rows, block_cols):
    experts, rows, cols = weights.shape
    quantised = torch.empty((experts, rows, cols), dtype=torch.float8_e4m3fn, device=weights.device)
    scales = torch.empty(
        (experts, rows // block_rows, cols // block_cols),
        dtype=torch.float32,
        device=weights.device,
    )
    for expert in range(experts):
        quantised[expert], scales[expert] = _moe_quantise_blocks(
            weights[expert], block_rows, block_cols
        )
    return quantised, scales


def _mm_quantise_b(b_raw, group_n, group_k):
    scales = _moe_gemm.divide_by_fp8_max(block_max(b_raw, group_n, group_k, signed=True)).clamp_min(
        1e-10
    )
    return saturating_fp8(scale_blocks(b_raw, scales, group_n, group_k, divide=True)), scales


def _mm_quantise_a(a_raw, group_k):
    scales = _moe_gemm.divide_by_fp8_max(block_max(a_raw, 1, group_k)).clamp_min(1e-10)
    return saturating_fp8(scale_blocks(a_raw, scales, 1, group_k, divide=True)), scales


# ------------------------------------------------------------------ the old references
def _group_quant_forward(self, x):
    tokens, hidden = x.shape
    group = self.group_size
    groups = hidden // group
    quantized = torch.empty((tokens, hidden), dtype=torch.float8_e4m3fn, device=x.device)
    scales = torch.empty((tokens, groups), dtype=torch.float32, device=x.device)
    for rows in _norms_quant.row_chunks(tokens, hidden):
        xf = x[rows].float().reshape(-1, groups, group)
        group_max = xf.abs().amax(dim=-1)
        scale = _norms_quant.divide_by_fp8_max(group_max).clamp_min(1e-10)
        quantized[rows] = saturating_fp8(xf / scale.unsqueeze(-1)).reshape(-1, hidden)
        scales[rows] = scale
    return {"quantized": quantized, "scales": scales}


def _dynamic_quant_forward(self, x):
    xf = x.float()
    row_max = xf.abs().amax(dim=-1).clamp_min(1e-12)
    scale = _norms_quant.divide_by_fp8_max(row_max)
    inverse = torch.reciprocal(scale)
    q = saturating_fp8(xf * inverse.unsqueeze(-1))
    return q, scale


def _rmsnorm_quant_forward(self, x, residual, weight):
    summed = x + residual
    sf = summed.float()
    inv_rms = torch.rsqrt(sf.square().mean(dim=-1, keepdim=True) + self.eps)
    normed = (sf * inv_rms * weight.float()).to(x.dtype).float()
    scale = _norms_quant.divide_by_fp8_max(normed.abs().amax(dim=-1, keepdim=True))
    scale = torch.where(scale == 0, torch.ones_like(scale), scale)
    quantized = saturating_fp8(normed / scale)
    return quantized, scale, summed


@contextlib.contextmanager
def out_of_place() -> Iterator[None]:
    """Within the block, the operator modules compute as before the in-place change."""
    patches = [
        (_moe_gemm, "block_max", block_max),
        (_moe_gemm, "scale_blocks", scale_blocks),
        (_moe_gemm, "saturating_fp8", saturating_fp8),
        (_norms_quant, "saturating_fp8", saturating_fp8),
        (fp8_blockscale_fused_moe, "block_max", block_max),
        (fp8_blockscale_fused_moe, "scale_blocks", scale_blocks),
        (fp8_blockscale_fused_moe, "saturating_fp8", saturating_fp8),
        (fp8_blockscale_fused_moe, "_dequantise", _moe_dequantise),
        (fp8_blockscale_fused_moe, "_quantise_blocks", _moe_quantise_blocks),
        (fp8_blockscale_fused_moe, "_quantise_experts", _moe_quantise_experts),
        (block_scaled_mm, "_quantise_a", _mm_quantise_a),
        (block_scaled_mm, "_quantise_b", _mm_quantise_b),
        (per_token_group_quant_fp8.Model, "forward", _group_quant_forward),
        (fp8_dynamic_per_token_quant.Model, "forward", _dynamic_quant_forward),
        (fused_rmsnorm_quant.Model, "forward", _rmsnorm_quant_forward),
    ]
    with contextlib.ExitStack() as stack:
        for owner, name, value in patches:
            stack.enter_context(mock.patch.object(owner, name, value))
        yield


# ------------------------------------------------------------------ comparing
def leaves(value: Any, prefix: str = "out") -> dict[str, torch.Tensor]:
    """The tensors of an output (a tensor, a tuple/list or a dict of them), by path."""
    if isinstance(value, torch.Tensor):
        return {prefix: value}
    if isinstance(value, Mapping):
        return {
            path: tensor
            for key, item in value.items()
            for path, tensor in leaves(item, f"{prefix}.{key}").items()
        }
    found: dict[str, torch.Tensor] = {}
    for index, item in enumerate(value):
        found.update(leaves(item, f"{prefix}[{index}]"))
    return found


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """The same dtype, shape and bytes (NaN payloads and the sign of zero included)."""
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    return torch.equal(
        a.detach().contiguous().view(torch.uint8), b.detach().contiguous().view(torch.uint8)
    )


def _run(operator: str, init_kwargs, input_kwargs, *, device, seed):
    spec = get_operator(operator)
    inputs = spec.make_inputs(device=device, seed=seed, **input_kwargs)
    before_call = {name: tensor.clone() for name, tensor in inputs.items()}
    with torch.inference_mode():
        output = spec.build_reference(init_kwargs).to(device)(**inputs)
    untouched = all(same_bits(before_call[n], inputs[n]) for n in inputs)
    return leaves(inputs, "input"), leaves(output), untouched


def compare_shape(
    operator: str,
    init_kwargs: Mapping[str, Any],
    input_kwargs: Mapping[str, Any],
    *,
    device: str | torch.device = "cpu",
    seed: int = 1234,
) -> dict[str, Any]:
    """One shape's inputs and reference output, drawn and run with the code as it is and as
    it was: which tensors differ in any bit, and whether the reference left its inputs
    unchanged (both ways)."""
    new_inputs, new_output, new_untouched = _run(
        operator, init_kwargs, input_kwargs, device=device, seed=seed
    )
    with out_of_place():
        old_inputs, old_output, old_untouched = _run(
            operator, init_kwargs, input_kwargs, device=device, seed=seed
        )
    new, old = {**new_inputs, **new_output}, {**old_inputs, **old_output}
    differ = sorted(
        name for name in new.keys() | old.keys()
        if name not in new or name not in old or not same_bits(new[name], old[name])
    )  # fmt: skip
    return {
        "tensors": sorted(new),
        "elements": sum(t.numel() for t in new.values()),
        "differ": differ,
        "inputs_untouched": new_untouched and old_untouched,
    }
