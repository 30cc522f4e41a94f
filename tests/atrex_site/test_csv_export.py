"""Every CSV download is safe to open in a spreadsheet: user-chosen text that would start a
formula (``=HYPERLINK(...)``, ``+``, ``-``, ``@``, tab, carriage return) is written as text."""

from __future__ import annotations

import csv
import io

import pytest
from django.urls import reverse

from atrex_site.csv_export import header_with_units, spreadsheet_cell, write_rows
from submissions.models import ShapeResult, Submission
from tests.leaderboard.results_factory import publish_row

FORMULA = '=HYPERLINK("http://127.0.0.1/x","click")'


@pytest.mark.parametrize("text", [FORMULA, "+1+1", "-2+3", "@SUM(A1)", "\tx", "\rx"])
def test_text_that_would_start_a_formula_is_quoted(text):
    assert spreadsheet_cell(text) == "'" + text


@pytest.mark.parametrize("value", ["rms_norm", "a=b", "", None, -0.5, 3, 1e-9])
def test_plain_text_and_numbers_are_written_as_they_are(value):
    assert spreadsheet_cell(value) == value


def test_write_rows_quotes_every_cell_header_included():
    buffer = io.StringIO()
    write_rows(buffer, [["=head", "n"], ["@x", -1.5]])
    assert list(csv.reader(io.StringIO(buffer.getvalue()))) == [["'=head", "n"], ["'@x", "-1.5"]]


def test_the_header_gives_each_figure_its_unit():
    assert header_with_units(["title", "aggregate", "op:rms_norm", "time_ms", "speedup"]) == [
        "title",
        "aggregate (roofline fraction 0-1)",
        "op:rms_norm (roofline fraction 0-1)",
        "time_ms",  # the name carries its unit already
        "speedup (ratio)",
    ]


@pytest.mark.django_db
def test_board_and_results_downloads_neutralise_a_formula_title(client, catalogue, user):
    row = publish_row(owner=user, suite=catalogue, title=FORMULA, fraction=0.3)
    ShapeResult.objects.filter(run__submission=row).update(error="-1 is not a size")
    board = client.get(
        reverse("leaderboard:board-download", args=["csv"]),
        {"suite": "atrex-bench-v0.1", "hardware": "cpu-dev"},
    )
    records = list(csv.DictReader(io.StringIO(board.content.decode())))
    assert [r["title"] for r in records] == ["'" + FORMULA]
    # Full-precision fractions, with the unit in the header (pages show 30.0%).
    assert float(records[0]["aggregate (roofline fraction 0-1)"]) == pytest.approx(0.3)
    assert "real_pass_rate (share of shapes 0-1)" in records[0]
    Submission.objects.filter(pk=row.pk).update(visibility="public")
    client.force_login(user)
    results = client.get(reverse("submissions:results-download", args=[row.pk, "csv"]))
    shapes = list(csv.DictReader(io.StringIO(results.content.decode())))
    assert {r["error"] for r in shapes} == {"'-1 is not a size"}
    assert all(float(r["roofline_fraction (0-1)"]) == pytest.approx(0.3) for r in shapes)
    # The JSON downloads are data for programs and keep the text exactly.
    data = client.get(
        reverse("leaderboard:board-download", args=["json"]),
        {"suite": "atrex-bench-v0.1", "hardware": "cpu-dev"},
    ).json()
    assert data["results"][0]["title"] == FORMULA
