"""Read-only figures in the admin, written like the pages write them (``evaluator.figures``:
three significant figures, scores as % of the roofline) instead of 17-digit floats.

    list_display = ["submission", roofline("aggregate", "score"), ...]
    readonly_fields = [si("copy_bytes_per_s", "B/s", "copy bandwidth")]

Each helper returns a function of the row, usable in ``list_display``, ``readonly_fields``
and ``fields`` (directly, or as a class attribute named there); it sorts the change list
by the underlying column.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import admin

from evaluator import figures


def _display(field: str, description: str, write: Callable[[Any], str]) -> Callable[[Any], str]:
    @admin.display(description=description, ordering=field)
    def show(*args: Any) -> str:
        # Called as show(obj) from a list, or show(model_admin, obj) as a class attribute.
        return write(getattr(args[-1], field))

    show.__name__ = f"{field}_display"
    return show


def roofline(field: str, description: str) -> Callable[[Any], str]:
    """A fraction of the roofline (or another share of 0..1) as ``4.87%``."""
    return _display(field, description, figures.percent)


def sig(field: str, description: str) -> Callable[[Any], str]:
    """A plain number with three significant figures."""
    return _display(field, description, figures.significant)


def si(field: str, unit: str, description: str) -> Callable[[Any], str]:
    """A rate or size with an SI prefix: ``4.80 TB/s``."""
    return _display(field, description, lambda value: figures.si(value, unit))


def speedup(field: str, description: str) -> Callable[[Any], str]:
    """A ratio as ``10.3×``."""
    return _display(field, description, figures.speedup)


def seconds(field: str, description: str) -> Callable[[Any], str]:
    """A time stored in seconds: ``2.50 s``, ``68.9 ms``."""
    return _display(field, description, _seconds)


def _seconds(value: Any) -> str:
    return figures.duration_ms(None if value is None else float(value) * 1e3)
