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


# Heat-map ends: a near-white and a dark blue. Text colour is picked per cell for contrast.
HEAT_LOW = (0xF6, 0xF8, 0xFA)
HEAT_HIGH = (0x0B, 0x3D, 0x7A)


def _channel_luminance(value: int) -> float:
    c = value / 255
    return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4


def relative_luminance(rgb: tuple[int, int, int]) -> float:
    """WCAG relative luminance of an sRGB colour."""
    r, g, b = (_channel_luminance(v) for v in rgb)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast_ratio(a: tuple[int, int, int], b: tuple[int, int, int]) -> float:
    """WCAG contrast ratio of two colours (1 to 21)."""
    la, lb = sorted((relative_luminance(a), relative_luminance(b)), reverse=True)
    return (la + 0.05) / (lb + 0.05)


def heat_colours(value: float | None, best: float | None) -> tuple[str, str] | None:
    """(background, text) hex colours for a score relative to the column's best, or None
    when there is nothing to shade. Text is black or white, whichever contrasts more, so
    every cell keeps at least 4.5:1 (WCAG AA)."""
    try:
        value, best = float(value), float(best)
    except (TypeError, ValueError):
        return None
    if not math.isfinite(value) or not math.isfinite(best) or best <= 0:
        return None
    share = min(max(value / best, 0.0), 1.0)
    rgb = tuple(round(lo + (hi - lo) * share) for lo, hi in zip(HEAT_LOW, HEAT_HIGH, strict=True))
    black, white = (0, 0, 0), (255, 255, 255)
    text = "#000000" if contrast_ratio(rgb, black) >= contrast_ratio(rgb, white) else "#ffffff"
    return "#{:02x}{:02x}{:02x}".format(*rgb), text


@register.filter
def heat(value, best) -> str:
    """An inline style shading a heat-map cell (``{{ cell|heat:best }}``), or ""."""
    colours = heat_colours(value, best)
    if colours is None:
        return ""
    return f"background-color:{colours[0]};color:{colours[1]}"
