"""``fp8_blockscale_fused_moe`` baseline: dequantise the activations once and each used
expert's weights by block broadcasting, fp32 GEMMs on the expert's slots (sorted once),
the weighted results added into an fp32 (T, H) output, saturating fp8 cast.

Differs from the reference: the slots are grouped by one stable sort and one host
synchronisation for the counts (instead of ``unique`` plus a ``nonzero`` per expert), the
block scales are applied through (rows/b, b, cols/b, b) views, and each weighted slot result
goes straight into the output with ``index_add_`` instead of a (T, k, H) buffer summed in
slot order. The loop over experts is the eager MoE every serving engine's torch-native path
has; there is no loop over tokens. Still correct: the same dequantised fp32 operands and
true fp32 GEMMs (TF32 off while they run; bf16 GEMMs would flip about 1% of the output codes
per GEMM), only the order of the k slot additions differs (a code one step off in about
0.002% of elements, the rule allows 2%); the output is clamped to +-448 before the
float8_e4m3fn cast (docs/decisions.md 2, 3).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional

from evaluator.operators._moe_gemm import saturating_fp8, strict_fp32_matmul


def _dequantise(values: torch.Tensor, scales: torch.Tensor, block_rows: int, block_cols: int):
    """f32(values) times the scale of its (block_rows x block_cols) block, by broadcasting."""
    rows, cols = values.shape
    blocked = values.float().view(rows // block_rows, block_rows, cols // block_cols, block_cols)
    return (blocked * scales.float()[:, None, :, None]).view(rows, cols)


class Model(nn.Module):
    """out = fp8(clamp(sum_s w[t, s] * FFN_{ids[t, s]}(h[t]), +-448)), fp32 FFN."""

    def __init__(
        self,
        num_experts: int,
        intermediate_size: int,
        top_k: int,
        scale_block_n: int = 128,
        scale_block_k: int = 128,
    ) -> None:
        super().__init__()
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
        bn, bk = self.scale_block_n, self.scale_block_k
        slots, inter = topk_ids.shape[1], w1.shape[1] // 2
        h = _dequantise(hidden_states, a_scale, 1, bk)
        flat_ids = topk_ids.flatten()
        order = torch.sort(flat_ids, stable=True).indices
        token_of = order // slots
        weight_of = topk_weights.flatten()[order].float().unsqueeze(1)
        counts = torch.bincount(flat_ids, minlength=w1.shape[0]).tolist()
        out = torch.zeros(h.shape, dtype=torch.float32, device=h.device)
        start = 0
        with strict_fp32_matmul():
            for expert, count in enumerate(counts):
                if count == 0:
                    continue
                rows = slice(start, start + count)
                start += count
                z = h[token_of[rows]] @ _dequantise(w1[expert], fc1_scale[expert], bn, bk).T
                act = functional.silu(z[:, :inter]) * z[:, inter:]
                y = act @ _dequantise(w2[expert], fc2_scale[expert], bk, bn).T
                out.index_add_(0, token_of[rows], y * weight_of[rows])
        return saturating_fp8(out)
