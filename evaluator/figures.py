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
from decimal import Decimal
from functools import lru_cache

SIGNIFICANT = 3
MISSING = "—"
_PREFIXES = [(1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, "")]


def _number(value: object) -> float | None:
    """``value`` as a float, or None for None, NaN and what is not a number."""
    if type(value) is float:  # the common case, first
        return None if math.isnan(value) else value
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
    return MISSING if number is None else _plain(number, digits)


@lru_cache(maxsize=8192)
def _plain(number: float, digits: int) -> str:
    """``significant`` of a float that is not NaN (memoised: a board writes the same
    figures on every render, a cell at a time)."""
    if math.isinf(number):
        return "∞" if number > 0 else "-∞"
    if number == 0:
        return "0"
    digits = max(int(digits), 1)
    head, exponent = _rounded_digits(abs(number), digits)
    sign = "-" if number < 0 else ""
    if exponent >= digits - 1:  # a whole number: 1234.5 -> 1230
        return sign + head + "0" * (exponent - digits + 1)
    if exponent >= 0:  # 3.20, 51.0
        return f"{sign}{head[: exponent + 1]}.{head[exponent + 1 :]}"
    return f"{sign}0.{'0' * (-exponent - 1)}{head}"  # 0.00566


def _rounded_digits(number: float, digits: int) -> tuple[str, int]:
    """The first ``digits`` significant digits of a positive ``number`` and the power of ten
    of the first one. The shortest decimal form of the float (``repr``) is rounded half up,
    as a reader rounds the digits they see (2.675 -> 2.68, 1234.5 -> 1235 with 4, where
    binary rounding gives 2.67 and 1234). String work: this runs for every cell of a board."""
    text = repr(number)
    mantissa, _, power = text.partition("e")
    whole, _, fraction = mantissa.partition(".")
    all_digits = whole + fraction
    significant_digits = all_digits.lstrip("0")
    # Where the decimal point falls, counted from the first significant digit.
    point = len(whole) + int(power or 0) - (len(all_digits) - len(significant_digits))
    head = significant_digits[:digits].ljust(digits, "0")
    if significant_digits[digits : digits + 1] >= "5":
        head = str(int(head) + 1)
        if len(head) > digits:  # 9.996 -> 10.0
            head, point = head[:digits], point + 1
    return head, point - 1


def percent(fraction: object, digits: int = SIGNIFICANT) -> str:
    """A share of 0..1 as a percentage: 0.0487 -> ``4.87%``, 5.66e-05 -> ``0.00566%``,
    1.0 -> ``100%``."""
    number = _number(fraction)
    return MISSING if number is None else _percent(number, digits)


@lru_cache(maxsize=8192)
def _percent(fraction: float, digits: int) -> str:
    return _plain(fraction * 100, digits) + "%"


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
