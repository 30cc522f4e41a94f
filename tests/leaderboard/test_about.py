"""The "About the scores" page: its worked example is the release's figures, scored by the
project's own code on every request, and checked here against a computation by hand."""

from __future__ import annotations

import json
import math
import re

import pytest
from django.urls import reverse

from evaluator.figures import duration_ms, roofline_percent
from leaderboard.about import EXAMPLE_PATH, ILLUSTRATIVE_STATUSES, example_inputs
from tests.release import require_release


def test_the_stored_example_is_the_release_data():
    assert example_inputs(require_release()) == json.loads(EXAMPLE_PATH.read_text())


def _by_hand(inputs: dict) -> dict:
    """The example's figures from the definitions in docs/scoring.md, without the scoring
    code: shape score, weighted operator score, importance-weighted aggregate, 95% interval."""
    operator_scores, variances, importance = {}, {}, {}
    statuses = []
    for entry in inputs["operators"]:
        slug = entry["operator"]
        weights = sum(shape["weight"] for shape in entry["shapes"])
        total, variance = 0.0, 0.0
        for shape in entry["shapes"]:
            status = ILLUSTRATIVE_STATUSES.get((slug, shape["shape_id"]), "pass")
            statuses.append(status)
            score = shape["t_sol_ms"] / shape["time_ms"] if status == "pass" else 0.0
            total += shape["weight"] * score
            variance += (shape["weight"] / weights * score * 0.005) ** 2
        operator_scores[slug] = total / weights
        variances[slug] = variance
        importance[slug] = entry["importance"]
    share = {slug: value / sum(importance.values()) for slug, value in importance.items()}
    aggregate = sum(share[slug] * operator_scores[slug] for slug in share)
    half = 1.96 * math.sqrt(sum(share[slug] ** 2 * variances[slug] for slug in share))
    return {
        "operators": operator_scores,
        "aggregate": aggregate,
        "interval": (aggregate - half, aggregate + half),
        "real_pass": statuses.count("pass") / len(statuses),
        "apparent_pass": (statuses.count("pass") + statuses.count("fallback")) / len(statuses),
    }


def _text(html: str, element_id: str) -> str:
    match = re.search(rf'id="{element_id}"[^>]*>(.*?)</', html, flags=re.S)
    assert match, element_id
    return re.sub(r"<[^>]+>", "", match.group(1)).strip()


def test_the_about_page_shows_the_example_as_computed_by_hand(client):
    response = client.get(reverse("leaderboard:about-scores"))
    assert response.status_code == 200
    html = response.content.decode()
    assert "<title>About the scores · Atrex-Bench Portal</title>" in html
    inputs = json.loads(EXAMPLE_PATH.read_text())
    expected = _by_hand(inputs)
    assert _text(html, "example-aggregate-value") == roofline_percent(expected["aggregate"])
    assert expected["aggregate"] == pytest.approx(0.0505, abs=5e-5)  # the page's headline
    for slug, score in expected["operators"].items():
        assert _text(html, f"example-{slug}-score") == roofline_percent(score)
    low, high = expected["interval"]
    assert _text(html, "example-interval") == f"[{roofline_percent(low)}, {roofline_percent(high)}]"
    assert _text(html, "example-real-pass") == roofline_percent(expected["real_pass"])
    assert _text(html, "example-apparent-pass") == roofline_percent(expected["apparent_pass"])
    # T_SOL = max(W/P, Q/B) on the H20 equals the release's published figure.
    assert _text(html, "example-h20-tsol") == duration_ms(inputs["published_h20_t_sol_ms"]).replace(
        " ", "\u00a0"
    )
    for section in ("definitions", "interval", "ties", "example"):
        assert f'id="{section}"' in html
