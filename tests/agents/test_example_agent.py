"""The example tile-search agent: its search moves toward better tiles from the feedback,
drops a stalled line, answers a retried round the same, and refuses unsigned requests."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request

import pytest

from agents.protocol import signature
from examples.agents.tile_search.search import OperatorSearch
from examples.agents.tile_search.templates import RMS_NORM, SILU_AND_MUL, TEMPLATES

from .conftest import SECRET

SMALL = [{"shape_id": "a", "input_kwargs": {"token_count": 8, "hidden_size": 128}, "weight": 1}]


def feedback(fraction: float, status: str = "pass") -> dict:
    return {"status": "ok", "shapes": [{"shape_id": "a", "status": status,
                                        "roofline_fraction": fraction}]}  # fmt: skip


def test_a_better_neighbour_becomes_the_centre_of_the_search():
    search = OperatorSearch(RMS_NORM)
    first = search.propose(1, SMALL)["small"]
    assert first == RMS_NORM.seeds[0]
    search.learn(1, feedback(0.10), SMALL)
    second = search.propose(2, SMALL)["small"]
    assert second != first
    search.learn(2, feedback(0.30), SMALL)
    line = search.lines["small"]
    assert line.centre == second and line.best == second and line.best_score == 0.30
    third = search.propose(3, SMALL)["small"]
    # One step from the new centre in one dimension.
    changed = [k for k in third if third[k] != second[k]]
    assert len(changed) == 1


def test_a_failed_kernel_scores_zero_and_never_becomes_best():
    search = OperatorSearch(RMS_NORM)
    search.propose(1, SMALL)
    search.learn(1, feedback(0.2), SMALL)
    bad = search.propose(2, SMALL)["small"]
    search.learn(2, feedback(0.9, status="incorrect"), SMALL)
    assert search.lines["small"].best != bad and search.lines["small"].best_score == 0.2


def test_a_stalled_line_is_dropped_for_the_next_seed():
    search = OperatorSearch(SILU_AND_MUL, patience=2)
    small = [{"shape_id": "a", "input_kwargs": {"shape": [4, 512]}, "weight": 1}]
    search.propose(1, small)
    search.learn(1, feedback(0.5), small)
    for number in (2, 3):
        search.propose(number, small)
        search.learn(number, feedback(0.1), small)
    line = search.lines["small"]
    assert line.dropped == 1 and line.centre == SILU_AND_MUL.seeds[1]
    assert any("dropped the line" in entry for entry in search.log)
    # The kernel keeps the best found so far for buckets not being explored, and the
    # next candidate explores the new line.
    assert line.best == SILU_AND_MUL.seeds[0]
    assert search.propose(4, small)["small"] == SILU_AND_MUL.seeds[1]


@pytest.mark.parametrize("operator", sorted(TEMPLATES))
def test_every_template_renders_a_module_that_compiles(operator):
    template = TEMPLATES[operator]
    source = template.render(
        {name: dict(template.seeds[0]) for name in ("small", "medium", "large")}
    )
    compile(source, f"{operator}.py", "exec")
    assert "class Model" in source and "@triton.jit" in source


def _post(url: str, body: dict, *, key: str, secret: str = SECRET, timestamp=None):
    data = json.dumps(body).encode()
    stamp = str(int(timestamp if timestamp is not None else time.time()))
    request = urllib.request.Request(
        url + "/kernel",
        data=data,
        method="POST",
        headers={
            "Content-Type": "application/json",
            "X-Atrex-Timestamp": stamp,
            "X-Atrex-Signature": signature(secret.encode(), stamp, data),
            "Idempotency-Key": key,
        },
    )
    return request


def _task(round_number: int, feedback_=None) -> dict:
    return {"campaign": "c", "operator": "rms_norm", "round": round_number, "dsl": "triton",
            "public_shapes": SMALL, "feedback": feedback_}  # fmt: skip


def test_a_retried_round_gets_the_same_kernel(tile_search_agent):
    with urllib.request.urlopen(_post(tile_search_agent, _task(1), key="c:rms_norm:1")) as r:
        first = json.loads(r.read())
    sent = time.time()
    with urllib.request.urlopen(
        _post(tile_search_agent, _task(2, feedback(0.1)), key="c:rms_norm:2", timestamp=sent)
    ) as r:
        second = r.read()
    # Signed a second later (as a client's retry is, instead of waiting for the clock to
    # tick): a retry, not a replay.
    with urllib.request.urlopen(
        _post(tile_search_agent, _task(2, feedback(0.1)), key="c:rms_norm:2", timestamp=sent + 1)
    ) as r:
        again = r.read()
    assert first["operator"] == "rms_norm" and "class Model" in first["source"]
    assert again == second


@pytest.mark.parametrize(
    ("secret", "age_s", "reason"),
    [("wrong-secret", 0, "bad signature"), (SECRET, 900, "replay window")],
)
def test_unsigned_or_stale_requests_are_refused(tile_search_agent, secret, age_s, reason):
    request = _post(
        tile_search_agent, _task(1), key="x", secret=secret, timestamp=time.time() - age_s
    )
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(request)
    assert caught.value.code == 401 and reason in caught.value.read().decode()


def test_an_exact_replay_is_refused(tile_search_agent):
    request = _post(tile_search_agent, _task(1), key="replay")
    with urllib.request.urlopen(request) as first:
        assert first.status == 200
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(_post_copy(request))
    assert caught.value.code == 401 and "replayed" in caught.value.read().decode()


def _post_copy(request):
    return urllib.request.Request(
        request.full_url, data=request.data, method="POST", headers=dict(request.header_items())
    )
