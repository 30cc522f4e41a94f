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
        shape.update(status="pass", time_ms=1.0, error=None)
    new = {"operator": "mla_decode_attention", "shapes": [
        {"shape_id": "0", "weight": 1.0, "status": "pass", "time_ms": 0.5}
    ]}  # fmt: skip
    second["operators"] = [redone, new]
    return second


def test_later_parts_add_operators_and_replace_what_they_timed(tmp_path):
    first = json.loads(PART.read_text())
    merged = merge([first, _later_part(first)])
    by_name = {entry["operator"]: entry for entry in merged["operators"]}
    assert len(by_name) == len(first["operators"]) + 1
    assert by_name["mla_decode_attention"]["from_part"] == 1
    assert by_name["attention_forward"]["from_part"] == 1
    assert {s["status"] for s in by_name["attention_forward"]["shapes"]} == {"pass"}
    assert by_name["l2_norm"]["from_part"] == 0  # only the first part timed it
    assert [p["started_at"] for p in merged["parts"]] == [
        first["started_at"],
        "2026-12-02T10:00:00+00:00",
    ]
    # A later part that timed nothing of an operator does not replace an earlier timing.
    empty = _later_part(first)
    for shape in empty["operators"][0]["shapes"]:
        shape.update(status="not_run", time_ms=None)
    again = {e["operator"]: e for e in merge([first, empty])["operators"]}
    assert again["attention_forward"]["from_part"] == 0


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
