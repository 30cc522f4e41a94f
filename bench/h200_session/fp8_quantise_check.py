"""The fp8 operators' in-place quantisation gives the bits of the out-of-place code on CUDA.

For each operator whose generator or reference quantises to fp8 (bench/fp8_out_of_place.py
OPERATORS) and a few of its v1 shapes (the cheapest, the middle one and the costliest whose
bytes moved stay under --max-gb), draws the inputs and runs the reference with the code as
it is and as it was before the change (bench/fp8_out_of_place.py puts the old helpers back),
seed 1234 on the GPU, and compares every input and output tensor byte for byte. Prints a
table, writes $OUT/fp8_quantise_check.json, and exits 1 if any tensor differs (or a
reference wrote into its inputs). Stops starting shapes when $BUDGET seconds (default 240)
are nearly spent; the JSON says which were left.

    OUT=/tmp/out BUDGET=240 python3 bench/h200_session/fp8_quantise_check.py

The CPU twin of this check is tests/evaluator/operators/test_fp8_in_place.py (smoke shapes).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "bench")]

import fp8_out_of_place as before  # noqa: E402
import torch  # noqa: E402

from evaluator.suite import load_suite  # noqa: E402


def _bytes(shape) -> int:
    return int(shape.q_read or 0) + int(shape.q_write or 0)


def chosen_shapes(suite, operator: str, max_bytes: float) -> list:
    """The cheapest, the middle and the costliest shape under ``max_bytes``, cheapest first."""
    shapes = sorted(suite.shapes_for(operator, "full"), key=lambda s: (_bytes(s), s.shape_id))
    fit = [s for s in shapes if _bytes(s) <= max_bytes] or shapes[:1]
    picked = {id(s): s for s in (fit[0], fit[len(fit) // 2], fit[-1])}
    return sorted(picked.values(), key=_bytes)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--suite", default="atrex-bench-v1")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--max-gb", type=float, default=12.0)
    parser.add_argument("--operators", default=",".join(before.OPERATORS))
    args = parser.parse_args()
    budget = float(os.environ.get("BUDGET", "240"))
    out_dir = Path(os.environ.get("OUT", "."))
    started = time.monotonic()
    suite = load_suite(args.suite)
    rows: list[dict] = []
    left: list[str] = []
    print(
        f"torch {torch.__version__}, device {args.device}"
        + (f" ({torch.cuda.get_device_name()})" if args.device == "cuda" else ""),
        flush=True,
    )
    print(
        f"{'operator':30s} {'shape':10s} {'GB moved':>9s} {'tensors':>7s} "
        f"{'elements':>14s} {'differ':>6s} {'inputs kept':>11s} {'s':>6s}",
        flush=True,
    )
    for operator in args.operators.split(","):
        for shape in chosen_shapes(suite, operator, args.max_gb * 1e9):
            if time.monotonic() - started > budget * 0.8:
                left.append(f"{operator}/{shape.shape_id}")
                continue
            t0 = time.monotonic()
            row = {
                "operator": operator,
                "shape_id": shape.shape_id,
                "input_kwargs": shape.input_kwargs,
                "gb_moved": _bytes(shape) / 1e9,
            }
            try:
                row.update(
                    before.compare_shape(
                        operator, shape.init_kwargs, shape.input_kwargs, device=args.device
                    )
                )
            except torch.OutOfMemoryError as error:
                row["error"] = f"out of memory: {error}"[:300]
            row["seconds"] = round(time.monotonic() - t0, 2)
            rows.append(row)
            if args.device == "cuda":
                torch.cuda.empty_cache()
            print(
                f"{operator:30s} {shape.shape_id:10s} {row['gb_moved']:9.3f} "
                f"{len(row.get('tensors', [])):7d} {row.get('elements', 0):14,d} "
                f"{len(row.get('differ', [])) if 'differ' in row else 'error':>6} "
                f"{str(row.get('inputs_untouched', '-')):>11s} {row['seconds']:6.1f}"
                + (f"  DIFFER: {row['differ']}" if row.get("differ") else "")
                + (f"  {row['error']}" if "error" in row else ""),
                flush=True,
            )
    failed = [r for r in rows if r.get("differ") or not r.get("inputs_untouched", True)]
    summary = {
        "device": args.device,
        "device_name": torch.cuda.get_device_name() if args.device == "cuda" else "cpu",
        "torch": torch.__version__,
        "suite": args.suite,
        "rows": rows,
        "left_for_want_of_time": left,
        "bit_identical": not failed and all("error" not in r for r in rows),
        "seconds": round(time.monotonic() - started, 1),
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "fp8_quantise_check.json").write_text(json.dumps(summary, indent=1) + "\n")
    print(
        f"bit-identical on every shape compared: {summary['bit_identical']} "
        f"({len(rows)} shapes, {len(left)} left for want of time, {summary['seconds']} s)"
    )
    return 0 if not failed else 1


if __name__ == "__main__":
    sys.exit(main())
