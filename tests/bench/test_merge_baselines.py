"""bench/merge_baselines.py: a baseline measured in parts becomes one report."""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))

from merge_baselines import MergeError, main, merge  # noqa: E402

PART = REPO / "results" / "2026-12-01-h200-session5" / "compile-baseline-v1.json"


def _later_part(first: dict) -> dict:
    """A second session's part: attention_forward again, in full, and an operator the
    first never reached."""
    second = copy.deepcopy(first)
    second["started_at"] = "2026-12-02T10:00:00+00:00"
    second.pop("precompile", None)
    attention = next(e for e in first["operators"] if e["operator"] == "attention_forward")
    redone = copy.deepcopy(attention)
    for shape in redone["shapes"]:
        shape.update(status="pass", time_ms=1.0, roofline_fraction=0.01, error=None)
    new = {"operator": "mla_decode_attention", "shapes": [
        {"shape_id": "0", "weight": 1.0, "status": "pass", "time_ms": 0.5,
         "roofline_fraction": 0.02}
    ]}  # fmt: skip
    second["operators"] = [redone, new]
    return second


def test_later_parts_add_operators_and_shapes_and_keep_what_earlier_ones_timed(tmp_path):
    first = json.loads(PART.read_text())
    merged = merge([first, _later_part(first)])
    by_name = {entry["operator"]: entry for entry in merged["operators"]}
    assert len(by_name) == len(first["operators"]) + 1
    assert by_name["mla_decode_attention"]["from_parts"] == [1]
    attention = by_name["attention_forward"]
    assert {s["status"] for s in attention["shapes"]} == {"pass"}
    assert {s["from_part"] for s in attention["shapes"]} == {1}  # the latest timing wins
    assert attention["score_if_counted"] > 0
    assert by_name["l2_norm"]["from_parts"] == [0]  # only the first part timed it
    assert [p["started_at"] for p in merged["parts"]] == [
        first["started_at"],
        "2026-12-02T10:00:00+00:00",
    ]
    # A later part that timed some shapes of an operator adds those and keeps the rest.
    partial = _later_part(first)
    redone = partial["operators"][0]["shapes"]
    earlier = next(e for e in first["operators"] if e["operator"] == "attention_forward")
    timed_first = {s["shape_id"] for s in earlier["shapes"] if s["status"] == "pass"}
    assert timed_first  # session 5 timed attention_forward's first shape only
    for shape in redone:
        if shape["shape_id"] in timed_first or shape["shape_id"] == "5":
            shape.update(status="not_run", time_ms=None)
    again = {e["operator"]: e for e in merge([first, partial])["operators"]}
    rows = {s["shape_id"]: s for s in again["attention_forward"]["shapes"]}
    assert [s["shape_id"] for s in again["attention_forward"]["shapes"]] == [
        s["shape_id"] for s in earlier["shapes"]
    ]
    for shape_id in timed_first:
        assert rows[shape_id]["status"] == "pass" and rows[shape_id]["from_part"] == 0
    assert rows["5"]["status"] == "not_run" and rows["5"]["from_part"] == 1
    assert sum(s["status"] == "pass" for s in rows.values()) == len(rows) - 1
    assert again["attention_forward"]["from_parts"] == [0, 1]


def test_parts_of_another_baseline_are_refused(tmp_path, capsys):
    first = json.loads(PART.read_text())
    other = _later_part(first)
    other["hardware"] = {**other["hardware"], "slug": "h100-sxm"}
    with pytest.raises(MergeError, match="another baseline"):
        merge([first, other])
    paths = []
    for index, report in enumerate((first, other)):
        paths.append(tmp_path / f"part{index}.json")
        paths[-1].write_text(json.dumps(report))
    assert main([*map(str, paths), "--out", str(tmp_path / "merged.json")]) == 2
    assert "mode, suite and its hash" in capsys.readouterr().err
    assert not (tmp_path / "merged.json").exists()
