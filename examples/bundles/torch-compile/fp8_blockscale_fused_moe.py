"""torch.compile baseline for ``fp8_blockscale_fused_moe`` (the reference's arithmetic).

On CUDA the forward runs through ``torch.compile`` (inductor); on CPU it runs eagerly (see
the bundle's README). A baseline, not a submission: the harness counts inductor kernels and
PyTorch ops as fallback.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import nn
from torch.nn import functional


def _check_blocks(rows: int, cols: int, block_rows: int, block_cols: int) -> tuple[int, int]:
    if rows % block_rows or cols % block_cols:
        raise ValueError(
            f"a ({rows}, {cols}) tensor does not tile into ({block_rows}, {block_cols}) blocks"
        )
    return rows // block_rows, cols // block_cols


def scale_blocks(
    values: torch.Tensor,
    scales: torch.Tensor,
    block_rows: int,
    block_cols: int,
    *,
    divide: bool = False,
) -> torch.Tensor:
    """Multiply (or truly divide) each block of a 2-D tensor by its entry of the scale grid.

    ``scales`` has shape (rows/block_rows, cols/block_cols); elementwise, in the dtype of
    the operands (fp32 here), one rounding per element.
    """
    rows, cols = values.shape
    grid = _check_blocks(rows, cols, block_rows, block_cols)
    if tuple(scales.shape) != grid:
        raise ValueError(f"block scales have shape {tuple(scales.shape)}, expected {grid}")
    blocked = values.reshape(grid[0], block_rows, grid[1], block_cols)
    per_block = scales[:, None, :, None]
    scaled = blocked / per_block if divide else blocked * per_block
    return scaled.reshape(rows, cols)


def _dequantise(
    weights: torch.Tensor, scales: torch.Tensor, block_rows: int, block_cols: int
) -> torch.Tensor:
    """f32(weights) times the scale of each (block_rows x block_cols) block."""
    return scale_blocks(weights.float(), scales.float(), block_rows, block_cols)


FP8_DTYPE = torch.float8_e4m3fn


FP8_MAX = 448.0


def saturating_fp8(values: torch.Tensor) -> torch.Tensor:
    """Clamp fp32 values to +-448, then cast (round to nearest even) to float8_e4m3fn."""
    return values.clamp(-FP8_MAX, FP8_MAX).to(FP8_DTYPE)


@contextmanager
def strict_fp32_matmul() -> Iterator[None]:
    """Run the enclosed fp32 matmuls in true fp32 (no TF32), restoring the setting after.

    ``torch.set_float32_matmul_precision("highest")`` is the documented switch; it also
    turns off ``torch.backends.cuda.matmul.allow_tf32``. PyTorch's default is already
    "highest", but a harness or a candidate imported earlier may have changed it.
    """
    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest")
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(previous)


class Reference(nn.Module):
    """out = fp8(clamp(sum_s w[t, s] * FFN_{ids[t, s]}(h[t]), +-448)), FFN on dequantised fp32."""

    def __init__(
        self,
        num_experts: int,
        intermediate_size: int,
        top_k: int,
        scale_block_n: int = 128,
        scale_block_k: int = 128,
    ) -> None:
        super().__init__()
        # Stored but unused (sizes come from the tensors), as upstream.
        self.num_experts = num_experts
        self.intermediate_size = intermediate_size
        self.top_k = top_k
        self.scale_block_n = scale_block_n
        self.scale_block_k = scale_block_k

    def forward(
        self,
        hidden_states: torch.Tensor,
        w1: torch.Tensor,
        w2: torch.Tensor,
        topk_weights: torch.Tensor,
        topk_ids: torch.Tensor,
        a_scale: torch.Tensor,
        fc1_scale: torch.Tensor,
        fc2_scale: torch.Tensor,
    ) -> torch.Tensor:
        block_n, block_k = self.scale_block_n, self.scale_block_k
        tokens, hidden = hidden_states.shape
        inter = w1.shape[1] // 2
        slots = topk_ids.shape[1]
        h = _dequantise(hidden_states, a_scale, 1, block_k)
        ids = topk_ids.to(torch.int64)
        weighted = torch.zeros(
            (tokens, slots, hidden), dtype=torch.float32, device=hidden_states.device
        )
        with strict_fp32_matmul():
            for expert in torch.unique(ids).tolist():
                token_index, slot_index = torch.nonzero(ids == expert, as_tuple=True)
                w1e = _dequantise(w1[expert], fc1_scale[expert], block_n, block_k)
                z = h[token_index] @ w1e.T
                del w1e
                act = functional.silu(z[:, :inter]) * z[:, inter : 2 * inter]
                del z
                w2e = _dequantise(w2[expert], fc2_scale[expert], block_k, block_n)
                y = act @ w2e.T
                del w2e, act
                weighted[token_index, slot_index] = y * topk_weights[
                    token_index, slot_index
                ].float().unsqueeze(1)
        out = weighted[:, 0].clone() if slots else weighted.sum(dim=1)
        for slot in range(1, slots):
            out.add_(weighted[:, slot])
        # Upstream casts to the dtype of hidden_states, which is float8_e4m3fn here.
        return saturating_fp8(out)


@functools.cache
def _compiled_forward():
    return torch.compile(Reference.forward)


class Model(Reference):
    def forward(
        self,
        hidden_states: torch.Tensor,
        w1: torch.Tensor,
        w2: torch.Tensor,
        topk_weights: torch.Tensor,
        topk_ids: torch.Tensor,
        a_scale: torch.Tensor,
        fc1_scale: torch.Tensor,
        fc2_scale: torch.Tensor,
    ) -> torch.Tensor:
        if hidden_states.is_cuda:
            return _compiled_forward()(
                self, hidden_states, w1, w2, topk_weights, topk_ids, a_scale, fc1_scale, fc2_scale
            )
        return super().forward(
            hidden_states, w1, w2, topk_weights, topk_ids, a_scale, fc1_scale, fc2_scale
        )
