"""CSV downloads that a spreadsheet opens as data, never as formulas.

Titles, model names and error messages in a download are chosen by users. A cell that
starts with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return is read by Excel,
LibreOffice and Google Sheets as a formula (``=HYPERLINK(...)`` becomes a live link), so
such text is written with a leading apostrophe, which spreadsheets show as plain text.
Numbers are written as they are: a negative number is data, not a formula.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable
from typing import Any

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_cell(value: Any) -> Any:
    """``value`` made safe for a spreadsheet: text that could start a formula is quoted."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def write_rows(stream: Any, rows: Iterable[Iterable[Any]]) -> None:
    """Write ``rows`` (header first) to ``stream`` as CSV, every cell spreadsheet-safe."""
    writer = csv.writer(stream)
    for row in rows:
        writer.writerow([spreadsheet_cell(value) for value in row])
