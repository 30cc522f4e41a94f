"""Merge reference-baseline reports (``bench/reference_baseline.py``) measured in parts.

The torch.compile baseline over v1 does not fit one device session (inductor compiles for
minutes per operator), so it is measured an operator set at a time, on the same hardware
profile and suite. This writes one report from several, shape by shape: each shape's row
from the latest report that timed it (else from the latest that lists it), so a later part
can time what an earlier one did not reach without losing what that one timed. Reports of
another mode, suite (content hash), hardware profile, or with a different ``--dynamic``
are refused. The merged report keeps every part's environment and start time under
``parts``, each shape's source under ``from_part`` and each operator's sources under
``from_parts``; an operator's ``score_if_counted`` is recomputed from its merged shapes:

    python3 bench/merge_baselines.py first.json second.json --out merged.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from evaluator.scoring import operator_score

SAME = ("what", "mode", "compile_dynamic")


class MergeError(ValueError):
    """Reports that do not describe the same baseline."""


def _key(report: dict[str, Any]) -> tuple:
    return (
        *(report.get(name) for name in SAME),
        report["suite"].get("slug"),
        report["suite"].get("hash"),
        report["suite"].get("shape_set"),
        report["hardware"].get("slug"),
    )


def _shape_order(shape_id: str) -> tuple:
    return (0, int(shape_id), "") if shape_id.isdigit() else (1, 0, shape_id)


def merge(reports: list[dict[str, Any]]) -> dict[str, Any]:
    """One report from ``reports`` (oldest first)."""
    if not reports:
        raise MergeError("nothing to merge")
    first = reports[0]
    for index, report in enumerate(reports[1:], start=1):
        if _key(report) != _key(first):
            raise MergeError(
                f"part {index} is another baseline: {_key(report)} against {_key(first)} "
                "(mode, suite and its hash, shape set, hardware and --dynamic must match)"
            )
    entries: dict[str, dict[str, Any]] = {}
    rows: dict[str, dict[str, dict[str, Any]]] = {}
    for index, report in enumerate(reports):
        for entry in report["operators"]:
            name = entry["operator"]
            held = rows.setdefault(name, {})
            for shape in entry["shapes"]:
                earlier = held.get(shape["shape_id"])
                if earlier is None or shape.get("status") == "pass" or earlier["status"] != "pass":
                    held[shape["shape_id"]] = {**shape, "from_part": index}
            if name not in entries or any(s.get("status") == "pass" for s in entry["shapes"]):
                entries[name] = entry  # its other fields: the latest part that timed any
    per_part = ("operators", "precompile", "aggregate_if_counted", "finished_at")
    merged = {key: value for key, value in first.items() if key not in per_part}
    merged["parts"] = [
        {
            "started_at": report.get("started_at"),
            "environment": report.get("environment"),
            "operators": [entry["operator"] for entry in report["operators"]],
        }
        for report in reports
    ]
    merged["operators"] = []
    for name in sorted(entries):
        shapes = sorted(rows[name].values(), key=lambda row: _shape_order(row["shape_id"]))
        reached = [row for row in shapes if row.get("status") != "not_run"]
        timed = any(row.get("status") == "pass" for row in shapes)
        merged["operators"].append(
            {
                **entries[name],
                "shapes": shapes,
                "score_if_counted": operator_score(reached) if timed else 0.0,
                "from_parts": sorted({row["from_part"] for row in shapes}),
            }
        )
    return merged


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("reports", nargs="+", type=Path, help="oldest first")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    try:
        merged = merge([json.loads(path.read_text()) for path in args.reports])
    except MergeError as error:
        print(f"merge_baselines: {error}", file=sys.stderr)
        return 2
    args.out.write_text(json.dumps(merged, indent=1))
    timed = sum(
        1
        for entry in merged["operators"]
        for shape in entry["shapes"]
        if shape.get("status") == "pass"
    )
    print(f"{len(merged['operators'])} operators, {timed} shapes timed -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
