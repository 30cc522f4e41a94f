"""``mrope`` (atrex_023): multimodal rotary embedding (Qwen2-VL M-RoPE) on q and k, bf16.

Frequency index f ∈ [0, half), half = rotary_dim/2, takes its angle from position axis
axis(f): non-interleaved, 0 for f < s0, 1 for s0 ≤ f < s0+s1, else 2; interleaved, 1 if
f mod 3 = 1 and f ≤ 3·s1, 2 if f mod 3 = 2 and f ≤ 3·s2, else 0. Token t uses
c = cos[axis(f), t, f] and s = sin[axis(f), t, f] (row t of the tables; no positions input).
On every D-sized head chunk of a q or k row, in fp32:
* NeoX (default): x1 = dims [0, half), x2 = dims [half, rd): x1' = x1·c − x2·s,
  x2' = x2·c + x1·s;
* GPT-J (is_neox_style false): pairs (x[2f], x[2f+1]) → (x[2f]·c − x[2f+1]·s,
  x[2f+1]·c + x[2f]·s);
each rounded once to bf16; dims ≥ rd are copied. Returns a dict ``q`` (T, Hq·D), ``k``
(T, Hkv·D) in the inputs' flat layout.

Departures from upstream: none (no fp8 here).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from evaluator.operators.base import BF16_POLICY, OperatorSpec, Work, randn_bf16

CHECKER_NOTES = """\
Dict output {q, k}, bf16, one rounding point: BF16_POLICY. The published shapes use only the
default NeoX, non-interleaved style, and small random angles (cos ≈ 1, the three position
axes nearly alike); the hidden validation variants (docs/decisions.md 6) cover real angles.
"""


def section_axes(half: int, sections: list[int], interleaved: bool) -> list[int]:
    """The position axis (0 temporal, 1 height, 2 width) of each frequency index f < half."""
    s0, s1, s2 = (int(s) for s in sections)
    axes = []
    for f in range(half):
        if interleaved:
            if f % 3 == 1 and f <= 3 * s1:
                axes.append(1)
            elif f % 3 == 2 and f <= 3 * s2:
                axes.append(2)
            else:
                axes.append(0)
        else:
            axes.append(0 if f < s0 else 1 if f < s0 + s1 else 2)
    return axes


class Model(nn.Module):
    """Rotate q and k per head with per-band angles from the three position axes."""

    def __init__(
        self,
        head_size: int,
        rotary_dim: int,
        mrope_section: list[int],
        mrope_interleaved: bool = False,
        is_neox_style: bool = True,
    ) -> None:
        super().__init__()
        self.head_size = head_size
        self.rotary_dim = rotary_dim
        self.mrope_section = list(mrope_section)
        self.mrope_interleaved = mrope_interleaved
        self.is_neox_style = is_neox_style

    def _rotate(self, x: torch.Tensor, c: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
        """Rotate a flat (T, heads·D) tensor with (T, 1, half) tables; one rounding."""
        tokens = x.shape[0]
        heads = x.shape[1] // self.head_size
        rd = self.rotary_dim
        per_head = x.reshape(tokens, heads, self.head_size)
        rot = per_head[..., :rd].float()
        if self.is_neox_style:
            x1, x2 = rot[..., : rd // 2], rot[..., rd // 2 :]
            rotated = torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1)
        else:
            x1, x2 = rot[..., 0::2], rot[..., 1::2]
            rotated = torch.stack((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1).flatten(-2)
        out = torch.cat((rotated.to(x.dtype), per_head[..., rd:]), dim=-1)
        return out.reshape(tokens, heads * self.head_size)

    def forward(
        self, q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
    ) -> dict[str, torch.Tensor]:
        """Dict ``q`` (T, Hq·D) and ``k`` (T, Hkv·D), in the inputs' dtype."""
        half = self.rotary_dim // 2
        axes = torch.tensor(
            section_axes(half, self.mrope_section, self.mrope_interleaved),
            dtype=torch.long,
            device=cos.device,
        )
        index = axes.view(1, 1, half).expand(1, cos.shape[1], half)
        c = cos.float().gather(0, index)[0].unsqueeze(1)  # (T, 1, half)
        s = sin.float().gather(0, index)[0].unsqueeze(1)
        return {"q": self._rotate(q, c, s), "k": self._rotate(k, c, s)}


def make_inputs(
    *,
    device: torch.device,
    generator: torch.Generator,
    token_count: int,
    num_query_heads: int,
    num_kv_heads: int,
    head_size: int,
    rotary_dim: int,
) -> dict[str, torch.Tensor]:
    """q (T, Hq·D), k (T, Hkv·D): 0.02·N(0,1) bf16; then α = 0.1·N(0,1) fp32 (3, T, rd/2);
    cos = cos(α), sin = sin(α)."""
    tokens, dim = int(token_count), int(head_size)
    q = randn_bf16(
        (tokens, int(num_query_heads) * dim), device=device, generator=generator, scale=0.02
    )
    k = randn_bf16(
        (tokens, int(num_kv_heads) * dim), device=device, generator=generator, scale=0.02
    )
    angles = (
        torch.randn(
            (3, tokens, int(rotary_dim) // 2),
            dtype=torch.float32,
            device=device,
            generator=generator,
        )
        * 0.1
    )
    return {"q": q, "k": k, "cos": torch.cos(angles), "sin": torch.sin(angles)}


def work(init_kwargs: Mapping[str, Any], input_kwargs: Mapping[str, Any]) -> Work:
    """W = 6·T·(Hq+Hkv)·half; Q_read = 2·T·(Hq+Hkv)·D + 12·T·rd; Q_write = 2·T·(Hq+Hkv)·D."""
    tokens = int(input_kwargs["token_count"])
    heads = int(input_kwargs["num_query_heads"]) + int(input_kwargs["num_kv_heads"])
    dim, rd = int(input_kwargs["head_size"]), int(input_kwargs["rotary_dim"])
    return Work(
        w_flops={"bf16": 6 * tokens * heads * (rd // 2)},
        q_read=2 * tokens * heads * dim + 12 * tokens * rd,
        q_write=2 * tokens * heads * dim,
    )


SPEC = OperatorSpec(
    slug="mrope",
    atrex_id="atrex_023",
    model_class=Model,
    input_maker=make_inputs,
    work_model=work,
    policy=BF16_POLICY,
    dtype="bf16",
    phase="prefill/decode",
    output_names=("q", "k"),
)
