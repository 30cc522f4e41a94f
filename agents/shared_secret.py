"""Agent shared secrets: made here, shown to their owner once, stored encrypted.

The portal signs every request with the secret, so it must be able to read it back: a
one-way hash (as for passwords) cannot sign. The secret is stored encrypted (Fernet:
AES-128-CBC with an HMAC-SHA256 tag) under a key that is not in the database
(``ATREX_AGENT_SECRET_KEY``, or one derived from Django's ``SECRET_KEY``), so a copy of the
database alone does not give anyone an agent's secret. Only the last four characters are
kept in clear, to tell secrets apart.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets as random_source

from cryptography.fernet import Fernet, InvalidToken
from django.conf import settings

from evaluator.errors import PlatformError

SECRET_BYTES = 32


class SecretUnreadable(PlatformError):
    code = "platform:agent-secret-unreadable"


def _fernet() -> Fernet:
    configured = settings.ATREX.get("AGENT_SECRET_KEY") or ""
    material = configured or settings.SECRET_KEY
    # A fixed label keeps this key apart from every other use of SECRET_KEY.
    digest = hmac.new(
        material.encode("utf-8"), b"atrex agent endpoint secrets", hashlib.sha256
    ).digest()
    return Fernet(base64.urlsafe_b64encode(digest))


def secret_generate() -> str:
    """A new shared secret (43 URL-safe characters, 256 bits)."""
    return random_source.token_urlsafe(SECRET_BYTES)


def secret_encrypt(secret: str) -> str:
    return _fernet().encrypt(secret.encode("utf-8")).decode("ascii")


def secret_decrypt(token: str) -> bytes:
    """The secret's bytes, for signing; a platform error when the key has changed."""
    try:
        return _fernet().decrypt(token.encode("ascii"))
    except InvalidToken as exc:
        raise SecretUnreadable(
            "The agent endpoint's secret cannot be decrypted (the portal's agent secret key "
            "changed); its owner must generate a new secret."
        ) from exc
