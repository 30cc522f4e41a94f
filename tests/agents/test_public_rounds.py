"""A campaign round is measured on public shapes only, and the agent is told only about
public shapes; the campaign driver runs without Django."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agents import loop
from evaluator.suite import SUITES_DIR, Suite

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
RMS_NORM = (REPO / "examples" / "bundles" / "triton-baseline" / "rms_norm.py").read_text()


@pytest.fixture(scope="module")
def suite_with_a_hidden_shape() -> dict:
    data = json.loads((SUITES_DIR / "atrex-bench-v0.1.json").read_text())
    data = copy.deepcopy(data)
    data.pop("content_hash")
    for shape in data["shapes"]:
        if shape["operator"] == "rms_norm" and shape["shape_id"] == "smoke-1":
            shape["visibility"] = "hidden"
    return Suite.from_dict(data).to_dict()


def test_the_task_lists_public_shapes_only(suite_with_a_hidden_shape):
    shapes = loop.public_shapes(suite_with_a_hidden_shape, "rms_norm", "smoke")
    assert [shape["shape_id"] for shape in shapes] == ["smoke-0", "smoke-2"]
    spec = loop.CampaignSpec(
        key="k", operators=["rms_norm"], rounds=2, dsl="triton", hardware={},
        suite_definition=suite_with_a_hidden_shape, shape_set="smoke",
        seconds_per_call=5, max_response_bytes=1024,
    )  # fmt: skip
    task = loop.task_payload(
        spec, operator="rms_norm", number=1, shapes=shapes, reference="ref", feedback=None
    )
    text = json.dumps(task)
    assert "smoke-1" not in text and "seed" not in text
    assert task["budget"]["rounds_left"] == 2 and task["interface"]["file"] == "rms_norm.py"


def test_a_round_is_measured_on_public_shapes_only(suite_with_a_hidden_shape, tmp_path):
    with loop.evaluator_for(
        suite_definition=suite_with_a_hidden_shape,
        hardware_slug="cpu-dev",
        device="cpu",
        shape_set="smoke",
        work_root=tmp_path,
        timeout_s=600,
        extra_args=["--time-budget-s", "0.1"],
        sandbox_args=[],
    ) as evaluate:
        results = evaluate("rms_norm", RMS_NORM, 1)
    feedback = loop.feedback_from_results(results, "rms_norm")
    assert [shape["shape_id"] for shape in feedback["shapes"]] == ["smoke-0", "smoke-2"]
    assert {shape["status"] for shape in feedback["shapes"]} == {"pass"}
    assert set(feedback["shapes"][0]) == set(loop.SHAPE_FEEDBACK_FIELDS)


def test_the_campaign_driver_runs_without_django(tmp_path):
    poison = tmp_path / "poison" / "django"
    poison.mkdir(parents=True)
    (poison / "__init__.py").write_text("raise SystemExit('the driver imported django')\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(poison.parent)])}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    out = tmp_path / "campaign.json"
    completed = subprocess.run(
        [sys.executable, "-m", "examples.agents.tile_search.campaign", "--device", "cpu",
         "--operators", "rms_norm", "--rounds", "2", "--time-budget-s", "0.1",
         "--out", str(out), "--work-dir", str(tmp_path / "work")],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=400,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stdout[-2000:] + completed.stderr[-2000:]
    report = json.loads(out.read_text())
    assert [(r["operator"], r["round"], r["status"]) for r in report["rounds"]] == [
        ("rms_norm", 1, "evaluated"),
        ("rms_norm", 2, "evaluated"),
    ]
    assert report["kept"]["rms_norm"]["round"] in (1, 2)
    assert "rms_norm" in completed.stdout and "fraction" in completed.stdout
