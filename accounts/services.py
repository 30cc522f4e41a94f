"""API tokens: create (the secret is returned once), authenticate, revoke.

A token found in the database is kept in the shared cache (Redis in production) under its
digest for ``TOKEN_CACHE_S`` seconds, so that most API requests cost one cache read and no
query. What that keeps:

* a revoke (``api_token_revoke``, ``api_tokens_revoke``) writes a tombstone under the
  digest at once, and entries are only ever *added* (``cache.add``), never overwritten, so a
  request that read the token just before the revoke cannot put it back: every process
  refuses the token from its next request on (with the per-process memory cache of
  development, other processes within ``TOKEN_CACHE_S``);
* expiry is checked on every use, against the kept ``expires_at``;
* a change made to the row or its user outside these services (an account disabled in the
  admin, a row edited in a shell) counts within ``TOKEN_CACHE_S`` seconds;
* ``last_used_at`` is written when the entry is built and older than
  ``LAST_USED_RESOLUTION``: at most ``LAST_USED_RESOLUTION + TOKEN_CACHE_S`` behind.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING

from django.core.cache import cache
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
# Seconds a token read from the database is kept in the shared cache (see the module).
TOKEN_CACHE_S = 10
_REVOKED = "revoked"


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


def token_cache_key(digest: str) -> str:
    """The key under which the shared cache keeps a token (or a revoke's tombstone)."""
    return f"atrex:api-token:{digest}"


def api_token_authenticate(*, secret: str) -> ApiToken | None:
    """The active token whose secret this is (with its user loaded), else None: from the
    shared cache, or the database (then kept, and marked used). See the module."""
    digest = token_digest(secret)
    token = cache.get(token_cache_key(digest))
    if token == _REVOKED:
        return None
    if token is None:
        token = (
            ApiToken.objects.select_related("user")
            .filter(digest=digest, revoked_at__isnull=True)
            .first()
        )
        if token is None:
            return None
        now = timezone.now()
        if token.is_active and (
            token.last_used_at is None or now - token.last_used_at >= LAST_USED_RESOLUTION
        ):
            ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
            token.last_used_at = now
        _keep(digest, token)
    return token if token.is_active else None


def _keep(digest: str, token: ApiToken) -> None:
    """Keep a token read from the database; never over a revoke's tombstone, even one
    written after it was read."""
    cache.add(token_cache_key(digest), token, TOKEN_CACHE_S)


def _forget(digests: list[str]) -> None:
    """Tombstones for revoked tokens, over whatever the cache kept of them."""
    if digests:
        cache.set_many({token_cache_key(digest): _REVOKED for digest in digests}, TOKEN_CACHE_S)


def api_token_revoke(*, token: ApiToken) -> None:
    """Revoke ``token`` (kept for the record, never accepted again; refused from the next
    request on). Idempotent."""
    ApiToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(revoked_at=timezone.now())
    _forget([token.digest])


def api_tokens_revoke(*, tokens: QuerySet[ApiToken]) -> int:
    """Revoke every active token of ``tokens`` (the admin's action); how many were."""
    active = tokens.filter(revoked_at__isnull=True)
    digests = list(active.values_list("digest", flat=True))
    count = active.update(revoked_at=timezone.now())
    _forget(digests)
    return count


def api_tokens_of(*, user: User) -> QuerySet[ApiToken]:
    """The user's active tokens, newest first (no secrets: they are not stored)."""
    now = timezone.now()
    return ApiToken.objects.filter(user=user, revoked_at__isnull=True).exclude(expires_at__lte=now)
