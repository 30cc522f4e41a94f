"""Launch configurations of the Triton bundle's RMSNorm, timed by the harness's timer. (CUDA.)

For each shape (default: the largest memory-bound shape of each hidden size in the suite),
every (rows per program, warps) pair is launched on the same inputs, checked against the
evaluator's reference, and timed with the CUDA timer every evaluation uses (L2 flushed,
device synchronised, CUDA events); the table gives each one's fraction of the roofline,
marking the bundle's own choice (``launch_config``) and the best.

    python3 bench/rms_norm_configs.py [--suite atrex-bench-v1] [--out configs.json]
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from pathlib import Path

import torch
import triton

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from evaluator.child import import_candidate  # noqa: E402
from evaluator.environment import collect_environment  # noqa: E402
from evaluator.hardware import get_profile  # noqa: E402
from evaluator.operators import get_operator  # noqa: E402
from evaluator.operators.rms_norm import Model as Reference  # noqa: E402
from evaluator.roofline import t_sol_seconds  # noqa: E402
from evaluator.suite import load_suite  # noqa: E402
from evaluator.timing import make_timer  # noqa: E402

BUNDLE = ROOT / "examples" / "bundles" / "triton-baseline"
ROWS = (1, 2, 4, 8)
WARPS = (2, 4, 8, 16)
MAX_TILE = 16384
"""Tiles (rows per program x BLOCK) larger than this spill registers: not tried."""


def pick_shapes(suite, ids: list[str] | None):
    shapes = suite.shapes_for("rms_norm", "full")
    if ids:
        return [s for s in shapes if str(s.shape_id) in ids]
    largest: dict[int, object] = {}
    for shape in shapes:
        hidden = shape.input_kwargs["hidden_size"]
        moved = shape.q_read + shape.q_write
        if hidden not in largest or moved > largest[hidden].q_read + largest[hidden].q_write:
            largest[hidden] = shape
    return [largest[h] for h in sorted(largest)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", default="atrex-bench-v1")
    parser.add_argument("--hardware", default="h200-sxm")
    parser.add_argument("--shapes", help="comma-separated shape ids (default: see above)")
    parser.add_argument("--hidden", help="comma-separated hidden sizes (default: all)")
    parser.add_argument("--budget-s", type=float, default=0.3)
    parser.add_argument("--out")
    args = parser.parse_args(argv)

    suite = load_suite(args.suite)
    hardware = get_profile(args.hardware)
    module = import_candidate(BUNDLE / "rms_norm.py", "rms_norm", BUNDLE)
    spec = get_operator("rms_norm")
    timer = make_timer("cuda")
    rows_out = []
    shapes = pick_shapes(suite, args.shapes.split(",") if args.shapes else None)
    if args.hidden:
        wanted = {int(h) for h in args.hidden.split(",")}
        shapes = [s for s in shapes if s.input_kwargs["hidden_size"] in wanted]
    for shape in shapes:
        inputs = spec.make_inputs(device="cuda", seed=7, **shape.input_kwargs)
        x, weight = inputs["x"], inputs["weight"]
        eps = shape.init_kwargs["eps"]
        expected = Reference(**shape.init_kwargs).to("cuda")(**inputs).float()
        hidden = x.shape[-1]
        flat = x.reshape(-1, hidden)
        n_rows = flat.shape[0]
        block = triton.next_power_of_2(hidden)
        chosen = module.launch_config(hidden)
        t_sol = t_sol_seconds(
            w_flops=shape.w_flops, q_read=shape.q_read, q_write=shape.q_write, hardware=hardware
        )
        results = []
        for rows in ROWS:
            for warps in WARPS:
                if rows * block > MAX_TILE:
                    continue
                out = torch.empty_like(flat)
                launch = functools.partial(
                    module.launch, flat, weight, out, eps, (block, rows, warps)
                )
                with torch.inference_mode():
                    launch()
                    error = (out.float() - expected.reshape(-1, hidden)).abs().max().item()
                    median = timer.measure(launch, budget_s=args.budget_s).median_s
                results.append(
                    {
                        "rows": rows,
                        "warps": warps,
                        "ms": median * 1e3,
                        "roofline_fraction": t_sol / median,
                        "max_abs_error": error,
                        "bundle_choice": (block, rows, warps) == tuple(chosen),
                    }
                )
        best = max(results, key=lambda r: r["roofline_fraction"])
        mine = next((r for r in results if r["bundle_choice"]), None)
        moved = (shape.q_read + shape.q_write) / 1e6
        print(
            f"shape {shape.shape_id} tokens {n_rows} hidden {hidden} ({moved:.1f} MB): "
            f"bundle {chosen[1]} rows x {chosen[2]} warps "
            + (f"{mine['roofline_fraction']:.3f}" if mine else "(not in the sweep)")
            + f"; best {best['rows']} rows x {best['warps']} warps "
            f"{best['roofline_fraction']:.3f}",
            flush=True,
        )
        for r in results:
            print(
                f"    rows {r['rows']:2d} warps {r['warps']:2d}  {r['ms']:8.4f} ms  "
                f"roofline {r['roofline_fraction']:.3f}  max|err| {r['max_abs_error']:.3g}"
                + ("  <- bundle" if r["bundle_choice"] else ""),
                flush=True,
            )
        rows_out.append(
            {"shape_id": shape.shape_id, "tokens": n_rows, "hidden": hidden, "mb": moved,
             "configs": results}
        )  # fmt: skip
        del inputs, x, weight, expected, flat
        torch.cuda.empty_cache()
        if args.out:  # after every shape: a run cut short keeps what it measured
            Path(args.out).write_text(
                json.dumps(
                    {
                        "environment": collect_environment("cuda"),
                        "suite": suite.slug,
                        "shapes": rows_out,
                    },
                    indent=1,
                )  # fmt: skip
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
