"""Does the harness's timer agree with ``triton.testing.do_bench``? (CUDA only.)

For the large memory-bound shapes of a bundle's operators (the ``--per-operator`` shapes
with the most bytes moved), time the bundle's ``Model`` with the evaluator's CUDA timer
(the one every evaluation uses: L2 flushed, device synchronised, CUDA events) and with
Triton's ``do_bench`` (its own L2 clearing, CUDA events per repetition, median), on the
same inputs, and print the ratio. With ``--results`` (an evaluator results.json of the
same bundle) the harness's published per-shape medians are compared too.

    python bench/do_bench_agreement.py examples/bundles/triton-baseline \\
        --suite atrex-bench-v1 [--results results.json] --out agreement.json

The goal (issue 4) is agreement within 5 % on these shapes.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import torch
import triton
import triton.testing

from evaluator.child import import_candidate
from evaluator.environment import collect_environment
from evaluator.hardware import get_profile
from evaluator.operators import get_operator
from evaluator.roofline import t_sol_seconds
from evaluator.suite import load_suite
from evaluator.timing import make_timer


def _published_medians(path: str | None) -> dict[tuple[str, str], float]:
    if not path:
        return {}
    if not Path(path).exists():
        print(f"no results file at {path}: only the timer is compared", flush=True)
        return {}
    results = json.loads(Path(path).read_text())
    return {
        (op["operator"], str(shape["shape_id"])): shape["time_ms"]
        for op in results["operators"]
        for shape in op["shapes"]
        if shape.get("time_ms")
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bundle")
    parser.add_argument("--suite", default="atrex-bench-v1")
    parser.add_argument("--hardware", default="h200-sxm")
    parser.add_argument("--per-operator", type=int, default=2)
    parser.add_argument("--results")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)

    bundle = Path(args.bundle)
    suite = load_suite(args.suite)
    hardware = get_profile(args.hardware)
    published = _published_medians(args.results)
    rows = []
    for slug in suite.operator_slugs():
        path = bundle / f"{slug}.py"
        if not path.exists():
            continue
        module = import_candidate(path, slug, bundle)
        spec = get_operator(slug)
        candidates = []
        for shape in suite.shapes_for(slug, "full"):
            bytes_moved = shape.q_read + shape.q_write
            t_mem = bytes_moved / hardware.hbm_bytes_per_s
            t_sol = t_sol_seconds(
                w_flops=shape.w_flops, q_read=shape.q_read, q_write=shape.q_write,
                hardware=hardware,
            )  # fmt: skip
            if t_mem < t_sol:  # compute-bound: not what this check is about
                continue
            candidates.append((bytes_moved, shape, t_sol))
        candidates.sort(key=lambda item: item[0], reverse=True)
        for _bytes, shape, t_sol in candidates[: args.per_operator]:
            model = module.Model(**shape.init_kwargs).to("cuda")
            inputs = spec.make_inputs(device="cuda", seed=7, **shape.input_kwargs)
            with torch.inference_mode():

                def call(model=model, inputs=inputs):
                    return model(**inputs)

                timer = make_timer("cuda")
                harness = timer.measure(call, budget_s=1.0).median_s * 1e3
                do_bench = triton.testing.do_bench(call, warmup=25, rep=200, return_mode="median")
            row = {
                "operator": slug,
                "shape_id": shape.shape_id,
                "bytes": _bytes,
                "harness_timer_ms": harness,
                "do_bench_ms": do_bench,
                "ratio_timer_vs_do_bench": harness / do_bench,
                "roofline_fraction_timer": t_sol * 1e3 / harness,
            }
            if (slug, str(shape.shape_id)) in published:
                row["published_ms"] = published[(slug, str(shape.shape_id))]
                row["ratio_published_vs_do_bench"] = row["published_ms"] / do_bench
            rows.append(row)
            print(
                f"{slug:28s} {shape.shape_id:>6} {_bytes / 1e6:9.1f} MB  timer "
                f"{harness:8.4f} ms  do_bench {do_bench:8.4f} ms  ratio "
                f"{harness / do_bench:6.3f}"
                + (
                    f"  published {row['published_ms']:8.4f} ms ratio "
                    f"{row['ratio_published_vs_do_bench']:6.3f}"
                    if "published_ms" in row
                    else ""
                ),
                flush=True,
            )
            del model, inputs
            torch.cuda.empty_cache()
    ratios = [abs(r["ratio_timer_vs_do_bench"] - 1) for r in rows]
    published_ratios = [
        abs(r["ratio_published_vs_do_bench"] - 1) for r in rows if "published_ms" in r
    ]
    summary = {
        "shapes": len(rows),
        "max_abs_deviation_timer": max(ratios, default=None),
        "median_abs_deviation_timer": statistics.median(ratios) if ratios else None,
        "max_abs_deviation_published": max(published_ratios, default=None),
        "within_5pct_timer": sum(r <= 0.05 for r in ratios),
        "within_5pct_published": sum(r <= 0.05 for r in published_ratios),
    }
    print(json.dumps(summary))
    Path(args.out).write_text(
        json.dumps(
            {
                "environment": collect_environment("cuda"),
                "triton": triton.__version__,
                "suite": suite.slug,
                "summary": summary,
                "rows": rows,
            },
            indent=1,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
