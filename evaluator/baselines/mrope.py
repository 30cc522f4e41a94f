"""``mrope`` baseline: the per-band cos/sin rows picked with one ``gather`` over the three
position axes, then q and k rotated (NeoX or GPT-J) in one pass over a concatenated view.

Differs from the reference: q and k are rotated together (one set of elementwise kernels on
``cat(q, k)`` viewed as heads) and split again, and the axis of each frequency band is
built by tensor comparisons with the section bounds (non-interleaved) or the residues mod 3
(interleaved) instead of a Python list. Still correct: the same axis per frequency index
(for f >= the sections' sum the non-interleaved rule keeps axis 2), the rotation in fp32
on upcast values with one rounding to bf16, dims beyond the rotary width copied.
"""

from __future__ import annotations

import torch
from torch import nn


def _band_axes(half: int, sections: list[int], interleaved: bool, device: torch.device):
    """The position axis (0, 1 or 2) of each frequency index f < half, as a long tensor."""
    f = torch.arange(half, device=device)
    s0, s1, s2 = (int(s) for s in sections)
    if interleaved:
        axes = torch.zeros(half, dtype=torch.long, device=device)
        axes[(f % 3 == 1) & (f <= 3 * s1)] = 1
        axes[(f % 3 == 2) & (f <= 3 * s2)] = 2
        return axes
    return (f >= s0).long() + (f >= s0 + s1).long()


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

    def forward(
        self, q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
    ) -> dict[str, torch.Tensor]:
        tokens, dim, rd = q.shape[0], self.head_size, self.rotary_dim
        half = rd // 2
        axes = _band_axes(half, self.mrope_section, self.mrope_interleaved, cos.device)
        index = axes.view(1, 1, half).expand(1, tokens, half)
        c = cos.gather(0, index)[0].float().unsqueeze(1)  # (T, 1, half)
        s = sin.gather(0, index)[0].float().unsqueeze(1)
        heads = torch.cat((q, k), dim=1).view(tokens, -1, dim)
        rot = heads[..., :rd].float()
        if self.is_neox_style:
            x1, x2 = rot[..., :half], rot[..., half:]
            rotated = torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1)
        else:
            x1, x2 = rot[..., 0::2], rot[..., 1::2]
            rotated = torch.stack((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1).flatten(-2)
        out = torch.cat((rotated.to(q.dtype), heads[..., rd:]), dim=-1).view(tokens, -1)
        q_out, k_out = out.split((q.shape[1], k.shape[1]), dim=1)
        return {"q": q_out.contiguous(), "k": k_out.contiguous()}
