"""Merge reference-baseline reports (``bench/reference_baseline.py``) measured in parts.

The torch.compile baseline over v1 does not fit one device session (inductor compiles for
minutes per operator), so it is measured an operator set at a time, on the same hardware
profile and suite. This writes one report from several: for each operator, the entry of the
latest report that timed any of its shapes (else the latest that lists it), so a later
part can re-measure what an earlier one only reached in part. Reports of another mode,
suite (content hash), hardware profile, or with a different ``--dynamic`` are refused. The
merged report keeps every part's environment and start time under ``parts`` and each
operator's source under ``from_part``:

    python3 bench/merge_baselines.py first.json second.json --out merged.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

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
    chosen: dict[str, tuple[int, dict[str, Any]]] = {}
    for index, report in enumerate(reports):
        for entry in report["operators"]:
            timed = any(shape.get("status") == "pass" for shape in entry["shapes"])
            held = chosen.get(entry["operator"])
            held_timed = held is not None and any(
                shape.get("status") == "pass" for shape in held[1]["shapes"]
            )
            if held is None or timed or not held_timed:
                chosen[entry["operator"]] = (index, entry)
    merged = {key: value for key, value in first.items() if key not in ("operators", "precompile")}
    merged["parts"] = [
        {
            "started_at": report.get("started_at"),
            "environment": report.get("environment"),
            "operators": [entry["operator"] for entry in report["operators"]],
        }
        for report in reports
    ]
    merged["operators"] = [
        {**entry, "from_part": index} for index, entry in sorted(
            chosen.values(), key=lambda item: item[1]["operator"]
        )
    ]  # fmt: skip
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
