"""The authentication backend: Django's, refusing every password check while locked out."""

from __future__ import annotations

from django.contrib.auth.backends import ModelBackend
from django.core.exceptions import PermissionDenied

from .lockout import client_ip, login_lockout


class LockoutModelBackend(ModelBackend):
    def authenticate(self, request, username=None, password=None, **kwargs):
        name = username if username is not None else kwargs.get("username")
        if login_lockout(username=name, ip=client_ip(request)) is not None:
            # PermissionDenied stops authenticate() at once: no other backend is tried.
            raise PermissionDenied
        return super().authenticate(request, username=username, password=password, **kwargs)
