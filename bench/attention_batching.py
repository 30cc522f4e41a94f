"""What batching equal sequences saves in the unified_attention reference.

The reference (``evaluator/operators/unified_attention.py``) attends sequences of equal
(n_s, L_s) together through ``attend_fp32_many``; before, it looped over sequences, one
``attend_fp32`` call each. Per shape this prints the median time of the reference as it
is and of the per-sequence loop (the old algorithm, rebuilt here from ``attend_fp32``,
which is a batch of one), their ratio, and whether the two outputs are bit-identical (else
the largest difference, in units of the output's bf16 spacing).

    python3 bench/attention_batching.py --device cpu --shape-set smoke
    python3 bench/attention_batching.py --device cuda --shape-set full --shapes 11,12,13 \\
        --json out.json

A bench, not a test: figures are for the machine it runs on.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def per_sequence(inputs: dict[str, Any]) -> Any:
    """The reference's algorithm before batching: one attend_fp32 per sequence."""
    import torch

    from evaluator.operators._attention import attend_fp32, inverse_sqrt

    q, k_cache, v_cache = inputs["q"], inputs["k_cache"], inputs["v_cache"]
    block_size = k_cache.shape[1]
    out = torch.zeros(q.shape[:-1] + v_cache.shape[-1:], dtype=q.dtype, device=q.device)
    bounds = [int(b) for b in inputs["cu_seqlens_q"].tolist()]
    for s, kv_len in enumerate(int(n) for n in inputs["seqused_k"].tolist()):
        q_lo, q_hi = bounds[s], bounds[s + 1]
        if q_hi <= q_lo:
            continue
        kv_len = max(kv_len, 0)
        blocks = inputs["block_table"][s, : -(-kv_len // block_size)].long()
        keys = k_cache.index_select(0, blocks).reshape(-1, *k_cache.shape[2:])[:kv_len]
        values = v_cache.index_select(0, blocks).reshape(-1, *v_cache.shape[2:])[:kv_len]
        out[q_lo:q_hi] = attend_fp32(
            q[q_lo:q_hi],
            keys,
            values,
            scale=inverse_sqrt(q.shape[-1]),
            causal=q_hi - q_lo == kv_len,
            out_dtype=q.dtype,
        )
    return out


def timed(fn: Any, inputs: dict[str, Any], device: Any, repeats: int) -> tuple[float, Any]:
    """Median seconds of ``repeats`` calls (after one warm-up call) and the last output."""
    import torch

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize()

    out = fn(inputs)
    sync()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn(inputs)
        sync()
        times.append(time.perf_counter() - start)
    return statistics.median(times), out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--suite", default="atrex-bench-v1")
    parser.add_argument("--shape-set", default="smoke", choices=["smoke", "full"])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--shapes", default=None, help="comma-separated shape ids (default: all)")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()

    import torch

    from evaluator.operators import get_operator
    from evaluator.suite import load_suite

    device = torch.device(args.device)
    spec = get_operator("unified_attention")
    shapes = load_suite(args.suite).shapes_for("unified_attention", args.shape_set)
    if args.shapes:
        wanted = set(args.shapes.split(","))
        shapes = [shape for shape in shapes if shape.shape_id in wanted]
    rows = []
    print(f"{'shape':>6} {'seqs':>6} {'batched s':>10} {'per-seq s':>10} {'ratio':>7}  equal")
    for shape in shapes:
        inputs = spec.input_maker(
            device=device,
            generator=torch.Generator(device=device).manual_seed(1),
            **shape.input_kwargs,
        )
        model = spec.build_reference(shape.init_kwargs).to(device)
        with torch.inference_mode():
            batched_s, batched = timed(lambda x, m=model: m(**x), inputs, device, args.repeats)
            loop_s, looped = timed(per_sequence, inputs, device, args.repeats)
        equal = bool(torch.equal(batched, looped))
        diff = (batched.float() - looped.float()).abs()
        spacing = torch.finfo(torch.bfloat16).eps * looped.float().abs().clamp_min(1e-30)
        worst_ulps = 0.0 if equal else float((diff / spacing).max())
        row = {
            "shape_id": shape.shape_id,
            "seqs": int(shape.input_kwargs["num_seqs"]),
            "batched_s": round(batched_s, 5),
            "per_sequence_s": round(loop_s, 5),
            "ratio": round(loop_s / batched_s, 2) if batched_s else None,
            "bit_identical": equal,
            "worst_bf16_ulps": round(worst_ulps, 2),
        }
        rows.append(row)
        print(
            f"{row['shape_id']:>6} {row['seqs']:>6} {batched_s:>10.4f} {loop_s:>10.4f} "
            f"{row['ratio']:>7}  {'yes' if equal else f'no ({worst_ulps:.2f} ulp)'}"
        )
        del inputs, batched, looped
    total_batched = sum(r["batched_s"] for r in rows)
    total_loop = sum(r["per_sequence_s"] for r in rows)
    print(f"sum: batched {total_batched:.3f} s, per-sequence {total_loop:.3f} s a call each")
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "device": str(device),
                    "torch": torch.__version__,
                    "suite": args.suite,
                    "shape_set": args.shape_set,
                    "rows": rows,
                },
                indent=1,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
