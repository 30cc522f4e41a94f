"""torch.compile baseline for ``block_scaled_mm`` (the reference's arithmetic).

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

GEMM_CHUNK_ROWS = 16_384


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
    """out = sum_kappa (GEMM_kappa(f32 a, f32 b) * a_scales[:, kappa]) * b_scales[j/gn, kappa]."""

    def __init__(self, group_n: int, group_k: int) -> None:
        super().__init__()
        self.group_n = group_n
        self.group_k = group_k

    def forward(
        self, a: torch.Tensor, b: torch.Tensor, a_scales: torch.Tensor, b_scales: torch.Tensor
    ) -> torch.Tensor:
        m, k = a.shape
        n = b.shape[0]
        group_n, group_k = self.group_n, self.group_k
        if k % group_k or n % group_n:
            raise ValueError(
                f"block_scaled_mm: (n, k) = ({n}, {k}) is not a multiple of "
                f"(group_n, group_k) = ({group_n}, {group_k})"
            )
        k_groups = k // group_k
        b_f32 = b.float()
        # b_scales broadcast along n: column j uses b_scales[j // group_n, kappa].
        column_scales = b_scales.float().repeat_interleave(group_n, dim=0)  # (n, Kb)
        out = torch.empty((m, n), dtype=torch.float32, device=a.device)
        with strict_fp32_matmul():
            for start in range(0, m, GEMM_CHUNK_ROWS):
                rows = slice(start, min(m, start + GEMM_CHUNK_ROWS))
                a_f32 = a[rows].float()
                row_scales = a_scales[rows].float()
                acc: torch.Tensor | None = None
                for kappa in range(k_groups):
                    cols = slice(kappa * group_k, (kappa + 1) * group_k)
                    term = a_f32[:, cols] @ b_f32[:, cols].T
                    term.mul_(row_scales[:, kappa : kappa + 1])
                    term.mul_(column_scales[:, kappa])
                    acc = term if acc is None else acc.add_(term)
                if acc is None:  # k == 0: an empty sum
                    acc = torch.zeros(
                        (rows.stop - rows.start, n), dtype=torch.float32, device=a.device
                    )
                out[rows] = acc
        return out


@functools.cache
def _compiled_forward():
    return torch.compile(Reference.forward)


class Model(Reference):
    def forward(
        self, a: torch.Tensor, b: torch.Tensor, a_scales: torch.Tensor, b_scales: torch.Tensor
    ) -> torch.Tensor:
        if a.is_cuda:
            return _compiled_forward()(self, a, b, a_scales, b_scales)
        return super().forward(a, b, a_scales, b_scales)
