"""How a figure is written for people: one helper for every page, chart, export, the
``atrex`` client and the evaluator's own table. Pure standard library (the web side, the
client and the harness all import it).

A fraction of the roofline is shown as a percentage with a fixed number of significant
figures (``4.87%``, ``0.00566%``), never in e-notation and never as ``0.0000`` for a positive
value; times and rates carry SI prefixes (``1.71 µs``, ``4.80 TB/s``).
"""

from __future__ import annotations

import math

SIGNIFICANT = 3
MISSING = "–"
_PREFIXES = [(1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, "")]


def significant(value: float | None, digits: int = SIGNIFICANT) -> str:
    """``value`` with ``digits`` significant figures in plain decimal notation
    (``0.0000566`` for 5.66e-05, ``1230`` for 1234.5 with 3); ``–`` for None or NaN."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return MISSING
    if math.isinf(value):
        return "∞" if value > 0 else "−∞"
    if value == 0:
        return "0"
    exponent = math.floor(math.log10(abs(value)))
    decimals = max(digits - 1 - exponent, 0)
    rounded = round(value, decimals)
    if rounded != 0 and math.floor(math.log10(abs(rounded))) > exponent:  # 9.996 -> 10.0
        decimals = max(decimals - 1, 0)
        rounded = round(value, decimals)
    if decimals == 0:
        # Whole numbers keep digits beyond ``digits`` only as zeros: 1234.5 -> 1230.
        scale = 10 ** max(exponent + 1 - digits, 0)
        return str(int(round(value / scale)) * scale)
    return f"{rounded:.{decimals}f}"


def roofline_percent(fraction: float | None, digits: int = SIGNIFICANT) -> str:
    """A fraction of the hardware roofline as a percentage: 0.0487 -> ``4.87%``."""
    if fraction is None:
        return MISSING
    return significant(fraction * 100, digits) + "%"


def speedup(ratio: float | None, digits: int = SIGNIFICANT) -> str:
    """A speed-up ratio: 10.27 -> ``10.3×``."""
    if ratio is None:
        return MISSING
    return significant(ratio, digits) + "×"


def si(value: float | None, unit: str, digits: int = SIGNIFICANT) -> str:
    """A rate or size with an SI prefix: 4.8e12, "B/s" -> ``4.80 TB/s``."""
    if value is None:
        return MISSING
    for scale, prefix in _PREFIXES:
        if abs(value) >= scale:
            return f"{significant(value / scale, digits)} {prefix}{unit}"
    return f"{significant(value, digits)} {unit}"


def duration_ms(milliseconds: float | None, digits: int = SIGNIFICANT) -> str:
    """A time given in milliseconds, in the unit that reads best: ``1.71 µs``, ``3.20 ms``,
    ``2.50 s``."""
    if milliseconds is None:
        return MISSING
    seconds = milliseconds / 1e3
    for scale, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs")):
        if abs(seconds) >= scale:
            return f"{significant(seconds / scale, digits)} {unit}"
    return f"{significant(seconds / 1e-9, digits)} ns"
