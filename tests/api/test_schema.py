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
    # Scores are documented as fractions 0..1 (the pages show percentages).
    words = " ".join(text.split())  # YAML wraps long descriptions
    assert "mean of the operator scores, a fraction of the roofline 0..1" in words
    assert "Fraction of the hardware roofline, 0..1" in words


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


def _strings(node):
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):
        for value in node.values():
            yield from _strings(value)
    elif isinstance(node, list):
        for value in node:
            yield from _strings(value)


def test_schema_text_has_no_angle_bracket_placeholder_outside_code(client):
    """The docs pages render descriptions as Markdown: a bare ``<token>`` is taken for an
    HTML tag and disappears ("Authorization: Token" with nothing after it)."""
    schema = client.get("/api/schema/", {"format": "json"}).json()
    texts = list(_strings(schema))
    assert any("Token <token>" in text for text in texts)
    for text in texts:
        outside_code = re.sub(r"`[^`]*`", "", text)
        assert not re.search(r"<[a-z_]+>", outside_code), text
