"""``/api/tokens/``: a researcher creates or revokes their own API token.

POST (logged in through the session, or HTTP Basic with the account's password) issues a
fresh token, replacing any previous one, and shows it once; DELETE revokes it. Tokens are
DRF authtoken rows, stored in clear for now: storing only a hash (and several named
tokens per user) is a planned hardening step, see docs/api.md.
"""

from __future__ import annotations

from django.db import transaction
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.authentication import (
    BasicAuthentication,
    SessionAuthentication,
    TokenAuthentication,
)
from rest_framework.authtoken.models import Token
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from .errors import ErrorSerializer


class TokenSerializer(serializers.Serializer):
    token = serializers.CharField(help_text="Send as 'Authorization: Token <token>'.")
    username = serializers.CharField()
    created = serializers.DateTimeField()


class TokenApi(APIView):
    # Basic auth is accepted here only, so that a terminal can get a token with a password.
    authentication_classes = [TokenAuthentication, BasicAuthentication, SessionAuthentication]
    permission_classes = [IsAuthenticated]

    @extend_schema(
        operation_id="token_create",
        summary="Issue a new API token (replaces the previous one)",
        request=None,
        responses={
            201: TokenSerializer,
            401: OpenApiResponse(ErrorSerializer, description="Not logged in."),
        },
        tags=["tokens"],
    )
    def post(self, request: Request) -> Response:
        with transaction.atomic():
            Token.objects.filter(user=request.user).delete()
            token = Token.objects.create(user=request.user)
        body = {
            "token": token.key,
            "username": request.user.get_username(),
            "created": token.created,
        }
        return Response(TokenSerializer(body).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        operation_id="token_revoke",
        summary="Revoke your API token",
        request=None,
        responses={
            204: OpenApiResponse(description="Revoked (or there was none)."),
            401: OpenApiResponse(ErrorSerializer, description="Not logged in."),
        },
        tags=["tokens"],
    )
    def delete(self, request: Request) -> Response:
        Token.objects.filter(user=request.user).delete()
        return Response(status=status.HTTP_204_NO_CONTENT)
