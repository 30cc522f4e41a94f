"""Registering an endpoint (the secret shown once, kept encrypted), refusing a URL the
portal will not call, the test-connection button, starting a campaign."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from agents.models import AgentEndpoint, AllowedNetwork, Campaign
from agents.shared_secret import secret_decrypt
from submissions.models import Submission

pytestmark = pytest.mark.django_db


def _form(url: str, **extra) -> dict:
    return {
        "name": "tile-search",
        "url": url,
        "model_name": "none",
        "agent_version": "1.0",
        "dsl": "triton",
        "rounds_per_operator": 3,
        "seconds_per_call": 30,
        "max_response_bytes": 65536,
        "operators": "rms_norm, silu_and_mul",
        **extra,
    }


def _register(client, url: str) -> tuple[AgentEndpoint, str]:
    response = client.post(reverse("agents:new"), _form(url))
    assert response.status_code == 200, response.content[:2000]
    assert response["Cache-Control"] == "no-store"
    secret = re.search(r'id="shared-secret">([^<]+)<', response.content.decode()).group(1)
    return AgentEndpoint.objects.get(name="tile-search"), secret


def test_the_agent_pages_need_a_login(client):
    response = client.get(reverse("agents:new"))
    assert response.status_code == 302 and reverse("login") in response["Location"]


def test_registering_shows_the_secret_once_and_stores_it_encrypted(client, user, catalogue):
    AllowedNetwork.objects.create(network="127.0.0.1", note="tests")
    client.force_login(user)
    endpoint, secret = _register(client, "http://127.0.0.1:9/agent")
    assert len(secret) >= 40
    assert secret not in endpoint.secret_encrypted and endpoint.secret_hint == secret[-4:]
    assert secret_decrypt(endpoint.secret_encrypted) == secret.encode()
    assert endpoint.operators == ["rms_norm", "silu_and_mul"]
    page = client.get(reverse("agents:detail", args=[endpoint.pk])).content.decode()
    assert secret not in page and endpoint.secret_hint in page
    # Another researcher cannot see the endpoint.
    from tests.factories import UserFactory

    client.force_login(UserFactory())
    assert client.get(reverse("agents:detail", args=[endpoint.pk])).status_code == 404


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("http://127.0.0.1:8080/agent", "loopback address"),
        ("http://169.254.169.254/latest/", "link-local address"),
        ("ftp://agent.example.org/", "http:// or https://"),
    ],
)
def test_a_url_the_portal_will_not_call_is_refused_on_the_form(
    client, user, catalogue, url, message
):
    client.force_login(user)
    response = client.post(reverse("agents:new"), _form(url))
    assert response.status_code == 200 and message in response.content.decode()
    assert not AgentEndpoint.objects.exists()


def test_an_unknown_operator_is_refused_on_the_form(client, user, catalogue):
    AllowedNetwork.objects.create(network="127.0.0.1", note="tests")
    client.force_login(user)
    response = client.post(
        reverse("agents:new"), _form("http://127.0.0.1:9/", operators="rms_norm, warp_drive")
    )
    assert "Unknown operator(s): warp_drive" in response.content.decode()


def test_test_connection_calls_the_health_route(client, user, catalogue, start_tile_agent):
    AllowedNetwork.objects.create(network="127.0.0.1", note="tests")
    client.force_login(user)
    endpoint, secret = _register(client, "http://127.0.0.1:9/placeholder")
    endpoint.url = start_tile_agent(secret)
    endpoint.save()
    page = client.post(reverse("agents:test", args=[endpoint.pk]), follow=True).content.decode()
    assert "Test connection: The agent answered: ok (tile-search 1.0)" in page
    endpoint.refresh_from_db()
    assert endpoint.last_check_ok is True

    # The same agent with a different secret refuses the portal's signature.
    endpoint.url = start_tile_agent("not-the-registered-secret")
    endpoint.save()
    page = client.post(reverse("agents:test", args=[endpoint.pk]), follow=True).content.decode()
    assert "agent:http-4xx" in page and "bad signature" in page
    endpoint.refresh_from_db()
    assert endpoint.last_check_ok is False


def test_starting_a_campaign_creates_an_agent_submission(client, user, catalogue):
    AllowedNetwork.objects.create(network="127.0.0.1", note="tests")
    client.force_login(user)
    endpoint, _ = _register(client, "http://127.0.0.1:9/agent")
    response = client.post(
        reverse("agents:campaign", args=[endpoint.pk]),
        {"title": "Tile search v1", "visibility": "public"},
    )
    submission = Submission.objects.get(title="Tile search v1")
    assert response["Location"] == reverse("submissions:detail", args=[submission.pk])
    assert submission.kind == "agent" and submission.agent_name == "tile-search"
    assert submission.status == Submission.Status.RECEIVED
    campaign = submission.campaign
    assert campaign.status == Campaign.Status.QUEUED
    assert campaign.plan["operators"] == ["rms_norm", "silu_and_mul"]
    assert campaign.plan["rounds_per_operator"] == 3
