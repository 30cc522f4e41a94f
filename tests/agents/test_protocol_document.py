"""docs/agent-protocol.yaml says what the portal sends and what it accepts: it must match
the task the loop builds and the answer the example agent gives."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from agents import loop
from agents.protocol import IDEMPOTENCY_HEADER, SIGNATURE_HEADER, TIMESTAMP_HEADER
from examples.agents.tile_search.server import Agent

DOCUMENT = yaml.safe_load(
    (Path(__file__).resolve().parents[2] / "docs" / "agent-protocol.yaml").read_text()
)
SCHEMAS = DOCUMENT["components"]["schemas"]


def _task() -> dict:
    spec = loop.CampaignSpec(
        key="c", operators=["rms_norm"], rounds=3, dsl="triton", hardware={"slug": "cpu-dev"},
        suite_definition={"shapes": []}, shape_set="smoke", seconds_per_call=5,
        max_response_bytes=1024,
    )  # fmt: skip
    shape = {"shape_id": "a", "init_kwargs": {}, "weight": 1.0, "w_flops": {}}
    shape.update(input_kwargs={"token_count": 4, "hidden_size": 64}, q_read=1, q_write=1)
    shapes = [shape]
    return loop.task_payload(
        spec, operator="rms_norm", number=1, shapes=shapes, reference="", feedback=None
    )


def test_the_task_has_exactly_the_documented_fields():
    task = _task()
    schema = SCHEMAS["KernelTask"]
    assert set(task) == set(schema["properties"]) == set(schema["required"])
    assert set(task["budget"]) == set(SCHEMAS["Budget"]["required"])
    assert set(task["public_shapes"][0]) == set(SCHEMAS["Shape"]["required"])
    assert set(loop.SHAPE_FEEDBACK_FIELDS) == set(SCHEMAS["ShapeFeedback"]["properties"])


def test_the_example_agent_answers_with_the_documented_fields():
    status, body = Agent(secret=b"s").answer(_task(), "key")
    answer = json.loads(body)
    assert status == 200
    assert set(SCHEMAS["KernelAnswer"]["required"]) <= set(answer)
    assert set(answer) <= set(SCHEMAS["KernelAnswer"]["properties"])


def test_the_documented_headers_are_the_ones_sent():
    parameters = DOCUMENT["components"]["parameters"]
    names = {parameters[key]["name"] for key in ("Timestamp", "Signature", "IdempotencyKey")}
    assert names == {TIMESTAMP_HEADER, SIGNATURE_HEADER, IDEMPOTENCY_HEADER}


def test_the_feedback_has_exactly_the_documented_fields():
    results = {
        "environment": {
            "measurement": {"kind": "round", "trials": 2, "min_reps": 5, "target_rel_se": 0.01}
        },
        "operators": [{"operator": "rms_norm", "status": "ok", "score": 0.5, "shapes": []}],
    }
    feedback = loop.feedback_from_results(results, "rms_norm")
    assert set(feedback) == set(SCHEMAS["Feedback"]["properties"])
    assert set(feedback["measurement"]) == set(SCHEMAS["Measurement"]["properties"])
    assert feedback["measurement"]["kind"] in SCHEMAS["Measurement"]["properties"]["kind"]["enum"]
