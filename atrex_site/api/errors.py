"""One error body for every API failure: ``{"detail": str, "code": str}``.

Validation failures add ``"errors"``: the field errors DRF produced, keyed by field. A
rejected upload (422) is not an exception: its body is the submission, with ``detail`` and
``code`` copied from the bundle error (see ``submissions.api``).
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied
from django.http import Http404
from rest_framework import exceptions, serializers
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler


class ErrorSerializer(serializers.Serializer):
    """The body of every 4xx answer of the API."""

    detail = serializers.CharField(help_text="What went wrong, in plain words.")
    code = serializers.CharField(
        help_text="A stable machine-readable code, e.g. not_found, not_authenticated, invalid."
    )


class ValidationErrorSerializer(ErrorSerializer):
    """A 400: the request's fields did not validate."""

    errors = serializers.DictField(
        child=serializers.ListField(child=serializers.CharField()),
        help_text="Field name -> messages (non_field_errors for the request as a whole).",
    )


def _flatten(detail: Any) -> dict[str, list[str]]:
    if isinstance(detail, dict):
        return {
            str(key): [str(item) for item in (value if isinstance(value, list) else [value])]
            for key, value in detail.items()
        }
    items = detail if isinstance(detail, list) else [detail]
    return {"non_field_errors": [str(item) for item in items]}


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF's handler (status codes, auth headers), with the body rewritten to our shape."""
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied()
    response = drf_exception_handler(exc, context)
    if response is None or not isinstance(exc, exceptions.APIException):
        return response
    if isinstance(exc, exceptions.ValidationError):
        errors = _flatten(exc.detail)
        field, messages = next(iter(errors.items()), ("non_field_errors", ["Invalid input."]))
        first = messages[0] if field == "non_field_errors" else f"{field}: {messages[0]}"
        response.data = {
            "detail": first if len(errors) == 1 else f"{first} (and {len(errors) - 1} more)",
            "code": "invalid",
            "errors": errors,
        }
    else:
        codes = exc.get_codes()
        response.data = {
            "detail": str(exc.detail if not isinstance(exc.detail, (list, dict)) else exc),
            "code": codes if isinstance(codes, str) else exc.default_code,
        }
    return response


def error_response(*, detail: str, code: str, status: int) -> Response:
    """An error answered by a view itself (not raised), in the same shape."""
    return Response({"detail": detail, "code": code}, status=status)
