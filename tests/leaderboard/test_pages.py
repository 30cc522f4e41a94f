"""The public pages: the board (ranking, ties, baselines, sorting, filters, heat map, one
query for the rows), downloads, the submission page's charts, operator and history pages."""

from __future__ import annotations

import csv
import io
import json
import re
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from leaderboard.templatetags.figures import contrast_ratio, heat_colours, percent
from submissions.models import Score, Submission
from tests.factories import UserFactory
from tests.leaderboard.results_factory import publish_row

pytestmark = pytest.mark.django_db

CPU = {"suite": "atrex-bench-v0.1", "hardware": "cpu-dev"}


def _board(client, **params) -> str:
    response = client.get(reverse("leaderboard:board"), {**CPU, **params})
    assert response.status_code == 200
    return response.content.decode()


def _ranked_titles(html: str) -> list[str]:
    ranked = html.split('id="ranked"', 1)[1]
    return re.findall(r'<a href="/submissions/\d+/">([^<]+)</a>', ranked)


def _ranks(html: str) -> list[str]:
    ranked = html.split('id="ranked"', 1)[1]
    cells = re.findall(r'<td class="col-rank">(.*?)</td>', ranked, flags=re.S)
    return [re.sub(r"<[^>]+>", "", cell).strip() for cell in cells]


@pytest.fixture
def board_rows(catalogue, user):
    """Three ranked rows of three submitters (one Triton agent, two bundles) and a
    baseline, on the CPU board (noise floor 50 %: fast and middle tie)."""
    fast = publish_row(
        owner=user,
        suite=catalogue,
        title="fast",
        dsl="triton",
        fraction={"rms_norm": 0.2, "silu_and_mul": 0.9, "fused_add_rms_norm": 0.9},
    )
    Submission.objects.filter(pk=fast.pk).update(kind=Submission.Kind.AGENT)
    middle = publish_row(
        owner=UserFactory(),
        suite=catalogue,
        title="middle",
        dsl="cuda",
        fraction={"rms_norm": 0.8, "silu_and_mul": 0.3, "fused_add_rms_norm": 0.3},
    )
    slow = publish_row(
        owner=UserFactory(), suite=catalogue, title="slow", dsl="triton", fraction=0.05
    )
    base = publish_row(
        owner=user, suite=catalogue, title="eager", dsl="", fraction=0.01, is_baseline=True
    )
    return {"fast": fast, "middle": middle, "slow": slow, "base": base}


def test_board_ranks_submissions_and_lists_baselines_unranked_at_their_place(client, board_rows):
    html = _board(client)
    assert _ranked_titles(html) == ["fast", "middle", "slow", "eager"]
    # fast and middle are within the CPU board's 50 % noise floor of each other.
    assert _ranks(html) == ["=1", "=1", "3", "–"]
    assert f'<tr data-submission="{board_rows["base"].pk}" class="baseline">' in html
    assert 'title="baseline: not ranked"' in html


def test_sorting_by_a_column_is_done_by_the_server(client, board_rows):
    by_rms = _board(client, sort="-op:rms_norm")
    assert _ranked_titles(by_rms) == ["middle", "fast", "slow", "eager"]
    # The rank stays the score's rank whatever the display order.
    assert _ranks(by_rms) == ["=1", "=1", "3", "–"]
    assert re.search(
        r'aria-sort="descending"[^>]*><a class="sort" href="[^"]*sort=op%3Arms_norm', by_rms
    )
    ascending = _board(client, sort="aggregate")
    assert _ranked_titles(ascending) == ["eager", "slow", "middle", "fast"]
    assert 'aria-sort="ascending"' in ascending
    by_title = _board(client, sort="submission")
    assert _ranked_titles(by_title) == ["eager", "fast", "middle", "slow"]
    # An unknown key falls back to the ranking order instead of failing.
    ranking = ["fast", "middle", "slow", "eager"]
    assert _ranked_titles(_board(client, sort="-op:nope")) == ranking
    assert _ranked_titles(_board(client, sort="password")) == ranking


def test_filters_narrow_the_board(client, board_rows):
    assert _ranked_titles(_board(client, dsl="triton")) == ["fast", "slow"]
    assert _ranked_titles(_board(client, kind="agent")) == ["fast"]
    old = timezone.now() - timedelta(days=40)
    Score.objects.filter(submission=board_rows["middle"]).update(published_at=old)
    since = (timezone.now() - timedelta(days=7)).date().isoformat()
    assert _ranked_titles(_board(client, **{"from": since})) == ["fast", "slow", "eager"]
    until = (timezone.now() - timedelta(days=30)).date().isoformat()
    assert _ranked_titles(_board(client, to=until)) == ["middle"]
    assert _ranked_titles(_board(client, **{"from": "not-a-date"})) == [
        "fast",
        "middle",
        "slow",
        "eager",
    ]


def test_rows_whose_intervals_overlap_share_a_rank(client, catalogue, user):
    # On a GPU board (noise floor 1 %): 0.50 and 0.45 are apart by more than the floor but
    # their intervals (20 % timing spread) overlap.
    for title, fraction, spread in (("a", 0.50, 0.2), ("b", 0.45, 0.2), ("c", 0.10, 0.01)):
        publish_row(
            owner=UserFactory(),
            suite=catalogue,
            hardware_slug="h200-sxm",
            title=title,
            fraction=fraction,
            spread=spread,
        )
    html = _board(client, hardware="h200-sxm")
    assert _ranked_titles(html) == ["a", "b", "c"]
    assert _ranks(html) == ["=1", "=1", "3"]


def test_hidden_private_and_unpublished_rows_are_not_on_the_board(
    client, board_rows, catalogue, user
):
    Submission.objects.filter(pk=board_rows["slow"].pk).update(hidden=True)
    Submission.objects.filter(pk=board_rows["middle"].pk).update(visibility="private")
    held = publish_row(owner=user, suite=catalogue, title="held", fraction=3.0)
    assert held.status == Submission.Status.HELD_FOR_REVIEW
    assert _ranked_titles(_board(client, view="all")) == ["fast", "eager"]


# suite, hardware, operators, the narrow rank keys (each submitter's best picked in the
# same query), the board's noise floor, the page's full rows, which operator columns have
# results, DSL choices, the suite and hardware pickers (each with its board's row count):
# the count does not grow with the rows (no per-row owner or submission query).
QUERIES = 10


def _row_queries(captured) -> list[str]:
    return [
        q["sql"]
        for q in captured.captured_queries
        if q["sql"].startswith('SELECT "leaderboard_score"."id"')
    ]


def test_board_rows_come_from_one_query(
    client, board_rows, catalogue, user, django_assert_max_num_queries
):
    for index in range(4):
        publish_row(owner=UserFactory(), suite=catalogue, title=f"extra {index}", fraction=0.02)
    with django_assert_max_num_queries(QUERIES) as captured:
        html = _board(client, view="all")
    full = [sql for sql in _row_queries(captured) if '"operator_scores"' in sql]
    assert len(full) == 1 and '"auth_user"' in full[0]
    narrow = [sql for sql in _row_queries(captured) if sql not in full]
    assert len(narrow) == 1 and '"auth_user"' not in narrow[0]
    assert len(_ranked_titles(html)) == 8


@pytest.fixture
def long_board(catalogue, user):
    """One submitter's 120 rows "row 000" (best) to "row 119", each 3 % below the one above
    (more than the GPU board's 1 % noise floor), and one baseline below them all, on the
    H200 board; rows 049 and 050 (ranks 50 and 51, either side of the first page break)
    have overlapping intervals."""
    first = publish_row(
        owner=user, suite=catalogue, hardware_slug="h200-sxm", title="row 000", fraction=0.9
    )
    template = Score.objects.get(submission=first)
    now = timezone.now()
    for index in range(120):
        if index:
            submission = Submission.objects.get(pk=first.pk)
            submission.pk = submission.id = None
            submission.title = f"row {index:03d}"
            submission.save()
            score = Score.objects.get(pk=template.pk)
            score.pk = score.id = None
            score.submission = submission
        else:
            score = template
        score.aggregate = 0.9 * 0.97**index
        tied = index in (49, 50)
        score.aggregate_ci_low = score.aggregate * 0.98 if tied else None
        score.aggregate_ci_high = score.aggregate * 1.02 if tied else None
        score.published_at = now - timedelta(minutes=index)
        score.save()
    publish_row(
        owner=user,
        suite=catalogue,
        hardware_slug="h200-sxm",
        title="eager",
        fraction=0.01,
        is_baseline=True,
    )


LONG = {"hardware": "h200-sxm", "view": "all"}


def _expected_rank(index: int) -> str:
    return "=50" if index in (49, 50) else str(index + 1)


def test_board_is_paginated_with_ranks_over_the_whole_board(client, long_board):
    first = _board(client, **LONG)
    assert _ranked_titles(first) == [f"row {i:03d}" for i in range(50)]
    assert _ranks(first) == [_expected_rank(i) for i in range(50)]
    second = _board(client, page=2, **LONG)
    assert _ranked_titles(second) == [f"row {i:03d}" for i in range(50, 100)]
    assert _ranks(second) == [_expected_rank(i) for i in range(50, 100)]
    assert "Rows 51–100 of 121 (page 2 of 3)" in second
    third = _board(client, page=3, **LONG)
    # The baseline is listed at its score's place (last here), unranked.
    assert _ranked_titles(third) == [f"row {i:03d}" for i in range(100, 120)] + ["eager"]
    assert _ranks(third)[-2:] == ["120", "–"]
    assert _ranked_titles(_board(client, page=99, **LONG)) == _ranked_titles(third)
    assert _ranked_titles(_board(client, page="x", **LONG)) == _ranked_titles(first)
    # Each submitter's best (the default): the one submitter's best row and the baseline.
    best = _board(client, hardware="h200-sxm")
    assert _ranked_titles(best) == ["row 000", "eager"] and _ranks(best) == ["1", "–"]


def test_pages_follow_the_sort_and_links_keep_sort_and_filters(client, long_board):
    # Oldest first: row 119 is the oldest, so page 2 holds rows 069 down to 020.
    html = _board(client, sort="date", dsl="triton", page=2, **LONG)
    assert _ranked_titles(html) == [f"row {i:03d}" for i in range(69, 19, -1)]
    assert _ranks(html)[0] == "70"  # the rank stays the score's rank, whatever the sort
    nav = html.split('id="board-pages"', 1)[1].split("</nav>", 1)[0]
    links = [link.replace("&amp;", "&") for link in re.findall(r'href="([^"]+)"', nav)]
    assert any("page=3" in link for link in links) and any("page=1" in link for link in links)
    for link in links:
        assert "sort=date" in link and "dsl=triton" in link and "suite=atrex-bench-v0.1" in link
        assert "view=all" in link
    # A new sort starts on page 1; the downloads are the complete board.
    head = html.split("<thead>", 1)[1].split("</thead>", 1)[0]
    assert "page=" not in head and "dsl=triton" in head
    download = re.search(r'id="download-csv"', html) and re.search(
        r'href="([^"]+\.csv[^"]*)"', html
    )
    assert "page=" not in download.group(1)
    response = client.get(download.group(1).replace("&amp;", "&"))
    assert len(list(csv.DictReader(io.StringIO(response.content.decode())))) == 121


def test_board_page_queries_stay_constant_with_120_rows(
    client, long_board, django_assert_max_num_queries
):
    for page in (1, 3):
        with django_assert_max_num_queries(QUERIES) as captured:
            _board(client, page=page, sort="-op:rms_norm", **LONG)
        full = [sql for sql in _row_queries(captured) if '"auth_user"' in sql]
        assert len(full) == 1 and len(_row_queries(captured)) == 2


def test_submission_page_comparison_reads_only_the_best_row_and_the_compile_times(
    client, long_board, django_assert_max_num_queries
):
    # row 000 is the one with a run (the others are copies of its Score row).
    middle = Submission.objects.get(title="row 000")
    with django_assert_max_num_queries(13) as captured:
        html = client.get(reverse("submissions:detail", args=[middle.pk])).content.decode()
    board_reads = [
        q["sql"]
        for q in captured.captured_queries
        if "operator_scores" in q["sql"] and "ORDER BY" in q["sql"]
    ]
    assert len(board_reads) == 1 and "LIMIT 1" in board_reads[0]
    bars = _figure(html, "comparison")
    # No torch.compile baseline on this board: measured against the best row.
    assert [t["name"] for t in bars["data"]] == ["this submission"]
    assert bars["layout"]["xaxis"]["title"]["text"] == (
        "speed-up over the best on the board (row 001)"
    )


def _figure(html: str, name: str) -> dict:
    return json.loads(
        re.search(
            rf'<script id="{name}-figure" type="application/json">(.*?)</script>', html, re.S
        ).group(1)
    )


def test_submission_page_compares_speed_with_torch_compile_not_bars_of_zero(
    client, catalogue, board_rows
):
    compiled = publish_row(
        owner=board_rows["base"].owner,
        suite=catalogue,
        title="torch.compile",
        fraction=0.1,
        status="fallback",
        is_baseline=True,
    )
    Submission.objects.filter(pk=compiled.pk).update(manifest={"baseline": "torch.compile"})
    html = client.get(
        reverse("submissions:detail", args=[board_rows["middle"].pk])
    ).content.decode()
    bars = _figure(html, "comparison")
    traces = {trace["name"]: trace for trace in bars["data"]}
    assert set(traces) == {"this submission", "best on the board: fast"}
    this = dict(zip(traces["this submission"]["y"], traces["this submission"]["x"], strict=True))
    # middle's rms_norm reaches 0.8 of the roofline, torch.compile's 0.1: 8x faster.
    assert this["rms_norm"] == pytest.approx(8.0)
    assert bars["layout"]["xaxis"]["title"]["text"] == "speed-up over torch.compile"
    assert all(trace["orientation"] == "h" for trace in bars["data"])


def test_heat_map_shades_cells_on_the_absolute_roofline_scale_with_a_legend(client, board_rows):
    html = _board(client)
    cells = re.findall(r'class="num op heat" style="([^"]*)">([^<]*)<', html)
    shades = {value: style for style, value in cells}

    def shade(share: float) -> str:
        background, text = heat_colours(share, 1.0)
        return f"background-color:{background};color:{text}"

    # 90 % is the best of its column, yet not the 100 % end of the scale; 5 % (the best
    # of nothing) is nearly white, however the column's best compares.
    assert shades[percent(0.9)] == shade(0.9) and "#0b3d7a" not in shades[percent(0.9)]
    assert shades[percent(0.05)] == shade(0.05)
    legend = html.split('id="heat-legend"', 1)[1].split("</div>", 1)[0]
    assert re.findall(r">([^<]+)</li>", legend) == ["0%", "25%", "50%", "75%", "100%"]
    assert shade(1.0) in legend


@pytest.mark.parametrize("share", [i / 20 for i in range(21)])
def test_heat_map_text_keeps_aa_contrast(share):
    background, text = heat_colours(share, 1.0)

    def rgb(hex_colour: str) -> tuple[int, int, int]:
        return tuple(int(hex_colour[i : i + 2], 16) for i in (1, 3, 5))

    assert contrast_ratio(rgb(background), rgb(text)) >= 4.5


def test_board_downloads_parse_and_follow_the_page(client, board_rows):
    response = client.get(reverse("leaderboard:board-download", args=["csv"]), CPU)
    assert response.status_code == 200 and "attachment" in response["Content-Disposition"]
    records = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert [r["title"] for r in records] == ["fast", "middle", "slow", "eager"]
    assert [(r["rank"], r["tied"]) for r in records] == [
        ("1", "True"),
        ("1", "True"),
        ("3", "False"),
        ("", "False"),
    ]
    assert float(records[0]["op:silu_and_mul (roofline fraction 0-1)"]) == pytest.approx(0.9)
    data = client.get(
        reverse("leaderboard:board-download", args=["json"]), {**CPU, "sort": "-op:rms_norm"}
    ).json()
    assert [r["title"] for r in data["results"]] == ["middle", "fast", "slow", "eager"]
    assert data["results"][0]["operator_scores"]["rms_norm"] == pytest.approx(0.8)
    assert data["view"] == "best" and data["noise_floor"] == pytest.approx(0.5)
    assert client.get(reverse("leaderboard:board-download", args=["xml"]), CPU).status_code == 404


def test_private_results_download_only_for_owner_and_staff(client, catalogue, user):
    row = publish_row(owner=user, suite=catalogue, title="secret", fraction=0.3)
    Submission.objects.filter(pk=row.pk).update(visibility="private")
    url = reverse("submissions:results-download", args=[row.pk, "csv"])
    assert client.get(url).status_code == 404
    client.force_login(UserFactory())
    assert client.get(url).status_code == 404
    client.force_login(user)
    records = list(csv.DictReader(io.StringIO(client.get(url).content.decode())))
    assert len(records) == 9 and {r["status"] for r in records} == {"pass"}
    client.force_login(UserFactory(is_staff=True))
    data = client.get(reverse("submissions:results-download", args=[row.pk, "json"])).json()
    assert data["submission"] == row.pk and len(data["shapes"]) == 9
    assert data["scores"]["aggregate"] == pytest.approx(0.3)


def test_suite_definition_download_leaves_hidden_shapes_out_for_the_public(client, catalogue):
    definition = dict(catalogue.definition)
    definition["shapes"] = [dict(s) for s in definition["shapes"]]
    definition["shapes"][0]["visibility"] = "hidden"
    type(catalogue).objects.filter(pk=catalogue.pk).update(definition=definition)
    url = reverse("leaderboard:suite-definition", args=[catalogue.slug])
    public = json.loads(client.get(url).content)
    assert len(public["shapes"]) == len(definition["shapes"]) - 1
    assert public["hidden_shapes_left_out"] == 1
    client.force_login(UserFactory(is_staff=True))
    assert len(json.loads(client.get(url).content)["shapes"]) == len(definition["shapes"])


def test_submission_page_embeds_the_roofline_and_comparison_figures(client, board_rows):
    response = client.get(reverse("submissions:detail", args=[board_rows["middle"].pk]))
    html = response.content.decode()
    figure = json.loads(
        re.search(
            r'<script id="roofline-figure" type="application/json">(.*?)</script>', html, re.S
        ).group(1)
    )
    names = [trace["name"] for trace in figure["data"]]
    assert any(name.startswith("roofline:") for name in names) and "pass" in names
    assert figure["layout"]["xaxis"]["type"] == "log" and figure["layout"]["yaxis"]["type"] == "log"
    bars = _figure(html, "comparison")
    assert [t["name"] for t in bars["data"]] == ["this submission"]
    assert "/vendor/plotly.min.js" in html
    assert 'id="shape-table"' in html  # the figures stay readable without JavaScript


def test_plotly_is_served_from_the_installed_package(client):
    response = client.get(reverse("leaderboard:plotly-js"))
    assert response.status_code == 200 and response["Content-Type"] == "text/javascript"
    assert b"plotly" in b"".join(response.streaming_content)[:2000].lower()


def test_operator_page_lists_shapes_best_results_and_the_distribution(client, board_rows):
    response = client.get(reverse("leaderboard:operator", args=["silu_and_mul"]), CPU)
    assert response.status_code == 200
    html = response.content.decode()
    shape_rows = html.split('id="shape-table"', 1)[1].split("</table>", 1)[0]
    assert shape_rows.count('<th scope="row">smoke-') == 3
    assert ">fast</a>" in shape_rows  # best passing result per shape
    assert 'id="distribution-figure"' in html
    assert client.get(reverse("leaderboard:operator", args=["nope"]), CPU).status_code == 404


def test_history_shows_each_new_best(client, board_rows):
    Score.objects.filter(submission=board_rows["slow"]).update(
        published_at=timezone.now() - timedelta(days=3)
    )
    response = client.get(reverse("leaderboard:history"), CPU)
    html = response.content.decode()
    table = html.split('id="history-table"', 1)[1]
    assert re.findall(r'">([^<]+)</a></th>', table) == ["slow", "fast"]
    assert 'id="history-figure"' in html


def test_history_of_a_board_of_baselines_draws_them_and_an_empty_board_says_so(
    client, catalogue, user
):
    # The demo's boards hold baselines only: their history is not empty.
    publish_row(owner=user, suite=catalogue, title="eager", fraction=0.01, is_baseline=True)
    html = client.get(reverse("leaderboard:history"), CPU).content.decode()
    figure = _figure(html, "history")
    assert [trace["name"] for trace in figure["data"]] == ["baseline: eager"]
    assert '>eager</a> <span class="tag">baseline</span>' in html
    html = client.get(
        reverse("leaderboard:history"), {"suite": "atrex-bench-v0.1", "hardware": "h200-sxm"}
    ).content.decode()
    assert 'id="history-empty"' in html and "No history yet" in html
    assert 'id="history-chart"' not in html and "plotly" not in html


def test_operator_page_gives_t_sol_on_the_chosen_gpu(client, catalogue):
    from evaluator.hardware import get_profile
    from evaluator.roofline import t_sol_seconds

    response = client.get(
        reverse("leaderboard:operator", args=["rms_norm"]),
        {"suite": catalogue.slug, "hardware": "h200-sxm"},
    )
    assert response.status_code == 200
    rows = response.context["shapes"]
    shapes = [
        s
        for s in catalogue.definition["shapes"]
        if s["operator"] == "rms_norm" and not s.get("smoke")
    ]
    assert len(rows) == len(shapes) and not any(r["shape"].smoke for r in rows)
    first = shapes[0]
    expected = 1e3 * t_sol_seconds(
        w_flops=first["w_flops"],
        q_read=first["q_read"],
        q_write=first["q_write"],
        hardware=get_profile("h200-sxm"),
    )
    assert rows[0]["shape"].shape_id == first["shape_id"]
    assert rows[0]["t_sol_ms"] == pytest.approx(expected)
    assert "no ranked submission yet" in response.content.decode()
