"""A campaign whose worker was lost: a redelivered message leaves a live campaign alone,
and takes over a stale one where it stopped (stored rounds kept, the next round asked with
the last stored feedback)."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from agents import services
from agents.models import AllowedNetwork, Campaign, CampaignRound
from submissions.models import Submission

from .conftest import kernel_answer

pytestmark = [pytest.mark.slow, pytest.mark.django_db]

RMS_NORM = (
    Path(__file__).resolve().parents[2] / "examples" / "bundles" / "triton-baseline" / "rms_norm.py"
).read_text()
ROUND_1_FEEDBACK = {
    "status": "ok",
    "error": "",
    "score": 0.5,
    "shapes": [{"shape_id": "smoke-0", "status": "pass", "roofline_fraction": 0.5}],
}


def test_a_lost_campaign_is_taken_over_where_it_stopped(scripted_agent, catalogue, user):
    agent = scripted_agent(lambda hit, i: (200, {}, kernel_answer("rms_norm", source=RMS_NORM)))
    AllowedNetwork.objects.create(network="127.0.0.1/32", note="tests")
    endpoint, _ = services.endpoint_register(
        owner=user,
        fields=services.EndpointFields(
            name="resumable", url=agent.url, rounds_per_operator=2, operators=("rms_norm",)
        ),
    )
    submission = services.campaign_start(owner=user, endpoint=endpoint)
    campaign = submission.campaign
    # The state a worker left when it died after round 1 of 2.
    Campaign.objects.filter(pk=campaign.pk).update(
        status=Campaign.Status.RUNNING,
        started_at=timezone.now() - timedelta(hours=1),
        heartbeat_at=timezone.now(),
    )
    CampaignRound.objects.create(
        campaign=campaign, operator="rms_norm", number=1, status="evaluated",
        source=RMS_NORM, feedback=ROUND_1_FEEDBACK, score=0.5, all_pass=True,
    )  # fmt: skip

    # A live heartbeat: the redelivered message does nothing.
    services.campaign_execute(campaign_id=campaign.pk)
    assert agent.hits == [] and Campaign.objects.get(pk=campaign.pk).status == "running"

    # A stale heartbeat: taken over, round 2 asked with round 1's figures.
    Campaign.objects.filter(pk=campaign.pk).update(heartbeat_at=timezone.now() - timedelta(hours=1))
    services.campaign_execute(campaign_id=campaign.pk)
    assert len(agent.hits) == 1
    task = json.loads(agent.hits[0].body)
    assert task["round"] == 2 and task["feedback"] == ROUND_1_FEEDBACK
    assert agent.hits[0].headers["Idempotency-Key"] == f"{campaign.key}:rms_norm:2"
    campaign.refresh_from_db()
    rounds = list(campaign.rounds.order_by("number"))
    assert [(r.number, r.status, r.kept) for r in rounds] == [
        (1, "evaluated", True),
        (2, "evaluated", False),
    ]
    assert campaign.status == Campaign.Status.FINISHED and campaign.wall_s >= 3600
    submission.refresh_from_db()
    assert submission.status == Submission.Status.QUEUED
    assert submission.manifest["operators"] == {"rms_norm": "rms_norm.py"}
