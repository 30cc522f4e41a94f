"""Record a torch.profiler trace of a model-shaped inference workload (needs only torch).

Decoder layers with the dimensions of real architectures (random weights), run over a mix
of prefill and decode batches, the way a serving engine runs them: the operators are
called through names registered with ``torch.library`` in vLLM's namespaces (``_C``,
``_C_cache_ops``, ``_moe_C``, ``vllm``), each implemented here in plain PyTorch. With
``--engine plain`` the same layers are written as a plain PyTorch model (aten ops only:
RMSNorm as pow/mean/rsqrt, SwiGLU as silu*mul, SDPA, a softmax/top-k router).

    python scripts/record_trace.py --model llama3-8b --device cuda --out llama.json.gz
    python scripts/record_trace.py --model qwen3-30b-a3b --size tiny --device cpu --out t.json.gz

The trace is written with ``record_shapes=True``; how it was made (model, engine, batches,
torch version, device) is stored in the trace itself under the top-level key
``atrex_recording``. Differences from vLLM's own schemas: the attention op carries the
batch's ``cu_seqlens`` as an extra sixth argument (vLLM keeps it in a forward context the
profiler does not see), and prefill and decode take vLLM V1's and V0's paths respectively
(flash-layout cache with unified attention; paged cache with paged_attention_v1).
"""

from __future__ import annotations

import argparse
import datetime
import gzip
import json
import math
import os
import platform
import shutil
import sys
import tempfile
from dataclasses import asdict, dataclass, replace

import torch
import torch.nn.functional as F

# --------------------------------------------------------------------------- models


@dataclass(frozen=True)
class ModelDims:
    name: str
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int = 0  # dense MLP
    experts: int = 0  # MoE MLP when > 0
    top_k: int = 0
    moe_intermediate: int = 0
    eps: float = 1e-6
    rope_theta: float = 10000.0


MODELS = {
    # config.json of meta-llama/Meta-Llama-3-8B, Qwen/Qwen2.5-7B, Qwen/Qwen3-30B-A3B
    "llama3-8b": ModelDims(
        "llama3-8b", 4096, 32, 8, 128, intermediate=14336, eps=1e-5, rope_theta=500000.0
    ),
    "qwen2.5-7b": ModelDims(
        "qwen2.5-7b", 3584, 28, 4, 128, intermediate=18944, eps=1e-6, rope_theta=1000000.0
    ),
    "qwen3-30b-a3b": ModelDims(
        "qwen3-30b-a3b",
        2048,
        32,
        4,
        128,
        experts=128,
        top_k=8,
        moe_intermediate=768,
        eps=1e-6,
        rope_theta=1000000.0,
    ),
}


def tiny(dims: ModelDims) -> ModelDims:
    """The same architecture scaled down so that a CPU records it in seconds."""
    return replace(
        dims,
        hidden=256,
        heads=4,
        kv_heads=2,
        head_dim=64,
        intermediate=512 if dims.intermediate else 0,
        experts=8 if dims.experts else 0,
        top_k=2 if dims.top_k else 0,
        moe_intermediate=128 if dims.moe_intermediate else 0,
    )


# Batches: ("prefill", [sequence lengths]) or ("decode", num_seqs, context length).
BATCHES = {
    "tiny": [("prefill", [16, 8]), ("decode", 4, 32), ("prefill", [24]), ("decode", 2, 48)],
    "full": [
        ("prefill", [512, 1024, 256]),
        ("decode", 32, 1024),
        ("prefill", [2048]),
        ("decode", 128, 2048),
        ("prefill", [384, 384, 384, 384]),
        ("decode", 64, 4096),
        ("decode", 256, 512),
        ("prefill", [4096]),
    ],
}
BLOCK_SIZE = 16
MOE_BLOCK_SIZE = 128

# --------------------------------------------------------------------------- the ops


def _rms(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(x.dtype)


def register_ops() -> None:
    """Define the serving-engine ops (vLLM's names and argument orders) once."""
    if hasattr(torch.ops._C, "rms_norm") and hasattr(torch.ops._moe_C, "moe_sum"):
        return
    c = torch.library.Library("_C", "DEF")
    cache = torch.library.Library("_C_cache_ops", "DEF")
    moe = torch.library.Library("_moe_C", "DEF")
    vllm = torch.library.Library("vllm", "DEF")
    kind = "CompositeExplicitAutograd"
    register_ops.libraries = (c, cache, moe, vllm)  # keep them alive

    c.define("rms_norm(Tensor(a!) result, Tensor input, Tensor weight, float epsilon) -> ()")
    c.impl("rms_norm", lambda out, x, w, eps: _none(out.copy_(_rms(x, w, eps))), kind)

    c.define(
        "fused_add_rms_norm(Tensor(a!) input, Tensor(b!) residual, Tensor weight, "
        "float epsilon) -> ()"
    )

    def fused_add(x, residual, weight, eps):
        residual.add_(x)
        x.copy_(_rms(residual, weight, eps))

    c.impl("fused_add_rms_norm", fused_add, kind)

    c.define("silu_and_mul(Tensor(a!) result, Tensor input) -> ()")

    def silu_and_mul(out, x):
        d = x.shape[-1] // 2
        out.copy_(F.silu(x[..., :d]) * x[..., d:])

    c.impl("silu_and_mul", silu_and_mul, kind)

    c.define(
        "rotary_embedding(Tensor positions, Tensor(a!) query, Tensor(b!) key, int head_size, "
        "Tensor cos_sin_cache, bool is_neox) -> ()"
    )

    def rotary(positions, query, key, head_size, cos_sin_cache, is_neox):
        cos, sin = cos_sin_cache[positions].chunk(2, dim=-1)
        for t in (query, key):
            view = t.view(t.shape[0], -1, head_size)
            a, b = view.chunk(2, dim=-1)
            c_, s_ = cos[:, None, :].to(t.dtype), sin[:, None, :].to(t.dtype)
            view.copy_(torch.cat((a * c_ - b * s_, b * c_ + a * s_), dim=-1))

    c.impl("rotary_embedding", rotary, kind)

    cache.define(
        "reshape_and_cache_flash(Tensor key, Tensor value, Tensor(a!) key_cache, "
        "Tensor(b!) value_cache, Tensor slot_mapping, str kv_cache_dtype, Tensor k_scale, "
        "Tensor v_scale) -> ()"
    )

    def cache_flash(key, value, key_cache, value_cache, slots, dtype, k_scale, v_scale):
        heads, dim = key.shape[1], key.shape[2]
        key_cache.view(-1, heads, dim).index_copy_(0, slots, key)
        value_cache.view(-1, heads, dim).index_copy_(0, slots, value)

    cache.impl("reshape_and_cache_flash", cache_flash, kind)

    cache.define(
        "reshape_and_cache(Tensor key, Tensor value, Tensor(a!) key_cache, "
        "Tensor(b!) value_cache, Tensor slot_mapping, str kv_cache_dtype, Tensor k_scale, "
        "Tensor v_scale) -> ()"
    )

    def cache_paged(key, value, key_cache, value_cache, slots, dtype, k_scale, v_scale):
        tokens, heads, dim = key.shape
        x = key_cache.shape[-1]
        block_size = key_cache.shape[3]
        block, offset = slots // block_size, slots % block_size
        key_cache[block, :, :, offset, :] = key.view(tokens, heads, dim // x, x)
        value_cache[block, :, :, offset] = value

    cache.impl("reshape_and_cache", cache_paged, kind)

    vllm.define(
        "unified_attention_with_output(Tensor query, Tensor key, Tensor value, "
        "Tensor(a!) output, str layer_name, Tensor? cu_seqlens=None) -> ()"
    )

    def unified(query, key, value, output, layer_name, cu_seqlens=None):
        bounds = cu_seqlens.tolist() if cu_seqlens is not None else [0, query.shape[0]]
        groups = query.shape[1] // key.shape[1]
        for start, end in zip(bounds[:-1], bounds[1:], strict=True):
            q = query[start:end].transpose(0, 1)
            k = key[start:end].transpose(0, 1).repeat_interleave(groups, dim=0)
            v = value[start:end].transpose(0, 1).repeat_interleave(groups, dim=0)
            out = F.scaled_dot_product_attention(q[None], k[None], v[None], is_causal=True)
            output[start:end].copy_(out[0].transpose(0, 1))

    vllm.impl("unified_attention_with_output", unified, kind)

    c.define(
        "paged_attention_v1(Tensor(a!) out, Tensor query, Tensor key_cache, "
        "Tensor value_cache, int num_kv_heads, float scale, Tensor block_tables, "
        "Tensor seq_lens, int block_size, int max_seq_len) -> ()"
    )

    def paged_v1(
        out,
        query,
        key_cache,
        value_cache,
        kv_heads,
        scale,
        tables,
        seq_lens,
        block_size,
        max_seq_len,
    ):
        seqs, q_heads, dim = query.shape
        blocks = key_cache[tables]  # (S, MB, Hkv, D/x, bs, x)
        keys = blocks.permute(0, 1, 4, 2, 3, 5).reshape(seqs, -1, kv_heads, dim)
        values = value_cache[tables].permute(0, 1, 4, 2, 3).reshape(seqs, -1, kv_heads, dim)
        keys, values = keys[:, :max_seq_len], values[:, :max_seq_len]
        positions = torch.arange(keys.shape[1], device=query.device)
        mask = positions[None, :] < seq_lens[:, None]
        groups = q_heads // kv_heads
        k = keys.transpose(1, 2).repeat_interleave(groups, dim=1)
        v = values.transpose(1, 2).repeat_interleave(groups, dim=1)
        result = F.scaled_dot_product_attention(
            query[:, :, None, :], k, v, attn_mask=mask[:, None, None, :], scale=scale
        )
        out.copy_(result[:, :, 0, :])

    c.impl("paged_attention_v1", paged_v1, kind)

    moe.define(
        "topk_softmax(Tensor(a!) topk_weights, Tensor(b!) topk_indices, "
        "Tensor(c!) token_expert_indices, Tensor gating_output) -> ()"
    )

    def topk_softmax(weights, indices, token_expert, logits):
        probs = torch.softmax(logits.float(), dim=-1)
        top_w, top_i = probs.topk(weights.shape[-1], dim=-1)
        weights.copy_(top_w)
        indices.copy_(top_i.to(indices.dtype))
        token_expert.copy_(
            torch.arange(token_expert.numel(), device=logits.device)
            .view_as(token_expert)
            .to(token_expert.dtype)
        )

    moe.impl("topk_softmax", topk_softmax, kind)

    moe.define(
        "moe_align_block_size(Tensor topk_ids, int num_experts, int block_size, "
        "Tensor(a!) sorted_token_ids, Tensor(b!) experts_ids, "
        "Tensor(c!) num_tokens_post_pad) -> ()"
    )

    def align(topk_ids, experts, block_size, sorted_ids, expert_ids, post_pad):
        flat = topk_ids.flatten()
        order = torch.argsort(flat, stable=True)
        counts = torch.bincount(flat, minlength=experts)
        padded = (counts + block_size - 1) // block_size * block_size
        sorted_ids.fill_(flat.numel())
        starts = torch.cumsum(padded, 0) - padded
        ranks = (
            torch.arange(flat.numel(), device=flat.device)
            - (torch.cumsum(counts, 0) - counts)[flat[order]]
        )
        sorted_ids[starts[flat[order]] + ranks] = order.to(sorted_ids.dtype)
        blocks = torch.repeat_interleave(
            torch.arange(experts, device=flat.device), padded // block_size
        )
        expert_ids[: blocks.numel()] = blocks.to(expert_ids.dtype)
        post_pad.fill_(int(padded.sum()))

    moe.impl("moe_align_block_size", align, kind)

    moe.define("moe_sum(Tensor input, Tensor(a!) output) -> ()")
    moe.impl("moe_sum", lambda x, out: _none(torch.sum(x, dim=1, out=out)), kind)

    vllm.define(
        "outplace_fused_experts(Tensor hidden_states, Tensor w1, Tensor w2, "
        "Tensor topk_weights, Tensor topk_ids) -> Tensor"
    )

    def fused_experts(hidden, w1, w2, topk_weights, topk_ids):
        tokens, top_k = topk_ids.shape
        experts, two_i, _ = w1.shape
        sorted_ids = torch.empty(
            tokens * top_k + experts * (MOE_BLOCK_SIZE - 1), dtype=torch.int32, device=hidden.device
        )
        expert_ids = torch.empty(
            sorted_ids.numel() // MOE_BLOCK_SIZE + experts, dtype=torch.int32, device=hidden.device
        )
        post_pad = torch.empty(1, dtype=torch.int32, device=hidden.device)
        torch.ops._moe_C.moe_align_block_size(
            topk_ids, experts, MOE_BLOCK_SIZE, sorted_ids, expert_ids, post_pad
        )
        flat = topk_ids.flatten().long()
        order = torch.argsort(flat, stable=True)
        counts = torch.bincount(flat, minlength=experts).tolist()
        cache1 = torch.empty(tokens * top_k, two_i, dtype=hidden.dtype, device=hidden.device)
        start = 0
        for expert, count in enumerate(counts):
            if count:
                rows = order[start : start + count]
                cache1[rows] = hidden[rows // top_k] @ w1[expert].t()
                start += count
        cache2 = torch.empty(tokens * top_k, two_i // 2, dtype=hidden.dtype, device=hidden.device)
        torch.ops._C.silu_and_mul(cache2, cache1)
        cache3 = torch.empty(
            tokens * top_k, hidden.shape[1], dtype=hidden.dtype, device=hidden.device
        )
        start = 0
        for expert, count in enumerate(counts):
            if count:
                rows = order[start : start + count]
                cache3[rows] = cache2[rows] @ w2[expert].t()
                start += count
        cache3.mul_(topk_weights.flatten()[:, None].to(cache3.dtype))
        out = torch.empty_like(hidden)
        torch.ops._moe_C.moe_sum(cache3.view(tokens, top_k, -1), out)
        return out

    vllm.impl("outplace_fused_experts", fused_experts, kind)


def _none(_: object) -> None:
    return None


# --------------------------------------------------------------------------- layers


class Layer:
    """One decoder layer's weights (random) and the caches its batches use."""

    def __init__(
        self,
        dims: ModelDims,
        *,
        device: torch.device,
        dtype: torch.dtype,
        generator: torch.Generator,
    ) -> None:
        def rand(*shape: int, scale: float) -> torch.Tensor:
            return (torch.randn(*shape, generator=generator, device=device) * scale).to(dtype)

        self.dims = dims
        h, d = dims.hidden, dims.head_dim
        self.w_in = torch.ones(h, dtype=dtype, device=device)
        self.w_post = torch.ones(h, dtype=dtype, device=device)
        self.w_qkv = rand((dims.heads + 2 * dims.kv_heads) * d, h, scale=h**-0.5)
        self.w_o = rand(h, dims.heads * d, scale=(dims.heads * d) ** -0.5)
        if dims.experts:
            self.w_router = rand(dims.experts, h, scale=h**-0.5)
            self.w1 = rand(dims.experts, 2 * dims.moe_intermediate, h, scale=h**-0.5)
            self.w2 = rand(
                dims.experts, h, dims.moe_intermediate, scale=dims.moe_intermediate**-0.5
            )
        else:
            self.w_gate_up = rand(2 * dims.intermediate, h, scale=h**-0.5)
            self.w_down = rand(h, dims.intermediate, scale=dims.intermediate**-0.5)
        inv = 1.0 / (dims.rope_theta ** (torch.arange(0, d, 2, device=device).float() / d))
        angles = torch.arange(65536 if d > 64 else 4096, device=device).float()[:, None] * inv
        self.cos_sin = torch.cat((angles.cos(), angles.sin()), dim=-1)


def _mlp(layer: Layer, h: torch.Tensor, engine: str) -> torch.Tensor:
    dims = layer.dims
    if dims.experts:
        logits = F.linear(h, layer.w_router)
        tokens = h.shape[0]
        if engine == "vllm":
            weights = torch.empty(tokens, dims.top_k, dtype=torch.float32, device=h.device)
            ids = torch.empty(tokens, dims.top_k, dtype=torch.int32, device=h.device)
            token_expert = torch.empty_like(ids)
            torch.ops._moe_C.topk_softmax(weights, ids, token_expert, logits)
            return torch.ops.vllm.outplace_fused_experts(h, layer.w1, layer.w2, weights, ids)
        probs = F.softmax(logits, dim=-1, dtype=torch.float)
        weights, ids = torch.topk(probs, dims.top_k, dim=-1)
        out = torch.zeros_like(h)
        for expert in ids.unique().tolist():
            token, slot = torch.where(ids == expert)
            gate_up = h[token] @ layer.w1[expert].t()
            gate, up = gate_up.chunk(2, dim=-1)
            y = (F.silu(gate) * up) @ layer.w2[expert].t()
            out.index_add_(0, token, y * weights[token, slot, None].to(y.dtype))
        return out
    gate_up = F.linear(h, layer.w_gate_up)
    if engine == "vllm":
        act = torch.empty(h.shape[0], dims.intermediate, dtype=h.dtype, device=h.device)
        torch.ops._C.silu_and_mul(act, gate_up)
    else:
        gate, up = gate_up.chunk(2, dim=-1)
        act = F.silu(gate) * up
    return F.linear(act, layer.w_down)


def _plain_rms(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    # As Hugging Face's LlamaRMSNorm writes it (the decomposition a plain model shows).
    dtype = x.dtype
    x = x.to(torch.float32)
    variance = x.pow(2).mean(-1, keepdim=True)
    x = x * torch.rsqrt(variance + eps)
    return weight * x.to(dtype)


def prepare_batch(
    dims: ModelDims,
    batch: tuple,
    *,
    engine: str,
    device: torch.device,
    dtype: torch.dtype,
    generator: torch.Generator,
) -> dict:
    """A batch's inputs and caches, made before the profiled region (they are not part of
    the serving step's work)."""
    kv_heads, d = dims.kv_heads, dims.head_dim
    state: dict = {"kind": batch[0]}
    if batch[0] == "prefill":
        lens = list(batch[1])
        tokens = sum(lens)
        blocks_per_seq = math.ceil(max(lens) / BLOCK_SIZE)
        num_blocks = len(lens) * blocks_per_seq
        state["lens"] = lens
        state["positions"] = torch.cat([torch.arange(n, device=device) for n in lens])
        state["cu"] = torch.tensor(
            [0, *torch.tensor(lens).cumsum(0).tolist()], dtype=torch.int32, device=device
        )
        if engine == "vllm":
            state["key_cache"] = torch.zeros(
                num_blocks, BLOCK_SIZE, kv_heads, d, dtype=dtype, device=device
            )
            state["value_cache"] = torch.zeros_like(state["key_cache"])
            state["slots"] = torch.cat(
                [
                    i * blocks_per_seq * BLOCK_SIZE + torch.arange(n, device=device)
                    for i, n in enumerate(lens)
                ]
            )
    else:
        seqs, context = batch[1], batch[2]
        tokens = seqs
        blocks_per_seq = math.ceil(context / BLOCK_SIZE)
        num_blocks = seqs * blocks_per_seq
        state.update(seqs=seqs, context=context)
        state["positions"] = torch.full((seqs,), context - 1, device=device)
        if engine == "vllm":
            x_pack = 16 // torch.tensor([], dtype=dtype).element_size()
            state["key_cache"] = torch.randn(
                num_blocks,
                kv_heads,
                d // x_pack,
                BLOCK_SIZE,
                x_pack,
                generator=generator,
                device=device,
            ).to(dtype)
            state["value_cache"] = torch.randn(
                num_blocks, kv_heads, d, BLOCK_SIZE, generator=generator, device=device
            ).to(dtype)
            tables = torch.arange(num_blocks, dtype=torch.int32, device=device).view(
                seqs, blocks_per_seq
            )
            state["tables"] = tables.long()
            state["slots"] = tables[:, -1].long() * BLOCK_SIZE + (context - 1) % BLOCK_SIZE
            state["seq_lens"] = torch.full((seqs,), context, dtype=torch.int32, device=device)
        else:
            state["past_k"] = torch.randn(
                seqs, dims.heads, context, d, generator=generator, device=device
            ).to(dtype)
            state["past_v"] = torch.randn(
                seqs, dims.heads, context, d, generator=generator, device=device
            ).to(dtype)
    state["tokens"] = tokens
    state["x"] = torch.randn(tokens, dims.hidden, generator=generator, device=device).to(dtype)
    state["scale_one"] = torch.ones((), dtype=torch.float32, device=device)
    return state


def run_batch(layers: list[Layer], state: dict, *, engine: str) -> None:
    """One forward step of the decoder layers over a prepared prefill or decode batch."""
    dims = layers[0].dims
    heads, kv_heads, d = dims.heads, dims.kv_heads, dims.head_dim
    tokens, positions = state["tokens"], state["positions"]
    x = state["x"].clone()
    dtype = x.dtype
    residual = None
    for index, layer in enumerate(layers):
        if engine == "vllm":
            if residual is None:
                residual = x
                h = torch.empty_like(x)
                torch.ops._C.rms_norm(h, x, layer.w_in, dims.eps)
            else:
                torch.ops._C.fused_add_rms_norm(x, residual, layer.w_in, dims.eps)
                h = x
        else:
            residual = x if residual is None else residual + x
            h = _plain_rms(residual, layer.w_in, dims.eps)
        qkv = F.linear(h, layer.w_qkv)
        q, k, v = qkv.split([heads * d, kv_heads * d, kv_heads * d], dim=-1)
        if engine == "vllm":
            q, k = q.contiguous(), k.contiguous()
            torch.ops._C.rotary_embedding(positions, q, k, d, layer.cos_sin, True)
            q3 = q.view(tokens, heads, d)
            k3 = k.view(tokens, kv_heads, d)
            v3 = v.contiguous().view(tokens, kv_heads, d)
            out = torch.empty_like(q3)
            one = state["scale_one"]
            if state["kind"] == "prefill":
                torch.ops._C_cache_ops.reshape_and_cache_flash(
                    k3,
                    v3,
                    state["key_cache"],
                    state["value_cache"],
                    state["slots"],
                    "auto",
                    one,
                    one,
                )
                torch.ops.vllm.unified_attention_with_output(
                    q3, k3, v3, out, f"layers.{index}.attn", state["cu"]
                )
            else:
                torch.ops._C_cache_ops.reshape_and_cache(
                    k3,
                    v3,
                    state["key_cache"],
                    state["value_cache"],
                    state["slots"],
                    "auto",
                    one,
                    one,
                )
                torch.ops._C.paged_attention_v1(
                    out,
                    q3,
                    state["key_cache"],
                    state["value_cache"],
                    kv_heads,
                    d**-0.5,
                    state["tables"],
                    state["seq_lens"],
                    BLOCK_SIZE,
                    state["context"],
                )
            attn = out.view(tokens, heads * d)
        else:
            cos, sin = layer.cos_sin[positions].chunk(2, dim=-1)
            cos, sin = cos[:, None, :].to(dtype), sin[:, None, :].to(dtype)

            def rope(t: torch.Tensor, n: int, cos=cos, sin=sin) -> torch.Tensor:
                t = t.reshape(tokens, n, d)
                a, b = t.chunk(2, dim=-1)
                return torch.cat((a * cos - b * sin, b * cos + a * sin), dim=-1)

            q3, k3 = rope(q, heads), rope(k, kv_heads)
            v3 = v.reshape(tokens, kv_heads, d)
            groups = heads // kv_heads
            if state["kind"] == "prefill":
                outs = []
                start = 0
                for n in state["lens"]:
                    qs = q3[start : start + n].transpose(0, 1)[None]
                    ks = k3[start : start + n].transpose(0, 1).repeat_interleave(groups, 0)[None]
                    vs = v3[start : start + n].transpose(0, 1).repeat_interleave(groups, 0)[None]
                    o = F.scaled_dot_product_attention(qs, ks, vs, is_causal=True)
                    outs.append(o[0].transpose(0, 1))
                    start += n
                attn = torch.cat(outs).reshape(tokens, heads * d)
            else:
                o = F.scaled_dot_product_attention(
                    q3[:, :, None, :], state["past_k"], state["past_v"]
                )
                attn = o[:, :, 0, :].reshape(tokens, heads * d)
        x = F.linear(attn, layer.w_o)
        if engine == "vllm":
            torch.ops._C.fused_add_rms_norm(x, residual, layer.w_post, dims.eps)
            h = x
        else:
            residual = residual + x
            h = _plain_rms(residual, layer.w_post, dims.eps)
        x = _mlp(layer, h, engine)


# --------------------------------------------------------------------------- recording


def record(args: argparse.Namespace) -> dict:
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: no CUDA device is visible")
    dtype = torch.bfloat16
    dims = MODELS[args.model]
    if args.size == "tiny":
        dims = tiny(dims)
    batches = BATCHES[args.size]
    generator = torch.Generator(device=device)
    generator.manual_seed(args.seed)
    if args.engine == "vllm":
        register_ops()
    torch.manual_seed(args.seed)
    layers = [
        Layer(dims, device=device, dtype=dtype, generator=generator) for _ in range(args.layers)
    ]

    states = [
        prepare_batch(
            dims, batch, engine=args.engine, device=device, dtype=dtype, generator=generator
        )
        for batch in batches
    ]

    def step_all() -> None:
        for state in states:
            run_batch(layers, state, engine=args.engine)
            if device.type == "cuda":
                torch.cuda.synchronize()

    with torch.inference_mode():
        step_all()  # warm-up: allocator, cuBLAS handles, lazy inits stay out of the trace
        activities = [torch.profiler.ProfilerActivity.CPU]
        if device.type == "cuda":
            activities.append(torch.profiler.ProfilerActivity.CUDA)
        recording = {
            "script": "scripts/record_trace.py",
            "model": dims.name,
            "dims": asdict(dims),
            "size": args.size,
            "engine": args.engine,
            "layers": args.layers,
            "batches": [list(b) for b in batches],
            "weights": "random (seeded)",
            "seed": args.seed,
            "dtype": "bf16",
            "device": args.device,
            "device_name": torch.cuda.get_device_name(device)
            if device.type == "cuda"
            else platform.processor() or platform.machine(),
            "torch": torch.__version__,
            "python": platform.python_version(),
            "recorded_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        }
        with torch.profiler.profile(activities=activities, record_shapes=True) as prof:
            # Written into the trace's top level (only while the profiler is running).
            prof.add_metadata_json("atrex_recording", json.dumps(recording))
            step_all()
    with tempfile.TemporaryDirectory(prefix="atrex-trace-") as scratch:
        raw = os.path.join(scratch, "trace.json")
        prof.export_chrome_trace(raw)
        if args.out.endswith(".gz"):
            with open(raw, "rb") as src, gzip.open(args.out, "wb", compresslevel=9) as dst:
                shutil.copyfileobj(src, dst)
        else:
            shutil.copyfile(raw, args.out)
    return recording


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=sorted(MODELS), default="llama3-8b")
    parser.add_argument(
        "--engine",
        choices=("vllm", "plain"),
        default="vllm",
        help="vllm: ops by vLLM's names (torch.library); plain: aten only",
    )
    parser.add_argument(
        "--size",
        choices=sorted(BATCHES),
        default="full",
        help="full: the model's real dimensions; tiny: scaled down for a CPU",
    )
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cuda")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", required=True, help="trace file (.json or .json.gz)")
    args = parser.parse_args(argv)
    recording = record(args)
    size = os.path.getsize(args.out)
    print(
        f"wrote {args.out} ({size / 2**20:.2f} MiB): {recording['model']} "
        f"{recording['engine']} {recording['size']} on {recording['device_name']}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
