"""bench/where_time_goes.py's breakdown of a results.json (a pure function of the file)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))

from where_time_goes import COLUMNS, breakdown, table  # noqa: E402


def _results() -> dict:
    shape = {
        "status": "pass",
        "wall_s": {
            "setup": 0.1, "inputs": 0.2, "candidate_first": 1.0, "candidate": 0.3,
            "reference": 0.4, "compare": 0.1, "hooks": 0.2, "checks": 2.7, "timed_inputs": 0.2,
            "timed_first_check": 0.3, "timed_candidate": 1.5, "timed_checks": 0.4,
            "timed_reference": 0.6, "timing": 2.5, "total": 5.2,
        },
    }  # fmt: skip
    operator = {
        "operator": "rms_norm",
        "wall_s": 9.0,
        "ahead_s": 4.0,
        "phases_s": {"start": 1.0, "harness": 0.5, "import": 0.2, "variants": 0.3,
                     "shapes": 6.5, "exit": 0.5},
        "shapes": [shape],
    }  # fmt: skip
    return {"wall_s": 10.0, "environment": {"start_ahead": True}, "operators": [operator]}


def test_the_phases_of_an_operator_add_up_to_its_wall_time():
    summary = breakdown(_results())
    row = summary["operators"]["rms_norm"]
    assert row["compile"] == 1.0 and row["reference"] == 0.4
    # The loop's hooks are checks, not timing: 1.5 - 0.2 - 0.3.
    assert row["timing"] == 1.0 and row["t_checks"] == 0.9
    assert row["hooks"] == 0.2
    assert row["fb_report"] == pytest.approx(0.4)  # the checks outside their parts (2.7 - 2.3)
    assert row["io"] == pytest.approx(1.3)  # the shapes' turn outside their parts (6.5 - 5.2)
    assert abs(sum(row[c] for c in COLUMNS if c != "ahead") - row["wall_s"]) < 1e-6
    assert summary["runner_s"] == 1.0 and summary["totals_s"]["ahead"] == 4.0
    assert "rms_norm" in table(summary)


def test_an_older_harness_without_the_parts_still_reads():
    results = _results()
    wall = results["operators"][0]["shapes"][0]["wall_s"]
    results["operators"][0]["shapes"][0]["wall_s"] = {
        "checks": wall["checks"],
        "timing": wall["timing"],
    }
    row = breakdown(results)["operators"]["rms_norm"]
    assert row["fb_report"] == 2.7 and row["timing"] == 2.5 and row["compile"] == 0.0
