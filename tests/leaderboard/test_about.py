"""The "About the scores" page: its worked example is the release's figures, scored by the
project's own code on every request, and checked here against a computation by hand."""

from __future__ import annotations

import json
import math
import re

from django.urls import reverse

from evaluator.figures import duration_ms, roofline_percent
from leaderboard.about import EXAMPLE_PATH, ILLUSTRATIVE_STATUSES, example_inputs
from tests.release import require_release


def test_the_stored_example_is_the_release_data():
    assert example_inputs(require_release()) == json.loads(EXAMPLE_PATH.read_text())


def _by_hand(inputs: dict) -> dict:
    """The example's figures from the definitions in docs/scoring.md, without the scoring
    code: shape score, weighted operator score (0 for an operator with an incorrect shape),
    importance-weighted aggregate, 95% interval, pass rates and counts."""
    operator_scores, variances, importance = {}, {}, {}
    statuses, real_passes = [], 0
    for entry in inputs["operators"]:
        slug = entry["operator"]
        weights = sum(shape["weight"] for shape in entry["shapes"])
        total, variance = 0.0, 0.0
        mine = []
        for shape in entry["shapes"]:
            status = ILLUSTRATIVE_STATUSES.get((slug, shape["shape_id"]), "pass")
            mine.append(status)
            score = shape["t_sol_ms"] / shape["time_ms"] if status == "pass" else 0.0
            total += shape["weight"] * score
            variance += (shape["weight"] / weights * score * 0.005) ** 2
        incorrect = "incorrect" in mine  # a wrong answer anywhere: the operator scores 0
        operator_scores[slug] = 0.0 if incorrect else total / weights
        variances[slug] = 0.0 if incorrect else variance
        real_passes += 0 if incorrect else mine.count("pass")
        importance[slug] = entry["importance"]
        statuses += mine
    share = {slug: value / sum(importance.values()) for slug, value in importance.items()}
    aggregate = sum(share[slug] * operator_scores[slug] for slug in share)
    half = 1.96 * math.sqrt(sum(share[slug] ** 2 * variances[slug] for slug in share))
    return {
        "operators": operator_scores,
        "aggregate": aggregate,
        "interval": (max(0.0, aggregate - half), aggregate + half),
        "real_pass": real_passes / len(statuses),
        "apparent_pass": (statuses.count("pass") + statuses.count("fallback")) / len(statuses),
        "apparent_passes": statuses.count("pass"),
        "real_passes": real_passes,
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
    for slug, score in expected["operators"].items():
        assert _text(html, f"example-{slug}-score") == roofline_percent(score)
    # The example's one incorrect shape makes its operator incorrect: it scores 0, and the
    # page says which shape and why, rather than a weighted mean.
    (incorrect,) = [key for key, status in ILLUSTRATIVE_STATUSES.items() if status == "incorrect"]
    slug, shape_id = incorrect
    assert expected["operators"][slug] == 0.0 and _text(html, f"example-{slug}-score") == "0%"
    rule = _text(html, f"example-{slug}-rule")
    assert rule.startswith("Incorrect: a wrong") and f"shape {shape_id}," in rule
    assert "scores 0" in rule and "Σ w·s" not in rule
    assert 0 < expected["aggregate"] < max(expected["operators"].values())
    assert _text(html, "example-apparent-passes") == str(expected["apparent_passes"])
    assert _text(html, "example-real-passes") == str(expected["real_passes"])
    assert expected["real_passes"] < expected["apparent_passes"]
    low, high = expected["interval"]
    assert _text(html, "example-interval") == f"[{roofline_percent(low)}, {roofline_percent(high)}]"
    assert _text(html, "example-real-pass") == roofline_percent(expected["real_pass"])
    assert _text(html, "example-apparent-pass") == roofline_percent(expected["apparent_pass"])
    # T_SOL = max(W/P, Q/B) on the H20 equals the release's published figure.
    assert _text(html, "example-h20-tsol") == duration_ms(inputs["published_h20_t_sol_ms"]).replace(
        " ", "\u00a0"
    )
    for section in ("definitions", "verdicts", "interval", "ties", "example"):
        assert f'id="{section}"' in html


def _words(html: str, element_id: str, end: str) -> str:
    """The text of an element up to its ``end`` tag, tags dropped, spaces joined."""
    inner = html.split(f'id="{element_id}"', 1)[1].split(">", 1)[1].split(end, 1)[0]
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", inner)).strip()


def test_the_about_page_states_the_verdict_rule_in_readers_words(client):
    html = client.get(reverse("leaderboard:about-scores")).content.decode()
    incorrect = _words(html, "rule-incorrect", "</li>")
    assert "returns a wrong result on any shape" in incorrect
    assert "hidden validation variant" in incorrect and "GPU sanitizer" in incorrect
    assert "is incorrect as a whole and scores 0" in incorrect
    assert "loses only its own shape" in _words(html, "rule-loud", "</li>")
    held = _words(html, "rule-held", "</li>")
    assert "holds the whole submission for review" in held
    assert "nothing of it is published until staff release it" in held
    counts = _words(html, "def-pass-counts", "</dd>")
    assert "Apparent passes count shape by shape" in counts
    assert "Real passes count operator by operator" in counts
