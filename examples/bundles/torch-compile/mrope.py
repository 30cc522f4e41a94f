"""torch.compile baseline for ``mrope`` (the reference's arithmetic).

On CUDA the forward runs through ``torch.compile`` (inductor); on CPU it runs eagerly (see
the bundle's README). A baseline, not a submission: the harness counts inductor kernels and
PyTorch ops as fallback.
"""

from __future__ import annotations

import functools

import torch
from torch import nn


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


class Reference(nn.Module):
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


@functools.cache
def _compiled_forward():
    return torch.compile(Reference.forward)


class Model(Reference):
    def forward(
        self, q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
    ) -> dict[str, torch.Tensor]:
        if q.is_cuda:
            return _compiled_forward()(self, q, k, cos, sin)
        return super().forward(q, k, cos, sin)
