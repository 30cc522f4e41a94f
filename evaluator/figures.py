"""How a figure is written for people: one helper for every page, chart, export, the
``atrex`` client, the admin and the evaluator's own table. Pure standard library (the web
side, the client and the harness all import it).

The house rule, decided once (docs/scoring.md, "How scores are written"): **three
significant figures** (``SIGNIFICANT``), plain decimal notation, never e-notation and never
``0.0000`` for a positive value. A fraction of the roofline (or any share of 0..1) is shown
as a percentage, ``4.87%``, ``0.00566%``, ``100%``; times and rates carry SI prefixes,
``1.71 µs``, ``4.80 TB/s``; speed-ups read ``10.3×``; a missing value is ``—``.
The stored numbers (database, API, CSV) stay fractions 0..1 at full precision: this module
only writes them for people.
"""

from __future__ import annotations

import math
from decimal import ROUND_HALF_UP, Decimal

SIGNIFICANT = 3
MISSING = "—"
_PREFIXES = [(1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, "")]


def _number(value: object) -> float | None:
    """``value`` as a float, or None for None, NaN and what is not a number."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int | float | Decimal):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            return None
    else:
        return None
    return None if math.isnan(number) else number


def significant(value: object, digits: int = SIGNIFICANT) -> str:
    """``value`` with ``digits`` significant figures in plain decimal notation
    (``0.0000566`` for 5.66e-05, ``1230`` for 1234.5 with 3, trailing zeros kept:
    ``3.20``); ``—`` for None, NaN or what is not a number."""
    number = _number(value)
    if number is None:
        return MISSING
    if math.isinf(number):
        return "∞" if number > 0 else "-∞"
    if number == 0:
        return "0"
    digits = max(int(digits), 1)
    # Round the shortest decimal form of the float half up (2.675 -> 2.68, 1234.5 -> 1235
    # with 4), as a reader rounds the digits they see.
    exact = Decimal(repr(number))
    step = exact.adjusted() - digits + 1
    rounded = exact.scaleb(-step).quantize(Decimal(1), rounding=ROUND_HALF_UP).scaleb(step)
    decimals = max(digits - 1 - rounded.adjusted(), 0)  # 9.996 -> 10.0, not 10.00
    return f"{rounded:.{decimals}f}"


def percent(fraction: object, digits: int = SIGNIFICANT) -> str:
    """A share of 0..1 as a percentage: 0.0487 -> ``4.87%``, 5.66e-05 -> ``0.00566%``,
    1.0 -> ``100%``."""
    number = _number(fraction)
    if number is None:
        return MISSING
    return significant(number * 100, digits) + "%"


def roofline_percent(fraction: object, digits: int = SIGNIFICANT) -> str:
    """A fraction of the hardware roofline as a percentage: 0.0487 -> ``4.87%``."""
    return percent(fraction, digits)


def speedup(ratio: object, digits: int = SIGNIFICANT) -> str:
    """A speed-up ratio: 10.27 -> ``10.3×``."""
    number = _number(ratio)
    if number is None:
        return MISSING
    return significant(number, digits) + "×"


def si(value: object, unit: str, digits: int = SIGNIFICANT) -> str:
    """A rate or size with an SI prefix: 4.8e12, "B/s" -> ``4.80 TB/s``."""
    number = _number(value)
    if number is None:
        return MISSING
    rounded = float(significant(number, digits)) if math.isfinite(number) else number
    for scale, prefix in _PREFIXES:
        if abs(rounded) >= scale:  # on the rounded value: 999.6e9 reads 1.00 T, not 1000 G
            return f"{significant(number / scale, digits)} {prefix}{unit}"
    return f"{significant(number, digits)} {unit}"


def duration_ms(milliseconds: object, digits: int = SIGNIFICANT) -> str:
    """A time given in milliseconds, in the unit that reads best: ``1.71 µs``, ``3.20 ms``,
    ``2.50 s``."""
    number = _number(milliseconds)
    if number is None:
        return MISSING
    if number == 0:
        return "0 ms"
    seconds = number / 1e3
    rounded = float(significant(seconds, digits)) if math.isfinite(seconds) else seconds
    for scale, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs")):
        if abs(rounded) >= scale:
            return f"{significant(seconds / scale, digits)} {unit}"
    return f"{significant(seconds / 1e-9, digits)} ns"
