"""How API requests authenticate: ``Authorization: Token <secret>`` (hashed tokens of
``accounts``, kept briefly in the shared cache: see ``accounts.services``), the site's
session (reads find the signed-in user as the shared pages do, without a query on most
requests), and HTTP Basic (only where a view allows it) under the log-in lockout."""

from __future__ import annotations

from django.conf import settings
from drf_spectacular.authentication import SessionScheme
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import exceptions
from rest_framework.authentication import (
    BaseAuthentication,
    BasicAuthentication,
    SessionAuthentication,
    get_authorization_header,
)

from accounts.lockout import client_ip, login_lockout
from accounts.models import ApiToken
from accounts.services import api_token_authenticate
from atrex_site.page_cache import session_reader

SAFE_METHODS = ("GET", "HEAD", "OPTIONS")


class ApiTokenAuthentication(BaseAuthentication):
    """``Authorization: Token <secret>``; ``request.auth`` is the ``ApiToken``."""

    keyword = "Token"

    def authenticate(self, request):
        header = get_authorization_header(request).split()
        if not header or header[0].lower() != self.keyword.lower().encode():
            return None
        if len(header) != 2:
            raise exceptions.AuthenticationFailed(
                "Invalid token header: send 'Authorization: Token <token>' (one token, no spaces)."
            )
        try:
            secret = header[1].decode("ascii")
        except UnicodeError as error:
            raise exceptions.AuthenticationFailed("Invalid token: not ASCII.") from error
        token = api_token_authenticate(secret=secret)
        if token is None:
            raise exceptions.AuthenticationFailed(
                "Invalid, expired or revoked token: create a new one (POST /api/tokens/)."
            )
        if not token.user.is_active:
            raise exceptions.AuthenticationFailed("This account is disabled.")
        return token.user, token

    def authenticate_header(self, request) -> str:
        return self.keyword


class ReaderSessionAuthentication(SessionAuthentication):
    """DRF's session authentication; a read (GET, HEAD, OPTIONS) finds the user through
    ``page_cache.session_reader`` (no query on most requests: an account change counts
    within its ``READER_S`` seconds, a log-out at once), a write through Django's
    ``request.user`` as before. CSRF is enforced as DRF does."""

    def authenticate(self, request):
        django_request = request._request
        if (
            django_request.method not in SAFE_METHODS
            or settings.SESSION_COOKIE_NAME not in django_request.COOKIES
        ):
            return super().authenticate(request)
        user = session_reader(django_request)
        if not user.is_authenticated or not user.is_active:
            return None
        self.enforce_csrf(request)
        return user, None


class LockoutBasicAuthentication(BasicAuthentication):
    """HTTP Basic that says so when the log-in lockout is in force (429, not 401)."""

    def authenticate_credentials(self, userid, password, request=None):
        lockout = login_lockout(username=userid, ip=client_ip(request))
        if lockout is not None:
            raise exceptions.Throttled(wait=lockout.retry_after_s, detail=lockout.message)
        return super().authenticate_credentials(userid, password, request)


def token_of(request) -> ApiToken | None:
    """The token this request authenticated with, if any."""
    return request.auth if isinstance(request.auth, ApiToken) else None


class ApiTokenScheme(OpenApiAuthenticationExtension):
    """The schema's security scheme for ``ApiTokenAuthentication``."""

    target_class = ApiTokenAuthentication
    name = "tokenAuth"

    def get_security_definition(self, auto_schema):
        return {
            "type": "apiKey",
            "in": "header",
            "name": "Authorization",
            "description": "`Token <token>` (`POST /api/tokens/` creates one)",
        }


class ReaderSessionScheme(SessionScheme):
    """The schema's security scheme for ``ReaderSessionAuthentication``: DRF's session's."""

    target_class = ReaderSessionAuthentication


class LockoutBasicScheme(OpenApiAuthenticationExtension):
    target_class = LockoutBasicAuthentication
    name = "basicAuth"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "basic"}
