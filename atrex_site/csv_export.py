"""CSV downloads that a spreadsheet opens as data, never as formulas.

Titles, model names and error messages in a download are chosen by users. A cell that
starts with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return is read by Excel,
LibreOffice and Google Sheets as a formula (``=HYPERLINK(...)`` becomes a live link), so
such text is written with a leading apostrophe, which spreadsheets show as plain text.
Numbers are written as they are: a negative number is data, not a formula. Scores stay
fractions of the roofline from 0 to 1 at full precision (the pages show them as percentages
with three significant figures); the header says so: ``header_with_units`` puts the unit
of each numeric column after its name, ``aggregate (roofline fraction 0-1)``.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable
from typing import Any

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")

ROOFLINE_FRACTION = "roofline fraction 0-1"
SHAPE_SHARE = "share of shapes 0-1"
# Column name -> its unit, for the columns whose name does not already carry one
# (``time_ms``, ``t_sol_ms`` do). Operator columns (``op:<slug>``) are roofline fractions.
COLUMN_UNITS: dict[str, str] = {
    "aggregate": ROOFLINE_FRACTION,
    "aggregate_ci_low": ROOFLINE_FRACTION,
    "aggregate_ci_high": ROOFLINE_FRACTION,
    "roofline_fraction": "0-1",
    "real_pass_rate": SHAPE_SHARE,
    "apparent_pass_rate": SHAPE_SHARE,
    "fallback_rate": SHAPE_SHARE,
    "geomean_speedup_eager": "ratio",
    "geomean_speedup_compile": "ratio",
    "speedup": "ratio",
    "weight": "relative within the operator",
    "own_kernel_share": "share of device time 0-1",
    "reps": "timed calls",
}


def header_with_units(fields: Iterable[str]) -> list[str]:
    """The CSV header for ``fields``: each name, followed by its unit where it has one
    (``aggregate (roofline fraction 0-1)``, ``op:rms_norm (roofline fraction 0-1)``)."""
    header = []
    for name in fields:
        unit = ROOFLINE_FRACTION if name.startswith("op:") else COLUMN_UNITS.get(name)
        header.append(f"{name} ({unit})" if unit else name)
    return header


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
