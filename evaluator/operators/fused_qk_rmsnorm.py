"""``fused_qk_rmsnorm`` (atrex_010): per-head RMSNorm of the q and k heads of a packed QKV row.

Row layout: [Hq query heads | Hkv key heads | Hkv value heads], each head D contiguous
values. Query heads use ``q_weight``, key heads ``k_weight``; value heads are copied.
Two rounding points, as upstream: the normalised value is rounded to the input dtype,
then multiplied by the weight (a product of two dtype values, rounded once).

Departures from upstream: none: computes what the release computes, with the same two
rounding points, the same eps default (1e-6) and the same inputs (weights N(0,1), fp16 for
every shape). Upstream splits the row into q, k and v and concatenates them again; here the
q and k heads of a (T, Hq + 2Hkv, D) view are normalised in a copy of the input, which gives
the same values (bit for bit on CPU). Only the check differs: the portal's fp16 rule
(docs/decisions.md 5) instead of upstream's fixed allclose.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from evaluator.operators.base import FP16_POLICY, OperatorSpec, Work


class Model(nn.Module):
    """y = rnd_dt(f32(x) * rsqrt(mean f32(x)^2 + eps)); out = rnd_dt(weight * y) per q/k head."""

    def __init__(
        self, head_num: int, kv_head_num: int, size_per_head: int = 128, eps: float = 1e-6
    ) -> None:
        super().__init__()
        self.head_num = head_num
        self.kv_head_num = kv_head_num
        self.size_per_head = size_per_head
        self.eps = eps

    def _norm(self, heads: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        hf = heads.float()
        inv_rms = torch.rsqrt(hf.square().mean(dim=-1, keepdim=True) + self.eps)
        normalised = (hf * inv_rms).to(heads.dtype)
        return weight * normalised  # dtype * dtype: fp32 inside, one rounding

    def forward(
        self, hidden_states: torch.Tensor, q_weight: torch.Tensor, k_weight: torch.Tensor
    ) -> torch.Tensor:
        tokens = hidden_states.shape[0]
        q_heads, kv_heads, dim = self.head_num, self.kv_head_num, self.size_per_head
        heads = hidden_states.reshape(tokens, q_heads + 2 * kv_heads, dim)
        out = heads.clone()  # value heads pass through unchanged
        out[:, :q_heads] = self._norm(heads[:, :q_heads], q_weight)
        out[:, q_heads : q_heads + kv_heads] = self._norm(
            heads[:, q_heads : q_heads + kv_heads], k_weight
        )
        return out.reshape(hidden_states.shape)


def _torch_dtype(name: str) -> torch.dtype:
    return torch.float16 if name == "fp16" else torch.bfloat16


def make_inputs(
    *,
    device: torch.device,
    generator: torch.Generator,
    num_tokens: int,
    head_num: int,
    kv_head_num: int,
    size_per_head: int = 128,
    dtype: str = "fp16",
) -> dict[str, torch.Tensor]:
    """hidden_states (T, (Hq + 2Hkv)D), q_weight (D,), k_weight (D,): N(0,1) in that order.

    ``dtype`` "fp16" selects float16, any other string bfloat16.
    """
    torch_dtype = _torch_dtype(dtype)

    def draw(*shape: int) -> torch.Tensor:
        return torch.randn(shape, dtype=torch_dtype, device=device, generator=generator)

    hidden_states = draw(num_tokens, (head_num + 2 * kv_head_num) * size_per_head)
    q_weight = draw(size_per_head)
    k_weight = draw(size_per_head)
    return {"hidden_states": hidden_states, "q_weight": q_weight, "k_weight": k_weight}


def work(init_kwargs: Mapping[str, Any], input_kwargs: Mapping[str, Any]) -> Work:
    """R = T(Hq + Hkv) rows: W = 3RD + R (key fp16); Q_read = b*T(Hq + 2Hkv)D + 2*b*D;
    Q_write = b*T(Hq + 2Hkv)D, with b the element size (2)."""
    tokens = int(input_kwargs["num_tokens"])
    q_heads, kv_heads = int(input_kwargs["head_num"]), int(input_kwargs["kv_head_num"])
    dim = int(input_kwargs.get("size_per_head", 128))
    itemsize = _torch_dtype(str(input_kwargs.get("dtype", "fp16"))).itemsize
    rows = tokens * (q_heads + kv_heads)
    packed = itemsize * tokens * (q_heads + 2 * kv_heads) * dim
    return Work(
        w_flops={"fp16": 3 * rows * dim + rows}, q_read=packed + 2 * itemsize * dim, q_write=packed
    )


SPEC = OperatorSpec(
    slug="fused_qk_rmsnorm",
    atrex_id="atrex_010",
    model_class=Model,
    input_maker=make_inputs,
    work_model=work,
    policy=FP16_POLICY,
    dtype="fp16",
    phase="prefill/decode",
)
