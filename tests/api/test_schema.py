"""The OpenAPI schema is valid and warning-free, and its docs are served without a CDN."""

from __future__ import annotations

import re

import pytest
from django.core.management import call_command

pytestmark = pytest.mark.django_db


def test_schema_generates_without_warnings_and_validates(tmp_path):
    out = tmp_path / "schema.yaml"
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(out))
    text = out.read_text()
    assert "/api/leaderboard/" in text and "/api/tokens/" in text
    assert "/api/staff/" not in text  # the curation API is not public


@pytest.mark.parametrize("page", ["/api/docs/", "/api/redoc/"])
def test_docs_pages_load_their_assets_from_this_site(client, page):
    response = client.get(page)
    assert response.status_code == 200
    html = response.content.decode()
    sources = re.findall(r'(?:src|href)="([^"]+)"', html)
    assets = [s for s in sources if s.endswith((".js", ".css"))]
    assert assets, html[:500]
    assert all(s.startswith("/static/") for s in assets), assets
    for asset in assets:
        assert client.get(asset).status_code == 200, asset
