"""Repeatability of two evaluator runs of the same bundle: where their scores differ.

    python3 bench/compare_runs.py A.json B.json [--shapes 0.2]

Prints the aggregates and how far apart they are, then one row per operator both runs
evaluated (score in each, relative difference, wall time in each), and, for operators
that moved, the shapes whose time moved by more than ``--shapes`` (relative), with their
times and repetitions. Reads only the two results.json files (schema atrex-results/1).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any


def relative(a: float | None, b: float | None) -> float | None:
    """(b - a) / a, or None when a is missing or zero."""
    if a is None or b is None or a == 0:
        return None
    return (b - a) / a


def compare(first: dict[str, Any], second: dict[str, Any], *, shape_limit: float) -> list[str]:
    lines = []
    agg_a = (first.get("scores") or {}).get("aggregate")
    agg_b = (second.get("scores") or {}).get("aggregate")
    apart = relative(agg_a, agg_b)
    lines.append(
        f"aggregate {agg_a:.5f} vs {agg_b:.5f}: {apart:+.1%} apart; wall "
        f"{first['wall_s']:.1f} s vs {second['wall_s']:.1f} s"
    )
    ops_b = {entry["operator"]: entry for entry in second["operators"]}
    lines.append(
        f"{'operator':30s} {'score A':>9} {'score B':>9} {'diff':>8} {'wall A':>7} {'wall B':>7}"
    )
    for entry in first["operators"]:
        other = ops_b.get(entry["operator"])
        if other is None or entry.get("wall_s") is None or other.get("wall_s") is None:
            continue
        diff = relative(entry["score"], other["score"])
        shown = f"{diff:+.1%}" if diff is not None else "-"
        lines.append(
            f"{entry['operator']:30s} {entry['score']:9.4f} {other['score']:9.4f} {shown:>8} "
            f"{entry['wall_s']:7.1f} {other['wall_s']:7.1f}"
        )
        if diff is None or abs(diff) < 0.01:
            continue
        shapes_b = {shape["shape_id"]: shape for shape in other["shapes"]}
        for shape in entry["shapes"]:
            twin = shapes_b.get(shape["shape_id"])
            moved = relative(shape.get("time_ms"), (twin or {}).get("time_ms"))
            if moved is not None and abs(moved) > shape_limit:
                lines.append(
                    f"    shape {shape['shape_id']:>4}: {shape['time_ms'] * 1e3:8.2f} us vs "
                    f"{twin['time_ms'] * 1e3:8.2f} us ({moved:+.0%}), reps {shape['reps']} vs "
                    f"{twin['reps']}"
                )
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("first", type=Path)
    parser.add_argument("second", type=Path)
    parser.add_argument("--shapes", type=float, default=0.2, help="relative move to list")
    args = parser.parse_args()
    first = json.loads(args.first.read_text())
    second = json.loads(args.second.read_text())
    print("\n".join(compare(first, second, shape_limit=args.shapes)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
