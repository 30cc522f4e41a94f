"""bench/fleet_model.py's GPU costs read from a measured run (``--measured``): a pure function
of the results.json, and one shard of every operator costs that run's wall."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))

from fleet_model import group_shards, measured_costs  # noqa: E402


def _operator(name: str, wall: float, start: float, shapes: int) -> dict:
    return {
        "operator": name,
        "wall_s": wall,
        "phases_s": {"start": start, "shapes": wall - start},
        "shapes": [{"shape_id": str(i)} for i in range(shapes)],
    }


@pytest.fixture()
def run_file(tmp_path: Path) -> Path:
    run = {
        "wall_s": 40.0,
        "environment": {"harness_version": "9.9.9"},
        "operators": [
            _operator("a", 20.0, 5.0, 4),  # the first child: started cold
            _operator("b", 8.0, 0.5, 2),  # started ahead, waited a little
            _operator("c", 6.0, 1.5, 3),
            {"operator": "d", "wall_s": None, "shapes": []},  # not reached: left out
        ],
    }
    path = tmp_path / "results.json"
    path.write_text(json.dumps(run))
    return path


def test_costs_leave_out_each_childs_start(run_file: Path) -> None:
    measured = measured_costs(run_file)
    assert measured.costs == {"a": (15.0, 4), "b": (7.5, 2), "c": (4.5, 3)}
    # The run's 6 s outside its operators, with the first child's 5 s start.
    assert measured.first_start_s == pytest.approx(11.0)
    assert measured.ahead_start_s == pytest.approx(1.0)  # the mean of 0.5 and 1.5
    assert measured.harness == "9.9.9"


def _shards(run_file: Path, count: int) -> list[tuple[float, int, list[str]]]:
    """The measured run's operators grouped into ``count`` shards, as the model groups them."""
    measured = measured_costs(run_file)
    return group_shards(
        measured.costs, shards=count, first_start_s=measured.first_start_s,
        ahead_start_s=measured.ahead_start_s,
    )  # fmt: skip


def test_one_shard_costs_the_measured_wall(run_file: Path) -> None:
    measured = measured_costs(run_file)
    shards = _shards(run_file, 1)
    assert len(shards) == 1
    seconds, shapes, names = shards[0]
    assert seconds == pytest.approx(measured.wall_s)
    assert shapes == 9 and sorted(names) == ["a", "b", "c"]


def test_a_shard_per_operator_pays_a_cold_start_each(run_file: Path) -> None:
    shards = _shards(run_file, 3)
    assert sorted(seconds for seconds, _, _ in shards) == pytest.approx([15.5, 18.5, 26.0])


def test_a_run_without_finished_operators_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"wall_s": 3.0, "operators": [{"operator": "a", "wall_s": None}]}))
    with pytest.raises(SystemExit, match="no operator with a wall time"):
        measured_costs(path)
