"""The pages a researcher reads beside the board, in a real browser: "About the scores"
reached from the board's link, an operator page (its reference highlighted, its shapes, the
score distribution drawn) and the history page (the chart drawn, the baselines in it), at
desktop and phone width. Rows are imported results (no worker)."""

from __future__ import annotations

import pytest

from tests.browser.layout import assert_within_width
from tests.factories import UserFactory
from tests.leaderboard.results_factory import publish_row

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

BOARD = "?suite=atrex-bench-v0.1&hardware=cpu-dev"


def _no_sideways_page(page) -> bool:
    return page.evaluate("document.documentElement.scrollWidth") <= page.viewport_size["width"]


def test_about_operator_and_history_pages_read_at_desktop_and_phone_width(
    close_other_db_sessions_at_the_end, page, live_server, catalogue, user, tmp_path
):
    publish_row(owner=user, suite=catalogue, title="norms", fraction=0.5)
    publish_row(owner=UserFactory(), suite=catalogue, title="slower norms", fraction=0.25)
    publish_row(owner=UserFactory(), suite=catalogue, title="eager", fraction=0.1, is_baseline=True)

    page.goto(f"{live_server.url}/{BOARD}")
    page.locator("#about-scores-link").click()
    page.wait_for_url("**/about/scores/*")
    assert page.locator("#def-aggregate").is_visible()
    assert page.locator("#example-heading").inner_text() == "A worked example"

    for width, height in ((1280, 900), (390, 844)):
        page.set_viewport_size({"width": width, "height": height})
        page.goto(f"{live_server.url}/operators/rms_norm/{BOARD}")
        model = page.locator("#source-section .source-box").first
        assert "class Model" in model.inner_text()
        assert model.locator("span.k").count() > 0, "the reference is not highlighted"
        assert page.locator("#shape-table tbody tr").count() == 3  # its smoke shapes
        page.wait_for_selector("#distribution-chart .main-svg")
        # Ranked submissions only: the baseline is on the board but not ranked.
        assert page.locator("#score-table tbody tr").count() == 2
        assert _no_sideways_page(page), f"the operator page scrolls sideways at {width} px"
        # Every figure of a shape is on screen, T_SOL and the best result included (on a
        # phone each shape is one block, not a table scrolled sideways).
        assert_within_width(page.locator("#shape-table tbody tr").first.locator("th, td"), width)
        page.screenshot(path=str(tmp_path / f"operator-{width}.png"), full_page=True)

        page.goto(f"{live_server.url}/history/{BOARD}")
        page.wait_for_selector("#history-chart .main-svg")
        assert page.locator("#history-table tr.baseline").count() == 1
        assert "norms" in page.locator("#history-table").inner_text()
        assert _no_sideways_page(page), f"the history page scrolls sideways at {width} px"
        page.screenshot(path=str(tmp_path / f"history-{width}.png"), full_page=True)
