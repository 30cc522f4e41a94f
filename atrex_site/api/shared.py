"""API answers that are the same for every reader, shared between requests as rendered JSON
(``atrex_site.page_cache.shared_value``): authentication, throttling and content
negotiation still run per request; building and rendering the body happen once per board
generation."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from django.http import HttpResponse
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from atrex_site.page_cache import not_shared, shared_value_state


def shared_answer(request: Request, key: str, build: Callable[[], Any]) -> HttpResponse:
    """The answer whose body ``build()`` returns (serialised data, the same for every
    reader), from the copy shared under ``key`` (which names everything the body depends
    on). ``build`` may return ``not_shared(response)`` for an answer that is not shared
    (an error)."""

    def rendered() -> Any:
        data = build()
        if isinstance(data, HttpResponse):
            return not_shared(data)
        return JSONRenderer().render(data)

    content, state = shared_value_state(key, rendered)
    if isinstance(content, HttpResponse):
        return content
    if request.accepted_renderer.format == "json":
        response: HttpResponse = HttpResponse(content, content_type="application/json")
    else:  # the browsable API (development settings): render the same data as usual
        response = Response(json.loads(content))
    response["X-Atrex-Cache"] = state
    return response
