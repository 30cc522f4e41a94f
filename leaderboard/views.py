"""Public pages: the board."""

from __future__ import annotations

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render

from . import selectors
from .models import HardwareProfile


def board(request: HttpRequest) -> HttpResponse:
    suite = selectors.suite_version_pick(slug=request.GET.get("suite"))
    hardware = selectors.hardware_pick(slug=request.GET.get("hardware"))
    if (request.GET.get("suite") and suite is None) or (
        request.GET.get("hardware") and hardware is None
    ):
        raise Http404("No such suite version or hardware profile.")
    operators = selectors.suite_operators(suite=suite) if suite else []
    rows = (
        list(selectors.leaderboard_rows(suite=suite, hardware=hardware))
        if suite and hardware
        else []
    )
    table = [
        {
            "rank": rank,
            "score": row,
            "submission": row.submission,
            "operator_cells": [row.operator_scores.get(op.operator.slug) for op in operators],
        }
        for rank, row in enumerate(rows, start=1)
    ]
    context = {
        "suite": suite,
        "hardware": hardware,
        "suites": selectors.suite_versions_published(),
        "hardware_profiles": HardwareProfile.objects.filter(enabled=True),
        "operators": operators,
        "table": table,
    }
    return render(request, "leaderboard/board.html", context)
