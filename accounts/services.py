"""API tokens: create (the secret is returned once), authenticate, revoke."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING

from django.db import IntegrityError, transaction
from django.utils import timezone

from .models import ApiToken

if TYPE_CHECKING:
    from django.contrib.auth.models import User
    from django.db.models import QuerySet

# New tokens read "atx_" + 40 random URL-safe characters (240 bits). Tokens issued before
# hashing (40 hex characters, DRF authtoken) keep working: only their digest is stored.
TOKEN_PREFIX = "atx_"
SHOWN_PREFIX_LENGTH = 12
# last_used_at is written at most this often per token (not one write per request).
LAST_USED_RESOLUTION = timedelta(seconds=60)
MAX_NAME_LENGTH = 100


class TokenError(Exception):
    """A token request that cannot be honoured; ``message`` says what to change."""

    def __init__(self, message: str, code: str = "invalid") -> None:
        super().__init__(message)
        self.message = message
        self.code = code


def token_digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class IssuedToken:
    token: ApiToken
    secret: str  # shown to the user once, never stored


def api_token_create(
    *, user: User, name: str = "", expires_in_days: int | None = None
) -> IssuedToken:
    """A new token for ``user``. ``name`` must be unique among their active tokens (an empty
    name gets one from the token's prefix); ``expires_in_days`` None: never expires."""
    name = name.strip()
    if len(name) > MAX_NAME_LENGTH:
        raise TokenError(f"A token name has at most {MAX_NAME_LENGTH} characters.")
    if expires_in_days is not None and not 1 <= expires_in_days <= 3650:
        raise TokenError("expires_in_days must be between 1 and 3650 (or left out).")
    secret = TOKEN_PREFIX + secrets.token_urlsafe(30)
    prefix = secret[:SHOWN_PREFIX_LENGTH]
    expires_at = (
        timezone.now() + timedelta(days=expires_in_days) if expires_in_days is not None else None
    )
    try:
        with transaction.atomic():
            token = ApiToken.objects.create(
                user=user,
                name=name or f"token {prefix}",
                prefix=prefix,
                digest=token_digest(secret),
                expires_at=expires_at,
            )
    except IntegrityError as error:
        raise TokenError(
            f"You already have an active token named {name!r}: pick another name or revoke "
            "that one first.",
            code="duplicate_name",
        ) from error
    return IssuedToken(token=token, secret=secret)


def api_token_authenticate(*, secret: str) -> ApiToken | None:
    """The active token whose secret this is (with its user loaded), else None. Marks it
    used."""
    token = (
        ApiToken.objects.select_related("user")
        .filter(digest=token_digest(secret), revoked_at__isnull=True)
        .first()
    )
    if token is None or not token.is_active:
        return None
    now = timezone.now()
    if token.last_used_at is None or now - token.last_used_at >= LAST_USED_RESOLUTION:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        token.last_used_at = now
    return token


def api_token_revoke(*, token: ApiToken) -> None:
    """Revoke ``token`` (kept for the record, never accepted again). Idempotent."""
    ApiToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(revoked_at=timezone.now())


def api_tokens_of(*, user: User) -> QuerySet[ApiToken]:
    """The user's active tokens, newest first (no secrets: they are not stored)."""
    now = timezone.now()
    return ApiToken.objects.filter(user=user, revoked_at__isnull=True).exclude(expires_at__lte=now)
