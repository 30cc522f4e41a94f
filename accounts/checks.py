"""Deployment checks (``manage.py check --deploy``) for what the accounts app relies on."""

from __future__ import annotations

from django.conf import settings
from django.core.checks import Tags, Warning, register

LOCAL_CACHES = (
    "django.core.cache.backends.locmem.LocMemCache",
    "django.core.cache.backends.dummy.DummyCache",
)


@register(Tags.security, deploy=True)
def shared_cache_for_rate_limits(app_configs, **kwargs):
    """The API's rate limits count in the default cache: with a per-process cache, each web
    process counts alone (and a dummy cache counts nothing)."""
    backend = settings.CACHES.get("default", {}).get("BACKEND", "")
    if backend in LOCAL_CACHES:
        return [
            Warning(
                f"The default cache is {backend.rsplit('.', 1)[-1]}: the API's rate limits are "
                "counted per process.",
                hint="Set DJANGO_CACHE_URL to a shared cache, e.g. redis://127.0.0.1:6379/1.",
                id="atrex.W001",
            )
        ]
    return []
