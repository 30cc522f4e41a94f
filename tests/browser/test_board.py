"""The board in a real browser: sorting by clicking a header, the roofline chart drawn by
plotly on a submission page, the CSV download, the Rank, Submission and Score columns held in
place while the table scrolls sideways, and the phone layout. Rows are imported results (no
worker)."""

from __future__ import annotations

import csv
import io

import pytest

from tests.browser.layout import assert_within_width, before_labels
from tests.factories import UserFactory
from tests.leaderboard.results_factory import publish_row

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def _titles(page) -> list[str]:
    return page.locator("#ranked tr[data-submission] th[scope=row] > a").all_inner_texts()


def test_board_sorts_by_header_draws_the_roofline_and_downloads_csv(
    close_other_db_sessions_at_the_end, page, live_server, catalogue, user, tmp_path
):
    publish_row(
        owner=user,
        suite=catalogue,
        title="silu specialist",
        fraction={"rms_norm": 0.05, "silu_and_mul": 0.9, "fused_add_rms_norm": 0.9},
    )
    norm = publish_row(
        owner=UserFactory(),
        suite=catalogue,
        title="norm specialist",
        fraction={"rms_norm": 0.9, "silu_and_mul": 0.1, "fused_add_rms_norm": 0.1},
    )
    board = f"{live_server.url}/?suite=atrex-bench-v0.1&hardware=cpu-dev"

    page.goto(board)
    # rms_norm weighs most in this suite, so the norm specialist ranks first.
    assert _titles(page) == ["norm specialist", "silu specialist"]
    header = page.locator("#board thead th", has=page.locator("a[data-sort='op:silu_and_mul']"))
    assert header.get_attribute("aria-sort") == "none"
    header.locator("a.sort").click()
    page.wait_for_url("**sort=-op%3Asilu_and_mul*")
    assert _titles(page) == ["silu specialist", "norm specialist"]
    header = page.locator("#board thead th", has=page.locator("a[data-sort='op:silu_and_mul']"))
    assert header.get_attribute("aria-sort") == "descending"

    with page.expect_download() as download_info:
        page.locator("#download-csv").click()
    path = tmp_path / "board.csv"
    download_info.value.save_as(path)
    records = list(csv.DictReader(io.StringIO(path.read_text())))
    assert [r["title"] for r in records] == ["silu specialist", "norm specialist"]
    page.screenshot(path=str(tmp_path / "board.png"), full_page=True)

    page.goto(f"{live_server.url}/submissions/{norm.pk}/")
    page.wait_for_selector("#roofline-chart .main-svg")
    assert page.locator("#roofline-chart .main-svg").count() >= 1
    assert page.locator("#roofline-chart .scatterlayer .trace").count() >= 2
    page.screenshot(path=str(tmp_path / "submission.png"), full_page=True)


def test_ticking_two_board_rows_compares_them_with_a_table_and_a_chart(
    close_other_db_sessions_at_the_end, page, live_server, catalogue, user
):
    slow = publish_row(owner=user, suite=catalogue, title="slow", fraction=0.2)
    fast = publish_row(
        owner=user,
        suite=catalogue,
        title="fast",
        fraction={"rms_norm": 0.4, "silu_and_mul": 0.2, "fused_add_rms_norm": 0.3},
        status={"silu_and_mul": "incorrect"},
    )
    page.goto(
        f"{live_server.url}/?suite=atrex-bench-v0.1&hardware=cpu-dev&view=all"
    )  # one owner: every row
    for submission in (slow, fast):
        page.locator(f"tr[data-submission='{submission.pk}'] input.compare-pick").check()
    page.locator("#compare-pick button").click()
    page.wait_for_url("**/compare/?submissions=*")
    assert page.locator("#compare-submissions tbody tr").count() == 2
    rms = page.locator("#compare-operators tbody tr").filter(
        has=page.get_by_role("link", name="rms_norm", exact=True)
    )
    # The boxes are sent in board order: fast (ranked first) is the reference.
    assert "-20.0 pt" in rms.inner_text()
    page.wait_for_selector("#speedup-chart .main-svg")
    assert page.locator("#speedup-chart .barlayer .trace").count() == 1
    page.locator("#changed-only").click()
    page.wait_for_url("**changed=1*")
    assert page.locator("#compare-shapes tbody[id^=shapes-]").count() == 1
    # On a phone each compared submission is one block, its figures named, all on screen.
    page.set_viewport_size({"width": 390, "height": 844})
    page.reload()
    first = page.locator("#compare-submissions tbody tr").first
    labels = before_labels(first.locator("td"))
    assert labels[:3] == ['"owner "', '"status "', '"aggregate "'], labels
    assert_within_width(first.locator("th, td"), 390)


def test_submission_page_filters_shapes_in_place_and_leads_with_the_score_on_a_phone(
    close_other_db_sessions_at_the_end, page, live_server, catalogue, user, tmp_path
):
    row = publish_row(
        owner=user, suite=catalogue, title="wrong norms", status={"rms_norm": "incorrect"}
    )
    page.goto(f"{live_server.url}/submissions/{row.pk}/")
    assert page.locator("#operator-table tr[data-operator=rms_norm] .status").inner_text() == (
        "incorrect"
    )
    assert not page.locator("#shapes-rms_norm").evaluate("d => d.open")  # folded at first
    page.evaluate("window.notReloaded = true")
    page.locator("#status-filter a[data-filter=incorrect]").click()
    assert page.evaluate("window.notReloaded") and "status=incorrect" in page.url
    assert page.locator("#shapes-rms_norm").evaluate("d => d.open")
    assert page.locator("#shape-table tbody tr:visible").count() == 3
    assert page.locator("#shapes-silu_and_mul").is_hidden()
    page.screenshot(path=str(tmp_path / "submission-filtered.png"), full_page=True)
    page.locator("#status-filter a[data-filter='']").click()
    assert page.locator("#shapes-silu_and_mul").is_visible() and "status=" not in page.url

    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(f"{live_server.url}/submissions/{row.pk}/")
    assert page.evaluate("window.scrollY") == 0
    score = page.locator("#headline-score").bounding_box()
    assert score is not None and 0 <= score["y"] and score["y"] + score["height"] <= 844
    assert page.evaluate("document.documentElement.scrollWidth") <= 390  # no sideways page
    page.screenshot(path=str(tmp_path / "submission-phone.png"))


def _assert_interval_inside_its_cell(page) -> None:
    """The tiny row's 95% interval lies within its score cell (it breaks after its comma
    where the column is too narrow), not over the next column or off the screen."""
    cell = page.locator("#ranked tr[data-submission]", has_text="tiny").locator("td.col-score")
    assert cell.locator(".ci").inner_text().replace("\n", " ").startswith("[0.00")
    box = cell.bounding_box()
    for part in cell.locator(".ci span").all():
        inner = part.bounding_box()
        assert box["x"] <= inner["x"] and inner["x"] + inner["width"] <= box["x"] + box["width"], (
            box,
            inner,
            page.viewport_size,
        )


def _rect(page, selector: str) -> dict:
    return page.eval_on_selector(
        selector,
        "e => { const r = e.getBoundingClientRect();"
        " return {left: r.left, right: r.right, width: r.width}; }",
    )


def test_rank_name_and_score_stay_in_place_when_scrolling_and_lead_on_a_phone(
    close_other_db_sessions_at_the_end, page, live_server, catalogue, tmp_path
):
    for title, fraction in (("first", 0.9), ("second", 0.2)):
        publish_row(owner=UserFactory(), suite=catalogue, title=title, fraction=fraction)
    # A score of a hundred-thousandth of the roofline, with its interval: the longest
    # figures the score column shows.
    publish_row(owner=UserFactory(), suite=catalogue, title="tiny", fraction=1.08e-5, spread=0.05)
    page.set_viewport_size({"width": 900, "height": 800})
    page.goto(f"{live_server.url}/?suite=atrex-bench-v0.1&hardware=cpu-dev")
    _assert_interval_inside_its_cell(page)
    row = "#ranked tr[data-submission]:first-child"
    sticky = [f"{row} > td.col-rank", f"{row} > th.col-name", f"{row} > td.col-score"]
    moving = f"{row} > td:nth-child(4)"  # Real pass
    before = [_rect(page, cell) for cell in sticky]
    moving_before = _rect(page, moving)
    scrolled = page.eval_on_selector(
        "#board-scroll", "e => { e.scrollLeft = e.scrollWidth; return e.scrollLeft; }"
    )
    assert scrolled > 100, "the table should be wider than a 900 px window"
    page.wait_for_function(
        "x => document.querySelector('#board-scroll').scrollLeft === x", arg=scrolled
    )
    after = [_rect(page, cell) for cell in sticky]
    assert after == before  # held in place, and so still on screen
    assert all(rect["left"] >= 0 and rect["right"] <= 900 for rect in after)
    assert _rect(page, moving)["left"] == pytest.approx(moving_before["left"] - scrolled, abs=1)

    page.set_viewport_size({"width": 390, "height": 800})
    page.goto(f"{live_server.url}/?suite=atrex-bench-v0.1&hardware=cpu-dev")
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    phone = [_rect(page, cell) for cell in sticky]
    assert all(rect["width"] > 0 and 0 <= rect["left"] and rect["right"] <= 390 for rect in phone)
    assert _rect(page, moving)["width"] == 0  # the other columns wait for a wider screen
    # The table leads: it starts above the filters.
    assert _rect(page, "#board")["left"] >= 0
    table_top = page.eval_on_selector("#board", "e => e.getBoundingClientRect().top")
    filters_top = page.eval_on_selector("#board-filters", "e => e.getBoundingClientRect().top")
    assert table_top < filters_top
    assert page.locator(f"{row} > td.col-rank").inner_text() == "1"
    assert page.locator(f"{row} > td.col-score").inner_text().startswith("90")
    _assert_interval_inside_its_cell(page)
    page.screenshot(path=str(tmp_path / "board-390.png"), full_page=True)
