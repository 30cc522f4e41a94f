"""Every CSV download is safe to open in a spreadsheet: user-chosen text that would start a
formula (``=HYPERLINK(...)``, ``+``, ``-``, ``@``, tab, carriage return) is written as text."""

from __future__ import annotations

import csv
import io

import pytest
from django.urls import reverse

from atrex_site.csv_export import spreadsheet_cell, write_rows
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


@pytest.mark.django_db
def test_board_and_results_downloads_neutralise_a_formula_title(client, catalogue, user):
    row = publish_row(owner=user, suite=catalogue, title=FORMULA, fraction=0.3)
    ShapeResult.objects.filter(run__submission=row).update(error="-1 is not a size")
    board = client.get(
        reverse("leaderboard:board-download", args=["csv"]),
        {"suite": "atrex-bench-v0.1", "hardware": "cpu-dev"},
    )
    titles = [r["title"] for r in csv.DictReader(io.StringIO(board.content.decode()))]
    assert titles == ["'" + FORMULA]
    Submission.objects.filter(pk=row.pk).update(visibility="public")
    client.force_login(user)
    results = client.get(reverse("submissions:results-download", args=[row.pk, "csv"]))
    errors = {r["error"] for r in csv.DictReader(io.StringIO(results.content.decode()))}
    assert errors == {"'-1 is not a size"}
    # The JSON downloads are data for programs and keep the text exactly.
    data = client.get(
        reverse("leaderboard:board-download", args=["json"]),
        {"suite": "atrex-bench-v0.1", "hardware": "cpu-dev"},
    ).json()
    assert data["results"][0]["title"] == FORMULA
