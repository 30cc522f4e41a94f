"""Attention arithmetic shared by this bundle's attention operators (a helper module of the
bundle, beside the operator files: the evaluator puts the bundle's folder on ``sys.path``)."""

from __future__ import annotations

import math

import torch

SCORE_BUDGET_ELEMENTS = 1 << 28


def _query_block_rows(num_query_heads: int, num_keys: int, budget: int) -> int:
    """Rows of queries per block so that heads × rows × keys stays within ``budget``."""
    return max(1, budget // max(1, num_query_heads * num_keys))


def attend_fp32(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    scale: float,
    causal: bool,
    out_dtype: torch.dtype,
    budget: int = SCORE_BUDGET_ELEMENTS,
) -> torch.Tensor:
    """Softmax attention of one sequence in fp32, rounded once to ``out_dtype``.

    ``q`` is (n, Hq, Dk); ``k`` is (L, Hkv, Dk); ``v`` is (L, Hkv, Dv); Hkv divides Hq and
    query head ``h`` reads KV head ``h // (Hq // Hkv)``. Scores are ``(q·kᵀ) * scale`` in
    fp32 on exactly upcast inputs. With ``causal`` local query row ``i`` sees key positions
    ``p <= i`` (the mask is aligned to the start, which is what the callers need when
    n = L); otherwise every key is visible. With L = 0 the result is zeros. Returns
    (n, Hq, Dv) in ``out_dtype``.
    """
    num_queries, num_query_heads, head_dim = q.shape
    num_keys, num_kv_heads, value_dim = v.shape
    if num_kv_heads == 0 or num_query_heads % num_kv_heads != 0:
        raise ValueError(
            f"{num_query_heads} query heads are not a multiple of {num_kv_heads} KV heads"
        )
    group = num_query_heads // num_kv_heads
    out = torch.zeros((num_queries, num_query_heads, value_dim), dtype=out_dtype, device=q.device)
    if num_queries == 0 or num_keys == 0:
        return out
    # (Hkv, D, L) and (Hkv, L, Dv): one batched matmul per KV head, no copy per query head.
    keys_t = k.float().permute(1, 2, 0)
    values = v.float().permute(1, 0, 2)
    rows = _query_block_rows(num_query_heads, num_keys, budget)
    for start in range(0, num_queries, rows):
        stop = min(num_queries, start + rows)
        block = stop - start
        # Causal: rows start..stop-1 never see keys at or beyond `stop`.
        visible = min(num_keys, stop) if causal else num_keys
        # (n_b, Hkv, g, D) -> (Hkv, g·n_b, D); query head kv·g + j sits at [kv, j·n_b + row].
        q_block = (
            q[start:stop]
            .float()
            .view(block, num_kv_heads, group, head_dim)
            .permute(1, 2, 0, 3)
            .reshape(num_kv_heads, group * block, head_dim)
        )
        scores = torch.bmm(q_block, keys_t[:, :, :visible])
        scores.mul_(scale)
        if causal:
            positions = torch.arange(visible, device=q.device)
            query_pos = torch.arange(start, stop, device=q.device)
            masked = positions.view(1, visible) > query_pos.view(block, 1)
            scores.view(num_kv_heads, group, block, visible).masked_fill_(masked, -math.inf)
        probs = torch.softmax(scores, dim=-1)
        del scores
        o_block = torch.bmm(probs, values[:, :visible])  # (Hkv, g·n_b, Dv)
        del probs
        out[start:stop] = (
            o_block.view(num_kv_heads, group, block, value_dim)
            .permute(2, 0, 1, 3)
            .reshape(block, num_query_heads, value_dim)
            .to(out_dtype)
        )
    return out


def inverse_sqrt(dim: int) -> float:
    """The default attention scale 1/√dim (as a Python float)."""
    return 1.0 / math.sqrt(dim)
