"""Every way an agent can misbehave ends as a clear error on the submission page: the
round's code and message in the campaign table, and the submission rejected with the
reason. The campaign runs in-process here (no kernel is ever accepted, so nothing is
evaluated); tests/agents/test_campaign_worker.py runs a whole one through a worker."""

from __future__ import annotations

import json
import time

import pytest
from django.urls import reverse

from agents import services
from agents.models import AllowedNetwork, Campaign
from agents.ssrf import UnsafeAddressError
from submissions.models import Submission

from .conftest import kernel_answer

pytestmark = pytest.mark.django_db


def _slow(hit, index):
    time.sleep(2.0)
    return (200, {}, kernel_answer("rms_norm"))


CASES = {
    "agent:timeout": (_slow, "did not answer within 1 s"),
    "agent:http-5xx": (lambda h, i: (502, {}, b"bad gateway"), "HTTP 502"),
    "agent:http-4xx": (lambda h, i: (404, {}, b"no such route"), "HTTP 404"),
    "agent:malformed-json": (lambda h, i: (200, {}, b"{not json"), "not valid JSON"),
    "agent:too-large": (
        lambda h, i: (200, {}, kernel_answer("rms_norm", source="#" * 4000)),
        "limit is 1,024 bytes",
    ),
    "agent:wrong-operator": (
        lambda h, i: (200, {}, kernel_answer("silu_and_mul")),
        "the portal asked for",
    ),
    "agent:empty-source": (
        lambda h, i: (200, {}, json.dumps({"operator": "rms_norm", "source": ""}).encode()),
        "empty kernel source",
    ),
}
# Answers that break the protocol's transport end the operator's line after one round;
# bad content uses up the round and the next round is asked with the error as feedback.
ENDS_THE_LINE = {"agent:timeout", "agent:http-5xx", "agent:http-4xx"}


@pytest.fixture
def fast_retries(settings):
    settings.ATREX = {**settings.ATREX, "AGENT_RETRIES": 1, "AGENT_BACKOFF_S": 0.01}


@pytest.mark.parametrize("code", sorted(CASES))
def test_a_misbehaving_agent_gets_a_clear_error_on_the_submission_page(
    code, scripted_agent, catalogue, user, client, fast_retries
):
    respond, message = CASES[code]
    agent = scripted_agent(respond)
    AllowedNetwork.objects.create(network="127.0.0.1/32", note="test agents on loopback")
    endpoint, _ = services.endpoint_register(
        owner=user,
        fields=services.EndpointFields(
            name=f"bad-{code}",
            url=agent.url,
            rounds_per_operator=2,
            seconds_per_call=1,
            max_response_bytes=1024,
            operators=("rms_norm",),
        ),
    )
    submission = services.campaign_start(owner=user, endpoint=endpoint)
    services.campaign_execute(campaign_id=submission.campaign.pk)

    campaign = Campaign.objects.get(pk=submission.campaign.pk)
    submission.refresh_from_db()
    rounds = list(campaign.rounds.order_by("number"))
    assert campaign.status == Campaign.Status.FAILED
    assert [r.error_code for r in rounds] == [code] * (1 if code in ENDS_THE_LINE else 2)
    assert submission.status == Submission.Status.REJECTED
    assert submission.error_code == "agent:no-kernel"
    assert code in submission.error_message and message in submission.error_message
    if code not in ENDS_THE_LINE:
        # Round 2 was asked with round 1's error as feedback.
        sent = json.loads(agent.hits[-1].body)
        assert sent["round"] == 2 and code in sent["feedback"]["error"]

    client.force_login(user)
    page = client.get(reverse("submissions:detail", args=[submission.pk])).content.decode()
    assert 'id="campaign-table"' in page and 'id="campaign-error"' in page
    assert page.count(code) >= len(rounds) and message in page


def test_an_agent_on_loopback_is_refused_without_the_admin_allow_list(
    scripted_agent, user, catalogue
):
    agent = scripted_agent(lambda h, i: (200, {}, b"{}"))
    with pytest.raises(UnsafeAddressError, match="loopback"):
        services.endpoint_register(
            owner=user, fields=services.EndpointFields(name="local", url=agent.url)
        )
    assert agent.hits == []
