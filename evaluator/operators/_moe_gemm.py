"""Helpers shared by the MoE and GEMM operators (group ``moe_gemm``).

The portal's FP8 convention (docs/decisions.md 2 and 3): every fp8 tensor is
``torch.float8_e4m3fn`` with a maximum of 448, and references clamp to +-448 before each
fp8 cast, so a reference never produces NaN. The fp32 GEMMs of the references are true
fp32 (TF32 off while they run), whatever the process-wide setting is.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch

from evaluator.operators.base import CorrectnessPolicy

FP8_DTYPE = torch.float8_e4m3fn
FP8_MAX = 448.0

# Integer outputs are compared exactly whatever the policy says; this policy only
# matters if an integer operator's output ever became floating (it then means "equal").
EXACT_POLICY = CorrectnessPolicy(rtol=0.0, atol_scale=0.0, atol_floor=0.0)


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


def divide_by_fp8_max(values: torch.Tensor) -> torch.Tensor:
    """``values / 448`` as a correctly rounded fp32 division, on every device.

    PyTorch's CUDA kernel turns division by a Python number into multiplication by its
    (inexact) fp32 reciprocal, while the CPU kernel divides; dividing by a 0-dim tensor
    on the same device is a true IEEE division on both, so CPU and CUDA agree
    (docs/decisions.md 10).
    """
    return values / torch.full((), FP8_MAX, dtype=torch.float32, device=values.device)


def saturating_fp8(values: torch.Tensor, *, in_place: bool = False) -> torch.Tensor:
    """Clamp fp32 values to +-448, then cast (round to nearest even) to float8_e4m3fn.

    ``in_place=True`` clamps ``values`` itself (a temporary the caller owns) instead of a
    copy: the same codes, without a second fp32 tensor of its size.
    """
    clamped = values.clamp_(-FP8_MAX, FP8_MAX) if in_place else values.clamp(-FP8_MAX, FP8_MAX)
    return clamped.to(FP8_DTYPE)


def fp32_copy(values: torch.Tensor) -> torch.Tensor:
    """A new, contiguous fp32 tensor holding ``values`` (``.float()`` returns fp32 input
    itself, and keeps a transposed input's strides), for the helpers' ``in_place`` work,
    which must never write into a caller's tensor."""
    return values.to(torch.float32, copy=True, memory_format=torch.contiguous_format)


def uniform_topk_ids(
    *,
    token_count: int,
    top_k: int,
    num_experts: int,
    device: torch.device,
    generator: torch.Generator,
) -> torch.Tensor:
    """(T, k) int32, independent uniform integers in [0, E) (duplicates within a row possible).

    One ``torch.randint`` draw; for ranges below 2**32 PyTorch draws the same stream
    whether the dtype is int32 or int64, so drawing int32 directly matches upstream.
    """
    return torch.randint(
        0, num_experts, (token_count, top_k), dtype=torch.int32, device=device, generator=generator
    )


def expert_groups(flat_ids: torch.Tensor, num_experts: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Stable sort of positions by expert id: (positions, counts per expert), both int64.

    ``flat_ids`` are the flattened expert ids f_p (p = 0 .. M-1); the result lists, for
    e = 0 .. E-1 in order, the ascending positions p with f_p = e. Ids outside [0, E)
    raise, since they name no expert.
    """
    ids = flat_ids.to(torch.int64)
    if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= num_experts):
        raise ValueError(
            f"expert ids must lie in [0, {num_experts}), got [{int(ids.min())}, {int(ids.max())}]"
        )
    positions = torch.sort(ids, stable=True).indices
    counts = torch.bincount(ids, minlength=num_experts)
    return positions, counts


def check_blocks(rows: int, cols: int, block_rows: int, block_cols: int) -> tuple[int, int]:
    """The (rows/block_rows, cols/block_cols) grid of a 2-D shape; ValueError unless the
    blocks tile it exactly."""
    if rows % block_rows or cols % block_cols:
        raise ValueError(
            f"a ({rows}, {cols}) tensor does not tile into ({block_rows}, {block_cols}) blocks"
        )
    return rows // block_rows, cols // block_cols


def block_max(
    values: torch.Tensor, block_rows: int, block_cols: int, *, signed: bool = False
) -> torch.Tensor:
    """Per (block_rows x block_cols) block of a 2-D tensor: max |value| (or max signed value).

    Returns the (rows/block_rows, cols/block_cols) grid; the shape must tile exactly.
    max |value| is taken as max(max value, -min value) on the grid, the same number as the
    maximum of the absolute values (its sign of zero made +0 as abs gives), without an
    |values| copy of the whole tensor.
    """
    rows, cols = values.shape
    grid_rows, grid_cols = check_blocks(rows, cols, block_rows, block_cols)
    blocked = values.reshape(grid_rows, block_rows, grid_cols, block_cols)
    if signed:
        return blocked.amax(dim=(1, 3))
    return torch.maximum(blocked.amax(dim=(1, 3)), blocked.amin(dim=(1, 3)).neg_()).abs_()


def scale_blocks(
    values: torch.Tensor,
    scales: torch.Tensor,
    block_rows: int,
    block_cols: int,
    *,
    divide: bool = False,
    in_place: bool = False,
) -> torch.Tensor:
    """Multiply (or truly divide) each block of a 2-D tensor by its entry of the scale grid.

    ``scales`` has shape (rows/block_rows, cols/block_cols); elementwise, in the dtype of
    the operands (fp32 here), one rounding per element. ``in_place=True`` writes the result
    into ``values`` (a contiguous temporary the caller owns, e.g. from ``fp32_copy``): the
    same values, without a second tensor of its size.
    """
    rows, cols = values.shape
    grid = check_blocks(rows, cols, block_rows, block_cols)
    if tuple(scales.shape) != grid:
        raise ValueError(f"block scales have shape {tuple(scales.shape)}, expected {grid}")
    blocked = values.reshape(grid[0], block_rows, grid[1], block_cols)
    per_block = scales[:, None, :, None]
    if in_place:
        if not values.is_contiguous():
            raise ValueError("scale_blocks(in_place=True) needs a contiguous tensor")
        scaled = blocked.div_(per_block) if divide else blocked.mul_(per_block)
    else:
        scaled = blocked / per_block if divide else blocked * per_block
    return scaled.reshape(rows, cols)
