"""One ranking everywhere: the board page, /api/leaderboard/, the CSV and JSON downloads and
``atrex board`` show the same rows and ranks (one selector, ``leaderboard.selectors.board``),
baselines listed unranked, each submitter's best by default and every submission with
``view=all``; ties by the board's noise floor; the operator layouts, the absolute heat map
and empty boards. Django's test client only (the CLI's table is fed the API's answer)."""

from __future__ import annotations

import csv
import io
import re

import pytest
from django.urls import reverse

from atrex_cli.main import board_table
from leaderboard.templatetags.figures import percent
from submissions.models import Submission
from tests.factories import UserFactory
from tests.leaderboard.results_factory import publish_row

pytestmark = pytest.mark.django_db

H200 = {"suite": "atrex-bench-v0.1", "hardware": "h200-sxm"}


def _publish(owner, title: str, fraction, **options) -> Submission:
    return publish_row(
        owner=owner,
        suite=options.pop("suite"),
        hardware_slug=options.pop("hardware_slug", "h200-sxm"),
        title=title,
        fraction=fraction,
        **options,
    )


@pytest.fixture
def contest(catalogue):
    """The issue's board: a researcher with two submissions, a new user with one, the
    examples account's two baselines (one above the new user, one at the bottom)."""
    alice, newcomer, examples = UserFactory(), UserFactory(), UserFactory(username="examples")
    rows = {
        "alice old": _publish(alice, "alice old", 0.30, suite=catalogue),
        "alice best": _publish(alice, "alice best", 0.60, suite=catalogue),
        "triton": _publish(examples, "Triton baseline", 0.50, suite=catalogue, is_baseline=True),
        "newcomer": _publish(newcomer, "newcomer", 0.40, suite=catalogue),
        "eager": _publish(examples, "eager", 0.01, suite=catalogue, is_baseline=True),
    }
    return {name: submission.pk for name, submission in rows.items()}


def _page_ranks(client, **params) -> list[tuple[int, str]]:
    html = client.get(reverse("leaderboard:board"), {**H200, **params}).content.decode()
    body = html.split('id="ranked"', 1)[1]
    rows = re.findall(
        r'<tr data-submission="(\d+)"[^>]*>\s*<td class="col-rank">(.*?)</td>', body, re.S
    )
    return [(int(pk), re.sub(r"<[^>]+>", "", rank).strip().replace("–", "")) for pk, rank in rows]


def _label(rank, tied) -> str:
    if rank in (None, ""):
        return ""
    return f"={rank}" if str(tied) in ("True", "true") else str(rank)


def _api_ranks(client, **params) -> list[tuple[int, str]]:
    body = client.get("/api/leaderboard/", {**H200, **params}).json()
    return [(row["submission"], _label(row["rank"], row["tied"])) for row in body["results"]]


def _csv_ranks(client, **params) -> list[tuple[int, str]]:
    response = client.get(reverse("leaderboard:board-download", args=["csv"]), {**H200, **params})
    records = csv.DictReader(io.StringIO(response.content.decode()))
    return [(int(r["submission"]), _label(r["rank"], r["tied"])) for r in records]


def _json_ranks(client, **params) -> list[tuple[int, str]]:
    response = client.get(reverse("leaderboard:board-download", args=["json"]), {**H200, **params})
    return [(r["submission"], _label(r["rank"], r["tied"])) for r in response.json()["results"]]


def _cli_ranks(client, **params) -> list[tuple[int, str]]:
    table = board_table(client.get("/api/leaderboard/", {**H200, **params}).json())
    rows = [line.split() for line in table.splitlines()[2:]]
    return [(int(row[1]), "" if row[0] == "base" else row[0]) for row in rows]


@pytest.mark.parametrize("view", ["", "best", "all"])
def test_page_api_downloads_and_cli_show_the_same_ranks(client, contest, view):
    params = {"view": view} if view else {}
    expected = [
        (contest["alice best"], "1"),
        (contest["triton"], ""),  # a baseline: at its score's place, never ranked
        (contest["newcomer"], "2"),
        *([(contest["alice old"], "3")] if view == "all" else []),
        (contest["eager"], ""),
    ]
    assert _page_ranks(client, **params) == expected
    assert _api_ranks(client, **params) == expected
    assert _csv_ranks(client, **params) == expected
    assert _json_ranks(client, **params) == expected
    assert _cli_ranks(client, **params) == expected


def test_a_submitters_best_is_their_highest_score_whatever_the_sort(client, contest):
    by_date = _page_ranks(client, sort="-date")
    # Newest first, but alice is still shown by her best row, with its rank.
    assert (contest["alice best"], "1") in by_date and contest["alice old"] not in dict(by_date)
    links = client.get(reverse("leaderboard:board"), H200).content.decode()
    assert re.search(r'<a href="\?[^"]*view=all"[^>]*>all submissions</a>', links)


def test_rows_within_the_noise_floor_tie_on_a_cpu_board_and_not_on_a_gpu_one(client, catalogue):
    # The same two results, 40 % apart with intervals that do not overlap.
    for hardware_slug in ("cpu-dev", "h200-sxm"):
        for title, fraction in (("run 1", 0.50), ("run 2", 0.30)):
            _publish(UserFactory(), title, fraction, suite=catalogue, hardware_slug=hardware_slug)
    cpu = _page_ranks(client, hardware="cpu-dev")
    assert [rank for _, rank in cpu] == ["=1", "=1"]
    assert [rank for _, rank in _page_ranks(client)] == ["1", "2"]
    page = client.get(reverse("leaderboard:board"), H200).content.decode()
    assert "50% for CPU profiles" not in page and "1% for CUDA profiles" in page


def test_repeated_runs_of_one_bundle_widen_the_noise_floor(client, catalogue):
    # Two runs of one bundle (same upload digest) on the GPU board, 10 % apart, and two
    # other submitters 5 % apart: a tie once the repeats have shown the board's noise.
    first = _publish(UserFactory(), "bundle, run 1", 0.40, suite=catalogue)
    second = _publish(UserFactory(), "bundle, run 2", 0.36, suite=catalogue)
    _publish(UserFactory(), "a", 0.20, suite=catalogue)
    _publish(UserFactory(), "b", 0.19, suite=catalogue)
    assert [rank for _, rank in _api_ranks(client)] == ["1", "2", "3", "4"]
    Submission.objects.filter(pk__in=[first.pk, second.pk]).update(upload_sha256="ab" * 32)
    body = client.get("/api/leaderboard/", H200).json()
    assert body["noise_floor"] == pytest.approx(0.1)
    assert [_label(r["rank"], r["tied"]) for r in body["results"]] == ["=1", "=1", "=3", "=3"]
    page = client.get(reverse("leaderboard:board"), H200).content.decode()
    assert "1 bundle run more than once on this board differ by up to 10%" in page


def _op_headers(html: str) -> list[str]:
    head = html.split("<thead>", 1)[1].split("</thead>", 1)[0]
    return re.findall(r'data-sort="op:([a-z_0-9]+)"', head)


def test_operator_columns_order_by_results_or_weight_group_and_collapse(client, catalogue):
    # silu_and_mul (the second most important of v0.1) has no result above 0.
    _publish(
        UserFactory(),
        "norms only",
        {"rms_norm": 0.5, "fused_add_rms_norm": 0.2, "silu_and_mul": 0.5},
        suite=catalogue,
        status={"silu_and_mul": "missing"},
    )
    by_weight = [op["slug"] for op in sorted(catalogue.definition["operators"],
                                             key=lambda op: -op["importance"])]  # fmt: skip
    weight_html = client.get(reverse("leaderboard:board"), {**H200, "ops": "weight"})
    assert _op_headers(weight_html.content.decode()) == by_weight
    default = client.get(reverse("leaderboard:board"), H200).content.decode()
    assert _op_headers(default) == [slug for slug in by_weight if slug != "silu_and_mul"] + [
        "silu_and_mul"
    ]
    assert re.search(
        r'<th scope="col" class="num op no-results"[^>]*title="[^"]*no result', default
    )
    assert "1 operator without a result above 0 on this board is shown last" in default

    grouped = client.get(reverse("leaderboard:board"), {**H200, "ops": "group"}).content.decode()
    families = re.findall(
        r'<th scope="colgroup" colspan="(\d)" class="family">([^<]+)</th>', grouped
    )
    assert families == [("2", "Norms"), ("1", "Activation &amp; sampling")]
    assert _op_headers(grouped) == ["rms_norm", "fused_add_rms_norm", "silu_and_mul"]

    compact = client.get(reverse("leaderboard:board"), {**H200, "ops": "compact"})
    html = compact.content.decode()
    assert _op_headers(html) == []
    assert re.findall(r'data-family="([a-z-]+)"', html) == ["norms", "activation-sampling"]
    importance = {op["slug"]: op["importance"] for op in catalogue.definition["operators"]}
    norms = (0.5 * importance["rms_norm"] + 0.2 * importance["fused_add_rms_norm"]) / (
        importance["rms_norm"] + importance["fused_add_rms_norm"]
    )
    cells = re.findall(r'class="num op heat[^"]*" style="[^"]*">([^<]*)<', html)
    assert cells == [percent(norms), percent(0.0)]
    # An unknown layout falls back to the default.
    fallback = client.get(reverse("leaderboard:board"), {**H200, "ops": "x"}).content.decode()
    assert _op_headers(fallback) == _op_headers(default)


def test_an_empty_board_says_so_and_is_marked_in_the_pickers(client, catalogue):
    _publish(UserFactory(), "on the H200", 0.4, suite=catalogue)
    html = client.get(reverse("leaderboard:board"), {**H200, "hardware": "h100-sxm"}).content
    html = html.decode()
    assert (
        'id="empty-board"' in html and "This board is empty." in html and 'id="board"' not in html
    )
    assert 'href="?suite=atrex-bench-v0.1&amp;hardware=h200-sxm"' in html  # where results are
    picker = html.split('id="pick-hardware"', 1)[1].split("</select>", 1)[0]
    options = dict(re.findall(r'<option value="([a-z0-9-]+)"[^>]*>([^<]+)</option>', picker))
    assert options["h100-sxm"].endswith("(no results)") and options["h20"].endswith("(no results)")
    assert options["h200-sxm"] == "NVIDIA H200 SXM"
    assert re.search(r'<option value="h100-sxm" selected data-empty="true">', picker)
    suites = html.split('id="pick-suite"', 1)[1].split("</select>", 1)[0]
    assert "(no results)" in suites  # v0.1 has no row on the H100 either
    full = client.get(reverse("leaderboard:board"), H200).content.decode()
    assert 'id="board"' in full and 'id="empty-board"' not in full
