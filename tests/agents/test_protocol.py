"""The protocol client against agents on loopback that misbehave in every way the submission
page must explain: timeouts, 4xx/5xx, malformed JSON, oversized answers, the wrong
operator, an empty source. Also the signing, the replay window and the retries."""

from __future__ import annotations

import json
import time

import pytest

from agents.protocol import (
    AgentClient,
    AgentClientError,
    AgentEmptySource,
    AgentMalformed,
    AgentServerError,
    AgentTimeout,
    AgentTooLarge,
    AgentUnreachable,
    AgentWrongOperator,
    Limits,
    signature,
    signature_valid,
)
from agents.ssrf import parse_networks

from .conftest import kernel_answer, sleep_then

TASK = {"operator": "rms_norm", "round": 1, "campaign": "c-1"}


def client_for(url: str, **limits) -> AgentClient:
    settings = {"seconds_per_call": 2.0, "max_response_bytes": 64 * 1024, "retries": 2}
    settings.update(limits)
    return AgentClient(
        base_url=url,
        secret=b"the-secret",
        limits=Limits(backoff_s=0.01, **settings),
        allowed_networks=parse_networks(["127.0.0.1/32"]),
    )


def test_a_good_answer_is_signed_keyed_and_accepted(scripted_agent):
    agent = scripted_agent(
        lambda hit, i: (200, {}, kernel_answer("rms_norm", usage={"input_tokens": 12}))
    )
    answer = client_for(agent.url).request_kernel(task=TASK, idempotency_key="c-1:rms_norm:1")
    assert answer.source.startswith("class Model") and answer.usage.input_tokens == 12
    hit = agent.hits[0]
    assert hit.path == "/agent/kernel" and hit.headers["Idempotency-Key"] == "c-1:rms_norm:1"
    assert signature_valid(
        b"the-secret",
        timestamp=hit.headers["X-Atrex-Timestamp"],
        body=hit.body,
        signature_header=hit.headers["X-Atrex-Signature"],
    )
    assert not signature_valid(
        b"another-secret",
        timestamp=hit.headers["X-Atrex-Timestamp"],
        body=hit.body,
        signature_header=hit.headers["X-Atrex-Signature"],
    )


def test_a_signature_outside_the_replay_window_is_invalid():
    old = str(int(time.time()) - 600)
    header = signature(b"k", old, b"{}")
    assert not signature_valid(b"k", timestamp=old, body=b"{}", signature_header=header)
    fresh = str(int(time.time()))
    assert signature_valid(
        b"k", timestamp=fresh, body=b"{}", signature_header=signature(b"k", fresh, b"{}")
    )
    assert not signature_valid(
        b"k", timestamp=fresh, body=b"{ }", signature_header=signature(b"k", fresh, b"{}")
    )


def test_a_5xx_is_retried_with_the_same_key_and_fresh_signatures(scripted_agent):
    def respond(hit, index):
        if index < 2:
            return (503, {}, b"busy")
        return (200, {}, kernel_answer("rms_norm"))

    agent = scripted_agent(respond)
    answer = client_for(agent.url).request_kernel(task=TASK, idempotency_key="k-5xx")
    assert answer.attempts == 3 and len(agent.hits) == 3
    assert {hit.headers["Idempotency-Key"] for hit in agent.hits} == {"k-5xx"}


def test_5xx_every_time_gives_up_after_the_retries(scripted_agent):
    agent = scripted_agent(lambda hit, i: (500, {}, b"Internal error: out of ideas"))
    with pytest.raises(AgentServerError, match=r"HTTP 500: Internal error.*after 3 attempts"):
        client_for(agent.url).request_kernel(task=TASK, idempotency_key="k")
    assert len(agent.hits) == 3


def test_a_timeout_is_retried_then_reported(scripted_agent):
    agent = scripted_agent(sleep_then(1.5, (200, {}, kernel_answer("rms_norm"))))
    started = time.monotonic()
    with pytest.raises(AgentTimeout, match="within 0.5 s"):
        client_for(agent.url, seconds_per_call=0.5, retries=1).request_kernel(
            task=TASK, idempotency_key="k"
        )
    assert len(agent.hits) == 2 and time.monotonic() - started < 4


def test_a_slow_drip_of_bytes_is_a_timeout(scripted_agent):
    def drip(handler):
        handler.send_response(200)
        handler.send_header("Content-Length", "1000")
        handler.end_headers()
        for _ in range(20):
            handler.wfile.write(b" ")
            handler.wfile.flush()
            time.sleep(0.1)

    agent = scripted_agent(lambda hit, i: drip)
    with pytest.raises(AgentTimeout):
        client_for(agent.url, seconds_per_call=0.5, retries=0).request_kernel(
            task=TASK, idempotency_key="k"
        )


def test_a_4xx_is_not_retried(scripted_agent):
    agent = scripted_agent(lambda hit, i: (401, {}, b'{"error": "bad signature"}'))
    with pytest.raises(AgentClientError, match="HTTP 401.*bad signature.*shared secret"):
        client_for(agent.url).request_kernel(task=TASK, idempotency_key="k")
    assert len(agent.hits) == 1


@pytest.mark.parametrize(
    ("body", "error", "message"),
    [
        (b"<html>oops</html>", AgentMalformed, "not valid JSON"),
        (b'["rms_norm"]', AgentMalformed, "must be a JSON object"),
        (kernel_answer("silu_and_mul"), AgentWrongOperator, "'silu_and_mul'.*asked for 'rms_norm'"),
        (json.dumps({"operator": "rms_norm"}).encode(), AgentEmptySource, "no kernel source"),
        (kernel_answer("rms_norm", source="  \n"), AgentEmptySource, "empty kernel source"),
        (kernel_answer("rms_norm", usage={"cost_usd": -1}), AgentMalformed, "cost_usd"),
    ],
)
def test_bad_answers_are_refused_with_a_reason(scripted_agent, body, error, message):
    agent = scripted_agent(lambda hit, i: (200, {}, body))
    with pytest.raises(error, match=message):
        client_for(agent.url).request_kernel(task=TASK, idempotency_key="k")
    assert len(agent.hits) == 1  # a bad answer is not retried


def test_an_oversized_answer_is_refused_by_its_declared_length(scripted_agent):
    agent = scripted_agent(lambda hit, i: (200, {}, kernel_answer("rms_norm", source="x" * 5000)))
    with pytest.raises(AgentTooLarge, match="limit of 2,048 bytes|limit is 2,048 bytes"):
        client_for(agent.url, max_response_bytes=2048).request_kernel(
            task=TASK, idempotency_key="k"
        )


def test_an_oversized_answer_without_a_length_is_cut_off(scripted_agent):
    def endless(handler):
        handler.send_response(200)
        handler.end_headers()  # no Content-Length: read until close
        try:
            for _ in range(100):
                handler.wfile.write(b"x" * 1024)
        except (BrokenPipeError, ConnectionResetError):
            pass

    agent = scripted_agent(lambda hit, i: endless)
    with pytest.raises(AgentTooLarge, match="over the endpoint's limit of 4,096 bytes"):
        client_for(agent.url, max_response_bytes=4096).request_kernel(
            task=TASK, idempotency_key="k"
        )


def test_an_agent_that_is_not_listening_is_unreachable(scripted_agent):
    agent = scripted_agent(lambda hit, i: (200, {}, b""))
    url = agent.url
    # A port that nothing listens on: take one from a server and close it.
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        free = probe.getsockname()[1]
    url = f"http://127.0.0.1:{free}/agent"
    with pytest.raises(AgentUnreachable, match="could not be reached.*after 2 attempts"):
        client_for(url, retries=1).request_kernel(task=TASK, idempotency_key="k")


def test_health_needs_status_ok(scripted_agent):
    agent = scripted_agent(lambda hit, i: (200, {}, b'{"status": "starting"}'))
    with pytest.raises(AgentMalformed, match='must answer "ok"'):
        client_for(agent.url).health()
    good = scripted_agent(lambda hit, i: (200, {}, b'{"status": "ok", "name": "n"}'))
    assert client_for(good.url).health()["name"] == "n"
    assert good.hits[0].method == "GET" and good.hits[0].path == "/agent/health"
