"""The staff status page of the worker fleet and its JSON."""

from __future__ import annotations

from django.contrib.admin.views.decorators import staff_member_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from . import selectors


@require_GET
@never_cache
@staff_member_required
def fleet_status(request: HttpRequest) -> HttpResponse:
    """Workers, their queues, heartbeat ages, GPUs, versions, ceilings; queue depths."""
    overview = selectors.fleet_overview()
    return render(request, "fleet/status.html", {"overview": overview})


@require_GET
@never_cache
def fleet_status_json(request: HttpRequest) -> JsonResponse:
    """The same as JSON (schema ``atrex-fleet/1``); staff only (403 otherwise)."""
    if not (request.user.is_authenticated and request.user.is_staff):
        return JsonResponse(
            {"detail": "Staff only: log in with a staff account.", "code": "auth:staff-only"},
            status=403,
        )
    return JsonResponse({"schema": "atrex-fleet/1", **selectors.fleet_overview()})
