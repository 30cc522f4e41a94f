"""Site-wide basics: an icon for every page (no 404 on /favicon.ico), and a title on each
page that says which page it is ("<page> · Atrex-Bench Portal")."""

from __future__ import annotations

import re

import pytest
from django.contrib.staticfiles import finders
from django.urls import reverse


def test_the_favicon_resolves_to_a_static_icon(client):
    response = client.get("/favicon.ico")
    assert response.status_code == 302
    assert response["Location"].endswith("favicon.ico")
    path = finders.find("favicon.ico")
    assert path, "static/favicon.ico is missing"
    with open(path, "rb") as icon:
        assert icon.read(4) == b"\x00\x00\x01\x00"  # an ICO file
    assert finders.find("favicon.svg")


@pytest.mark.django_db
def test_every_page_names_itself_in_its_title_and_links_its_icon(client, catalogue):
    pages = {
        reverse("leaderboard:board"): "Leaderboard",
        reverse("leaderboard:history"): "History",
        reverse("leaderboard:about-scores"): "About the scores",
        reverse("login"): "Log in",
        reverse("signup"): "Sign up",
        reverse("leaderboard:operator", args=["rms_norm"]) + "?suite=atrex-bench-v0.1": "rms_norm",
    }
    for url, name in pages.items():
        html = client.get(url).content.decode()
        assert re.search(rf"<title>{re.escape(name)} · Atrex-Bench Portal</title>", html), url
        assert '<link rel="icon" href="/static/favicon.svg"' in html, url
        assert f'<a href="{reverse("leaderboard:about-scores")}"' in html, url  # main nav
    admin = client.get(reverse("admin:login")).content.decode()
    assert re.search(r"<title>Log in · Atrex-Bench Portal admin</title>", admin)
