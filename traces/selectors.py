"""Reads: the traces' rows as a pandas frame, and the card-hours of their applications."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from . import aggregation
from .models import Application, Trace, TraceRow, UnmappedTime

if TYPE_CHECKING:
    import pandas as pd


def trace_frame(*, traces: Sequence[Trace]) -> pd.DataFrame:
    """Every mapped and unmapped row of ``traces`` (see ``aggregation.trace_frame``)."""
    ids = [t.pk for t in traces]
    mapped = TraceRow.objects.filter(trace_id__in=ids).values(
        "application__name",
        "operator",
        "shape_key",
        "init_kwargs",
        "input_kwargs",
        "calls",
        "time_us",
    )
    unmapped = UnmappedTime.objects.filter(trace_id__in=ids).values(
        "application__name", "name", "calls", "time_us"
    )
    return aggregation.trace_frame(
        mapped=(_application_named(row) for row in mapped),
        unmapped=(_application_named(row) for row in unmapped),
    )


def _application_named(row: Mapping[str, Any]) -> dict[str, Any]:
    """The row with its ``application__name`` value under the key ``application``."""
    renamed = dict(row)
    renamed["application"] = renamed.pop("application__name")
    return renamed


def card_hours(*, traces: Sequence[Trace]) -> dict[str, float]:
    """Card-hours of every application with rows in ``traces``."""
    ids = [t.pk for t in traces]
    names = set(TraceRow.objects.filter(trace_id__in=ids).values_list("application", flat=True))
    names |= set(
        UnmappedTime.objects.filter(trace_id__in=ids).values_list("application", flat=True)
    )
    return dict(Application.objects.filter(pk__in=names).values_list("name", "card_hours"))


def imported_traces() -> list[Trace]:
    return list(Trace.objects.filter(status=Trace.Status.IMPORTED).select_related("application"))
