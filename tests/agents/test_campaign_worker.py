"""A whole agent campaign end to end: the example agent on loopback, a real Celery worker
process that asks it for kernels, measures them on the public shapes, feeds the figures
back, keeps the best and then evaluates the kept bundle like any submission."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from agents import services
from agents.models import AllowedNetwork, Campaign
from leaderboard.selectors import leaderboard_rows
from submissions.models import Submission
from tests.conftest import wait_for_status

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_a_campaign_runs_through_the_worker_and_lands_on_the_board(
    catalogue, user, client, start_tile_agent, celery_worker_process
):
    AllowedNetwork.objects.create(network="127.0.0.1/32", note="the example agent in tests")
    endpoint, secret = services.endpoint_register(
        owner=user,
        fields=services.EndpointFields(
            name="tile-search",
            url="http://127.0.0.1:9/placeholder",
            model_name="none (template search)",
            agent_version="1.0",
            rounds_per_operator=2,
            seconds_per_call=30,
            operators=("rms_norm", "silu_and_mul"),
        ),
    )
    endpoint.url = start_tile_agent(secret)
    endpoint.save(update_fields=["url"])

    submission = services.campaign_start(owner=user, endpoint=endpoint, title="Tile search")
    wait_for_status(submission, Submission.FINAL_STATUSES, timeout_s=480)
    campaign = Campaign.objects.get(submission=submission)
    worker_log = celery_worker_process.read_text(errors="replace")
    assert submission.status == Submission.Status.PUBLISHED, (
        submission.error_message,
        campaign.error_message,
        worker_log[-3000:],
    )
    # The loop: two rounds per operator, the second asked with the first one's figures.
    rounds = list(campaign.rounds.order_by("operator", "number"))
    assert [(r.operator, r.number, r.status) for r in rounds] == [
        ("rms_norm", 1, "evaluated"),
        ("rms_norm", 2, "evaluated"),
        ("silu_and_mul", 1, "evaluated"),
        ("silu_and_mul", 2, "evaluated"),
    ]
    assert all(r.all_pass and {s["shape_id"] for s in r.feedback["shapes"]} for r in rounds)
    assert [r.notes.split(":")[0] for r in rounds] == ["round 1", "round 2"] * 2
    assert sorted(r.operator for r in rounds if r.kept) == ["rms_norm", "silu_and_mul"]
    assert campaign.status == Campaign.Status.FINISHED and campaign.rounds_used == 4
    assert campaign.wall_s > 0 and campaign.input_tokens == 0

    # The kept kernels went through the ordinary path: a bundle, validated, evaluated.
    history = list(submission.history.values_list("to_status", flat=True))
    assert history == ["received", "validating", "queued", "running", "scoring", "published"]
    assert sorted(submission.manifest["operators"]) == ["rms_norm", "silu_and_mul"]
    run = submission.runs.get()
    assert run.shape_results.filter(status="pass").count() == 6
    assert f"{services.CAMPAIGN_TASK}[" in worker_log

    # Provenance on the board and the per-round chart on the submission page.
    rows = list(leaderboard_rows(suite=submission.suite_version, hardware=submission.hardware))
    assert [row.submission_id for row in rows] == [submission.pk]
    board = client.get(reverse("leaderboard:board")).content.decode()
    assert "agent tile-search" in board and "4 rounds" in board
    page = client.get(reverse("submissions:detail", args=[submission.pk])).content.decode()
    assert 'id="campaign-chart"' in page and 'id="campaign-rounds">4<' in page
    figure = json.loads(
        page.split('id="campaign-figure" type="application/json">')[1].split("<")[0]
    )
    lines = {trace["name"]: trace["x"] for trace in figure["data"] if "kept" not in trace["name"]}
    assert lines == {"rms_norm": [1, 2], "silu_and_mul": [1, 2]}
