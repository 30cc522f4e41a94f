"""``mla_decode_attention`` (atrex_018): DeepSeek MLA decode in absorbed form, bf16.

Sequence b owns cache rows off_b … off_b + L_b − 1, off_b = Σ_{b'<b} L_b' (packed back to
back, no paging). Every query head attends over the one shared latent stream: per head h,
in fp32, s_l = q[b, h]·c_l / √Dq using all Dq = r + rp dimensions (scale 1/√576 in the
published shapes, not 1/√r), p = softmax(s), o = Σ_l p_l·c_l[0:r], out[b, h] = rnd_bf16(o).
A sequence with L_b = 0 gives zeros.

Departures from upstream: none (no fp8 here).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from evaluator.operators._attention import (
    ATTENTION_CHECKER_NOTES,
    ATTENTION_POLICY,
    attend_fp32,
    inverse_sqrt,
)
from evaluator.operators.base import OperatorSpec, Work, randn_bf16

CHECKER_NOTES = (
    ATTENTION_CHECKER_NOTES
    + """\
Output (B, nh, r) bf16. The value is the first r = kv_lora_rank dims of the same cache rows as
the key; the scale is 1/√(r + rp), not 1/√r.
"""
)


class Model(nn.Module):
    """out[b, h] = rnd_bf16(softmax_l(q[b,h]·c_l/√Dq) · c[:, :r]) over sequence b's rows."""

    def __init__(self, nhead: int, kv_lora_rank: int, qk_rope_head_dim: int) -> None:
        super().__init__()
        self.nhead = nhead
        self.kv_lora_rank = kv_lora_rank
        self.qk_rope_head_dim = qk_rope_head_dim

    def forward(
        self, q: torch.Tensor, kv_cache: torch.Tensor, seq_lens: torch.Tensor
    ) -> torch.Tensor:
        """(B, nh, r) in q's dtype."""
        rank = self.kv_lora_rank
        scale = inverse_sqrt(q.shape[-1])
        out = torch.zeros((q.shape[0], q.shape[1], rank), dtype=q.dtype, device=q.device)
        offset = 0
        for b, length in enumerate(int(n) for n in seq_lens.tolist()):
            rows = kv_cache[offset : offset + max(length, 0)]  # (L, 1, Dq)
            offset += max(length, 0)
            out[b : b + 1] = attend_fp32(
                q[b : b + 1], rows, rows[..., :rank], scale=scale, causal=False, out_dtype=q.dtype
            )
        return out


def make_inputs(
    *,
    device: torch.device,
    generator: torch.Generator,
    batch_size: int,
    ctx_len: int,
    nhead: int,
    kv_lora_rank: int,
    qk_rope_head_dim: int,
) -> dict[str, torch.Tensor]:
    """q (B, nh, Dq) then kv_cache (B·L, 1, Dq): N(0,1) bf16; seq_lens (B,) int32 all L."""
    batch, length = int(batch_size), int(ctx_len)
    dim = int(kv_lora_rank) + int(qk_rope_head_dim)
    q = randn_bf16((batch, int(nhead), dim), device=device, generator=generator)
    kv_cache = randn_bf16((batch * length, 1, dim), device=device, generator=generator)
    seq_lens = torch.full((batch,), length, dtype=torch.int32, device=device)
    return {"q": q, "kv_cache": kv_cache, "seq_lens": seq_lens}


def work(init_kwargs: Mapping[str, Any], input_kwargs: Mapping[str, Any]) -> Work:
    """W = B·nh·(Dq + 3·L·Dq + 2·L·r) (PyTorch's unfused path); Q_read = 2·B·nh·Dq +
    2·B·L·Dq + 4·B; Q_write = 2·B·nh·r."""
    batch, length = int(input_kwargs["batch_size"]), int(input_kwargs["ctx_len"])
    heads, rank = int(input_kwargs["nhead"]), int(input_kwargs["kv_lora_rank"])
    dim = rank + int(input_kwargs["qk_rope_head_dim"])
    return Work(
        w_flops={"bf16": batch * heads * (dim + 3 * length * dim + 2 * length * rank)},
        q_read=2 * batch * heads * dim + 2 * batch * length * dim + 4 * batch,
        q_write=2 * batch * heads * rank,
    )


SPEC = OperatorSpec(
    slug="mla_decode_attention",
    atrex_id="atrex_018",
    model_class=Model,
    input_maker=make_inputs,
    work_model=work,
    policy=ATTENTION_POLICY,
    dtype="bf16",
    phase="decode",
)
