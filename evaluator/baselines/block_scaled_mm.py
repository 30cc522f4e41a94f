"""``block_scaled_mm`` baseline: dequantise a and b to fp32 with their block scales, one fp32
``torch.matmul``.

Differs from the reference: the scales are applied to the operands (a per row and K-group,
b per (group_n x group_k) block, by broadcasting over block views) and the product is one
GEMM over the full K, instead of one GEMM per K-group whose partial results are scaled and
summed, in row chunks. Still correct: sum_kappa (a_ik sa_i,kappa)(b_jk sb_j,kappa) is the
same sum; scaling the operands first changes only fp32 rounding (~1e-7 relative), far
inside the operator's rtol 2**-11. The GEMM is true fp32 (TF32 off while it runs, as the
reference's): TF32 operands would be off by ~1e-3 relative and fail that rule.
"""

from __future__ import annotations

import torch
from torch import nn

from evaluator.operators._moe_gemm import strict_fp32_matmul


class Model(nn.Module):
    """out = (f32(a) * a_scales per K-group) @ (f32(b) * b_scales per block)^T."""

    def __init__(self, group_n: int, group_k: int) -> None:
        super().__init__()
        self.group_n = group_n
        self.group_k = group_k

    def forward(
        self, a: torch.Tensor, b: torch.Tensor, a_scales: torch.Tensor, b_scales: torch.Tensor
    ) -> torch.Tensor:
        (m, k), n = a.shape, b.shape[0]
        gn, gk = self.group_n, self.group_k
        a_f32 = (a.float().view(m, k // gk, gk) * a_scales.unsqueeze(-1)).view(m, k)
        b_f32 = b.float().view(n // gn, gn, k // gk, gk) * b_scales[:, None, :, None]
        with strict_fp32_matmul():
            return a_f32 @ b_f32.view(n, k).T
