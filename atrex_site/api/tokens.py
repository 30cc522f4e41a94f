"""``/api/tokens/``: a researcher's named API tokens.

Only a SHA-256 digest of each token is stored (``accounts.models.ApiToken``): the token
itself is in the answer to the POST that creates it, and nowhere else. A user may hold
several tokens (one per machine or script), each with a name, an optional expiry and the
time it was last used; each can be revoked on its own.

* ``GET /api/tokens/``: your active tokens (no secrets).
* ``POST /api/tokens/`` (``name``, ``expires_in_days``, both optional): a new token, shown
  once. Logged in through the session, HTTP Basic with the account's password (so that a
  terminal can get one; under the log-in lockout) or another token.
* ``DELETE /api/tokens/``: revoke the token this request is made with.
* ``DELETE /api/tokens/{id}/``: revoke one of your tokens.
"""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts import services
from accounts.models import ApiToken

from .authentication import (
    ApiTokenAuthentication,
    LockoutBasicAuthentication,
    ReaderSessionAuthentication,
    token_of,
)
from .errors import ErrorSerializer, error_response
from .pagination import StandardPagination

NOT_LOGGED_IN = OpenApiResponse(ErrorSerializer, description="Not logged in.")


class ApiTokenSerializer(serializers.ModelSerializer):
    """A token as listed: never its secret (only a digest is stored)."""

    prefix = serializers.CharField(help_text="The token's first characters, to recognise it.")

    class Meta:
        model = ApiToken
        fields = ["id", "name", "prefix", "created_at", "last_used_at", "expires_at"]


class ApiTokenCreatedSerializer(ApiTokenSerializer):
    token = serializers.CharField(
        help_text="Send as `Authorization: Token <token>`. Shown this once: it is not stored."
    )
    username = serializers.CharField()
    created = serializers.DateTimeField(help_text="Same as created_at.")

    class Meta(ApiTokenSerializer.Meta):
        fields = [*ApiTokenSerializer.Meta.fields, "token", "username", "created"]


class ApiTokenCreateSerializer(serializers.Serializer):
    name = serializers.CharField(
        required=False, allow_blank=True, max_length=services.MAX_NAME_LENGTH,
        help_text="Unique among your active tokens; default: `token <prefix>`.",
    )  # fmt: skip
    expires_in_days = serializers.IntegerField(
        required=False, allow_null=True, min_value=1, max_value=3650,
        help_text="Days until the token stops working; default: never.",
    )  # fmt: skip


class _TokenViewBase(APIView):
    # Basic is accepted here only, so that a terminal can get a token with a password.
    authentication_classes = [
        ApiTokenAuthentication,
        LockoutBasicAuthentication,
        ReaderSessionAuthentication,  # creating and revoking: Django's full check
    ]
    permission_classes = [IsAuthenticated]


class TokenApi(_TokenViewBase):
    pagination_class = StandardPagination

    @extend_schema(
        operation_id="tokens_list",
        summary="Your active API tokens (names, prefixes, last use; never the secrets)",
        responses={200: ApiTokenSerializer(many=True), 401: NOT_LOGGED_IN},
        tags=["tokens"],
    )
    def get(self, request: Request) -> Response:
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(
            services.api_tokens_of(user=request.user), request, view=self
        )
        return paginator.get_paginated_response(ApiTokenSerializer(page, many=True).data)

    @extend_schema(
        operation_id="token_create",
        summary="Create a named API token (shown once)",
        request=ApiTokenCreateSerializer,
        responses={
            201: ApiTokenCreatedSerializer,
            400: OpenApiResponse(
                ErrorSerializer,
                description="A name in use, a bad expiry ('errors' then names the fields) "
                "or an unreadable body.",
            ),
            401: NOT_LOGGED_IN,
            429: OpenApiResponse(ErrorSerializer, description="Log-in locked out for a while."),
        },
        tags=["tokens"],
    )
    def post(self, request: Request) -> Response:
        form = ApiTokenCreateSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        try:
            issued = services.api_token_create(
                user=request.user,
                name=form.validated_data.get("name", ""),
                expires_in_days=form.validated_data.get("expires_in_days"),
            )
        except services.TokenError as error:
            return error_response(detail=error.message, code=error.code, status=400)
        token = issued.token
        body = {
            **ApiTokenSerializer(token).data,
            "token": issued.secret,
            "username": request.user.get_username(),
            "created": token.created_at,
        }
        response = Response(ApiTokenCreatedSerializer(body).data, status=status.HTTP_201_CREATED)
        response["Cache-Control"] = "no-store"
        return response

    @extend_schema(
        operation_id="token_revoke_current",
        summary="Revoke the token this request is made with",
        request=None,
        responses={
            204: OpenApiResponse(description="Revoked."),
            400: OpenApiResponse(ErrorSerializer, description="Not made with a token."),
            401: NOT_LOGGED_IN,
        },
        tags=["tokens"],
    )
    def delete(self, request: Request) -> Response:
        token = token_of(request)
        if token is None:
            return error_response(
                detail="This request is not made with a token: revoke one by its id, "
                "DELETE /api/tokens/{id}/ (GET /api/tokens/ lists them).",
                code="no_token",
                status=400,
            )
        services.api_token_revoke(token=token)
        return Response(status=status.HTTP_204_NO_CONTENT)


class TokenDetailApi(_TokenViewBase):
    @extend_schema(
        operation_id="token_revoke",
        summary="Revoke one of your API tokens",
        request=None,
        responses={
            204: OpenApiResponse(description="Revoked."),
            401: NOT_LOGGED_IN,
            404: OpenApiResponse(ErrorSerializer, description="No such active token of yours."),
        },
        tags=["tokens"],
    )
    def delete(self, request: Request, pk: int) -> Response:
        token = get_object_or_404(services.api_tokens_of(user=request.user), pk=pk)
        services.api_token_revoke(token=token)
        return Response(status=status.HTTP_204_NO_CONTENT)
