"""Triton templates the example agent fills in: one kernel per operator, with a tile
configuration per size bucket (rows per program, column block, warps) chosen by the
search. The generated module dispatches on the number of rows at call time."""

from __future__ import annotations

from dataclasses import dataclass

# Rows of the flattened input that decide the bucket: decode-like, middle, prefill-like.
BUCKETS: tuple[tuple[str, int | None], ...] = (("small", 64), ("medium", 1024), ("large", None))
# The widest tile a program holds (elements); bigger tiles would spill registers.
MAX_TILE = 32768


@dataclass(frozen=True)
class Template:
    """An operator's kernel template: its search dimensions and where the search starts."""

    operator: str
    dimensions: dict[str, tuple[int, ...]]
    seeds: tuple[dict[str, int], ...]
    body: str

    def render(self, configs: dict[str, dict[str, int]]) -> str:
        """The kernel module for one configuration per bucket."""
        table = repr({name: dict(sorted(config.items())) for name, config in configs.items()})
        thresholds = repr([(name, limit) for name, limit in BUCKETS])
        header = (
            f'"""{self.operator} from the tile-search example agent (no model): tile '
            'configuration per row-count bucket."""\n\n'
            "import torch\nimport triton\nimport triton.language as tl\nfrom torch import nn\n\n"
            f"CONFIGS = {table}\n"
            f"BUCKETS = {thresholds}\n"
            f"MAX_TILE = {MAX_TILE}\n\n\n"
            "def config_for(rows, block):\n"
            "    for name, limit in BUCKETS:\n"
            "        if limit is None or rows <= limit:\n"
            "            config = dict(CONFIGS[name])\n"
            "            break\n"
            "    # Keep a program's tile within MAX_TILE elements (rows stay a power of two).\n"
            '    while config["ROWS"] > 1 and config["ROWS"] * block > MAX_TILE:\n'
            '        config["ROWS"] //= 2\n'
            "    return config\n"
        )
        return header + self.body


_ROW_NORM_DIMENSIONS = {"ROWS": (1, 2, 4, 8), "WARPS": (1, 2, 4, 8, 16)}
_ROW_NORM_SEEDS = (
    {"ROWS": 1, "WARPS": 4},
    {"ROWS": 4, "WARPS": 8},
    {"ROWS": 8, "WARPS": 16},
    {"ROWS": 2, "WARPS": 1},
)

RMS_NORM = Template(
    operator="rms_norm",
    dimensions=_ROW_NORM_DIMENSIONS,
    seeds=_ROW_NORM_SEEDS,
    body="""

@triton.jit
def _rms_norm_rows(x_ptr, w_ptr, out_ptr, n_rows, x_stride, out_stride, hidden, eps,
                   ROWS: tl.constexpr, BLOCK: tl.constexpr):
    rows = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK)
    col_mask = cols < hidden
    mask = (rows < n_rows)[:, None] & col_mask[None, :]
    x = tl.load(x_ptr + rows[:, None] * x_stride + cols[None, :], mask=mask, other=0.0)
    x = x.to(tl.float32)
    inv_rms = tl.rsqrt(tl.sum(x * x, axis=1) / hidden + eps)
    w = tl.load(w_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)
    out = x * inv_rms[:, None] * w[None, :]
    tl.store(out_ptr + rows[:, None] * out_stride + cols[None, :],
             out.to(out_ptr.dtype.element_ty), mask=mask)


class Model(nn.Module):
    def __init__(self, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        hidden = x.shape[-1]
        rows = x.reshape(-1, hidden)
        out = torch.empty_like(rows)
        n_rows = rows.shape[0]
        if n_rows > 0:
            block = triton.next_power_of_2(hidden)
            config = config_for(n_rows, block)
            _rms_norm_rows[(triton.cdiv(n_rows, config["ROWS"]),)](
                rows, weight, out, n_rows, rows.stride(0), out.stride(0), hidden, self.eps,
                ROWS=config["ROWS"], BLOCK=block, num_warps=config["WARPS"])
        return out.view(x.shape)
""",
)

FUSED_ADD_RMS_NORM = Template(
    operator="fused_add_rms_norm",
    dimensions=_ROW_NORM_DIMENSIONS,
    seeds=_ROW_NORM_SEEDS,
    body="""

@triton.jit
def _fused_add_rms_norm_rows(x_ptr, r_ptr, w_ptr, out_ptr, r_out_ptr, n_rows, stride, hidden,
                             eps, ROWS: tl.constexpr, BLOCK: tl.constexpr):
    rows = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK)
    col_mask = cols < hidden
    mask = (rows < n_rows)[:, None] & col_mask[None, :]
    offsets = rows[:, None] * stride + cols[None, :]
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    residual = tl.load(r_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    summed = (x + residual).to(r_out_ptr.dtype.element_ty)
    tl.store(r_out_ptr + offsets, summed, mask=mask)
    s = summed.to(tl.float32)
    inv_rms = tl.rsqrt(tl.sum(s * s, axis=1) / hidden + eps)
    w = tl.load(w_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)
    out = s * inv_rms[:, None] * w[None, :]
    tl.store(out_ptr + offsets, out.to(out_ptr.dtype.element_ty), mask=mask)


class Model(nn.Module):
    def __init__(self, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor):
        hidden = x.shape[-1]
        x_rows = x.reshape(-1, hidden).contiguous()
        r_rows = residual.reshape(-1, hidden).contiguous()
        out = torch.empty_like(x_rows)
        r_out = torch.empty_like(x_rows)
        n_rows = x_rows.shape[0]
        if n_rows > 0:
            block = triton.next_power_of_2(hidden)
            config = config_for(n_rows, block)
            _fused_add_rms_norm_rows[(triton.cdiv(n_rows, config["ROWS"]),)](
                x_rows, r_rows, weight, out, r_out, n_rows, x_rows.stride(0), hidden, self.eps,
                ROWS=config["ROWS"], BLOCK=block, num_warps=config["WARPS"])
        return {"out": out.view(x.shape), "residual": r_out.view(x.shape)}
""",
)

SILU_AND_MUL = Template(
    operator="silu_and_mul",
    dimensions={
        "ROWS": (1, 2, 4, 8),
        "BLOCK": (256, 512, 1024, 2048, 4096),
        "WARPS": (1, 2, 4, 8, 16),
    },
    seeds=(
        {"ROWS": 1, "BLOCK": 1024, "WARPS": 4},
        {"ROWS": 4, "BLOCK": 512, "WARPS": 4},
        {"ROWS": 1, "BLOCK": 4096, "WARPS": 16},
        {"ROWS": 8, "BLOCK": 256, "WARPS": 2},
    ),
    body="""

@triton.jit
def _silu_and_mul_tiles(x_ptr, out_ptr, n_rows, x_stride, out_stride, half,
                        ROWS: tl.constexpr, BLOCK: tl.constexpr):
    rows = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = (rows < n_rows)[:, None] & (cols < half)[None, :]
    gate_ptrs = x_ptr + rows[:, None] * x_stride + cols[None, :]
    gate = tl.load(gate_ptrs, mask=mask, other=0.0).to(tl.float32)
    up = tl.load(gate_ptrs + half, mask=mask, other=0.0).to(tl.float32)
    silu = (gate * tl.sigmoid(gate)).to(out_ptr.dtype.element_ty).to(tl.float32)
    tl.store(out_ptr + rows[:, None] * out_stride + cols[None, :],
             (silu * up).to(out_ptr.dtype.element_ty), mask=mask)


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        half = x.shape[-1] // 2
        rows = x.reshape(-1, x.shape[-1])
        n_rows = rows.shape[0]
        out = torch.empty((n_rows, half), dtype=x.dtype, device=x.device)
        if n_rows > 0 and half > 0:
            config = config_for(n_rows, 1)
            block = min(config["BLOCK"], triton.next_power_of_2(half))
            rows_per = max(1, min(config["ROWS"], MAX_TILE // block))
            grid = (triton.cdiv(n_rows, rows_per), triton.cdiv(half, block))
            _silu_and_mul_tiles[grid](rows, out, n_rows, rows.stride(0), out.stride(0), half,
                                      ROWS=rows_per, BLOCK=block, num_warps=config["WARPS"])
        return out.view(*x.shape[:-1], half)
""",
)

TEMPLATES: dict[str, Template] = {
    template.operator: template for template in (RMS_NORM, FUSED_ADD_RMS_NORM, SILU_AND_MUL)
}


def rows_of(operator: str, input_kwargs: dict) -> int:
    """The number of rows a shape gives the kernel (what picks the bucket)."""
    if "token_count" in input_kwargs:
        return int(input_kwargs["token_count"])
    shape = input_kwargs.get("shape") or [1]
    rows = 1
    for size in shape[:-1]:
        rows *= int(size)
    return rows


def bucket_of(rows: int) -> str:
    for name, limit in BUCKETS:
        if limit is None or rows <= limit:
            return name
    return BUCKETS[-1][0]
