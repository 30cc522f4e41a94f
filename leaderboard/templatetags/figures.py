"""Number formatting for measured figures: significant digits, not fixed decimals, so that
a CPU development score of 2e-5 reads as such instead of 0.0000."""

from __future__ import annotations

import math

from django import template

register = template.Library()


@register.filter
def sig(value, digits: int = 3) -> str:
    """``value`` with ``digits`` significant digits; "—" for None or non-numbers."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return "—"
    if not math.isfinite(number):
        return str(number)
    if number == 0:
        return "0"
    if abs(number) < 1e-3 or abs(number) >= 1e6:
        return f"{number:.{max(digits - 1, 0)}e}"
    return f"{number:.{digits}g}"


@register.filter
def percent(value) -> str:
    """A rate in [0, 1] as a percentage with one decimal where it matters."""
    try:
        number = float(value) * 100
    except (TypeError, ValueError):
        return "—"
    return f"{number:.0f}%" if number in (0, 100) or number >= 10 else f"{number:.1f}%"
