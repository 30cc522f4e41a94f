"""Template filters for measured figures. Every filter goes through ``evaluator.figures``
(the one place that decides how a number is written: three significant figures, never
e-notation, a fraction of the roofline as a percentage), and joins a number to its unit
with a no-break space so that ``1.71 µs`` never wraps between the two.

    {{ score.aggregate|percent }}        4.87%       (a fraction 0..1: scores, pass rates)
    {{ value|sig }} / {{ value|sig:4 }}  0.0000566   (a plain number)
    {{ ratio|speedup }}                  10.3×
    {{ result.time_ms|ms }}              1.71 µs     (a time stored in milliseconds)
    {{ flops|si:"FLOP" }}                3.44 GFLOP  (a size or rate with an SI prefix)
"""

from __future__ import annotations

import math

from django import template

from evaluator import figures

register = template.Library()

NBSP = "\u00a0"


@register.filter
def sig(value, digits: int = figures.SIGNIFICANT) -> str:
    """``value`` with ``digits`` significant figures, plain decimals; "—" when missing."""
    return figures.significant(value, digits)


@register.filter
def percent(value) -> str:
    """A fraction 0..1 (a score as a share of the roofline, a pass rate) as ``4.87%``."""
    return figures.percent(value)


@register.filter
def speedup(value) -> str:
    """A speed-up ratio as ``10.3×``; "—" when there is none."""
    return figures.speedup(value)


@register.filter
def ms(value) -> str:
    """A time stored in milliseconds, in the unit that reads best (``1.71 µs``)."""
    return figures.duration_ms(value).replace(" ", NBSP)


@register.filter
def si(value, unit: str = "") -> str:
    """A size or rate with an SI prefix (``{{ v|si:"B/s" }}`` -> ``4.80 TB/s``)."""
    return figures.si(value, unit).replace(" ", NBSP).rstrip(NBSP)


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
