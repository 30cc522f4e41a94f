"""The template filters write every figure through evaluator.figures: percentages of the
roofline, three significant figures, never e-notation, a unit that never wraps."""

import re
from decimal import Decimal

import pytest
from django.urls import reverse

from leaderboard.templatetags.figures import ms, percent, si, sig, speedup
from tests.leaderboard.results_factory import publish_row

NBSP = "\u00a0"


@pytest.mark.parametrize(
    "value, shown",
    [
        (0.0503, "5.03%"),
        (5.66e-05, "0.00566%"),
        (6.22e-04, "0.0622%"),
        (0.00149, "0.149%"),
        (0.51, "51.0%"),
        (1.0, "100%"),
        (0, "0%"),
        (-0.5, "-50.0%"),
        (Decimal("0.25"), "25.0%"),
        ("0.5", "50.0%"),
        (None, "—"),
        (float("nan"), "—"),
        ("", "—"),
    ],
)
def test_scores_and_rates_read_as_percentages_with_three_figures(value, shown):
    assert percent(value) == shown


def test_plain_numbers_keep_their_significant_figures_without_e_notation():
    assert sig(2.345e-5) == "0.0000235"
    assert sig(0.40452) == "0.405"
    assert sig(7.4858) == "7.49"
    assert sig(1234.5, 4) == "1235"
    assert sig(0) == "0"
    assert sig(None) == "—" and sig("n/a") == "—"


def test_units_are_joined_with_a_no_break_space():
    assert ms(1.71e-06) == f"1.71{NBSP}ns"  # was "1.71e-06 ms" on the submission page
    assert ms(0.0689) == f"68.9{NBSP}µs"
    assert si(4.8e12, "B/s") == f"4.80{NBSP}TB/s"
    assert si(3.44e9, "FLOP") == f"3.44{NBSP}GFLOP"
    assert si(None, "B") == "—" and ms(None) == "—"
    assert speedup(10.27) == "10.3×" and speedup(None) == "—"


def visible_text(html: str) -> str:
    """The figures a reader sees on a page: no scripts (the charts' JSON data), styles or
    tags, and no quoted source (code blocks, and the operator module's documentation as
    written, where ``eps = 1e-6`` is Python, not a figure the site writes)."""
    html = re.sub(r"<(script|style|pre|code)\b.*?</\1>", " ", html, flags=re.S)
    html = re.sub(r'<div id="operator-description".*?</div>', " ", html, flags=re.S)
    html = re.sub(r'<div class="source-box".*?</div>', " ", html, flags=re.S)
    return re.sub(r"<[^>]+>", " ", html)


E_NOTATION = re.compile(r"\d(?:\.\d+)?[eE][-+]?\d")


@pytest.mark.django_db
def test_pages_show_tiny_scores_as_percentages_never_in_e_notation(client, catalogue, user):
    # A CPU development score: 5.66e-05 of the roofline, 1.71e-06 ms per shape.
    row = publish_row(owner=user, suite=catalogue, title="cpu dev", fraction=5.66e-05, spread=0.01)
    pages = {
        "board": client.get(reverse("leaderboard:board"), CPU),
        "submission": client.get(reverse("submissions:detail", args=[row.pk])),
        "operator": client.get(reverse("leaderboard:operator", args=["rms_norm"]), CPU),
        "history": client.get(reverse("leaderboard:history"), CPU),
    }
    for name, response in pages.items():
        assert response.status_code == 200, name
        text = visible_text(response.content.decode())
        assert not E_NOTATION.search(text), (name, E_NOTATION.search(text))
        assert "0.00566%" in text, name
    board = pages["board"].content.decode()
    assert 'href="/about/scores/"' in board  # the board links to "About the scores"
    assert "% of roofline" in board
    submission = visible_text(pages["submission"].content.decode())
    assert "1.00\u00a0µs" in submission  # T_SOL of the first smoke shape: 1e-3 ms


CPU = {"suite": "atrex-bench-v0.1", "hardware": "cpu-dev"}


def test_charts_label_fractions_as_percentages_and_rates_with_si_prefixes():
    from atrex_site import charts

    assert charts.fraction_axis("score")["tickformat"] == ".3~p"  # 0.008%, never "80µ"
    roof = charts.roofline_figure(
        points=[], peak_flops={"bf16_tc": 989e12}, hbm_bytes_per_s=4.8e12, hardware_name="H200"
    )
    y, x = roof["layout"]["yaxis"], roof["layout"]["xaxis"]
    # Log axes carry their own tick labels, written by evaluator/figures.py: SI prefixes
    # with the unit on the rate ("100\u00a0TFLOP/s", never "10¹⁵" beside "100T"), plain
    # decimals on the intensity; never e-notation.
    assert y["type"] == x["type"] == "log"
    assert y["ticktext"] and all(t.endswith("FLOP/s") for t in y["ticktext"]), y["ticktext"]
    assert any("TFLOP/s" in t for t in y["ticktext"]) and any("PFLOP/s" in t for t in y["ticktext"])
    assert x["ticktext"] and not any(E_NOTATION.search(t) for t in x["ticktext"] + y["ticktext"])
    assert len(y["tickvals"]) == len(y["ticktext"]) and len(x["tickvals"]) == len(x["ticktext"])
