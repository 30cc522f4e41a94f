"""Rate limits of the API: per client address (anonymous) and per user.

DRF's classes read the rates once, when they are imported; these read
``REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]`` on each request, so that the settings in force
(and a test's override) apply.
"""

from __future__ import annotations

from django.conf import settings
from rest_framework.throttling import AnonRateThrottle, UserRateThrottle


def _rate(scope: str) -> str | None:
    return settings.REST_FRAMEWORK.get("DEFAULT_THROTTLE_RATES", {}).get(scope)


class AnonThrottle(AnonRateThrottle):
    def get_rate(self) -> str | None:
        return _rate(self.scope)


class UserThrottle(UserRateThrottle):
    def get_rate(self) -> str | None:
        return _rate(self.scope)
