"""Content-Security-Policy on every response (Django 5.2 has none of its own).

Pages get ``PAGE_POLICY``: scripts and styles from this site only (plotly and the API docs
are served from installed packages, never a CDN), no plugins, no framing, forms post
here only. Inline styles stay allowed: the heat map colours cells with ``style=`` and
plotly injects its stylesheet. Every other response (downloads, JSON, CSV, uploads, logs)
gets ``CONTENT_POLICY``: if a browser ever renders one, it runs in a sandbox with nothing
allowed, so user content can never act as a page of this origin.

The other headers come from Django: ``SecurityMiddleware`` (nosniff, Referrer-Policy,
Cross-Origin-Opener-Policy, HSTS in production) and ``XFrameOptionsMiddleware``.
"""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse

PAGE_POLICY = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self' 'unsafe-inline'",
        "img-src 'self' data:",
        "font-src 'self' data:",
        "connect-src 'self'",
        "object-src 'none'",
        "base-uri 'self'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ]
)
CONTENT_POLICY = "default-src 'none'; frame-ancestors 'none'; sandbox"


def _is_page(response: HttpResponse) -> bool:
    content_type = response.get("Content-Type", "")
    attachment = response.get("Content-Disposition", "").lower().startswith("attachment")
    return content_type.startswith("text/html") and not attachment


class ContentSecurityPolicyMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if "Content-Security-Policy" not in response:
            if _is_page(response):
                policy = getattr(settings, "CONTENT_SECURITY_POLICY", PAGE_POLICY)
            else:
                policy = CONTENT_POLICY
            response["Content-Security-Policy"] = policy
        return response
