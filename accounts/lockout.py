"""Log-in lockout: too many failed log-ins for one username, or from one client address,
within a sliding window lock further attempts out until the window has passed.

Failures are counted from ``user_login_failed``, which ``django.contrib.auth.authenticate``
sends for the log-in page and for HTTP Basic on the API alike; the check itself is in the
authentication backend (``accounts.backends``), so no way in skips it. Attempts made while
locked out are refused and not counted, so a lockout ends on time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import timedelta
from ipaddress import ip_address

from django.conf import settings
from django.contrib.auth.signals import user_logged_in, user_login_failed
from django.utils import timezone

from .models import LoginFailure


@dataclass(frozen=True)
class Lockout:
    """Why further log-ins are refused, and for how long."""

    reason: str  # "username" or "ip"
    retry_after_s: int

    @property
    def message(self) -> str:
        minutes = max(1, math.ceil(self.retry_after_s / 60))
        who = "this account" if self.reason == "username" else "your network address"
        return (
            f"Too many failed log-ins for {who}. Log-in is locked for {minutes} more "
            f"minute{'s' if minutes != 1 else ''}; try again then."
        )


def _rules() -> tuple[int, int, timedelta]:
    config = settings.ATREX["LOGIN_LOCKOUT"]
    return (
        int(config["FAILURES_PER_USERNAME"]),
        int(config["FAILURES_PER_IP"]),
        timedelta(seconds=int(config["WINDOW_S"])),
    )


def client_ip(request) -> str | None:
    """The client's address: ``REMOTE_ADDR``, or the header the proxy in front of the site
    sets (``ATREX_CLIENT_IP_HEADER``, e.g. ``HTTP_X_REAL_IP``) when one is configured."""
    if request is None:
        return None
    header = settings.ATREX.get("CLIENT_IP_HEADER") or "REMOTE_ADDR"
    value = (request.META.get(header) or "").split(",")[0].strip()
    try:
        return str(ip_address(value))
    except ValueError:
        return None


def _normal(username: str | None) -> str:
    return (username or "").strip().lower()[:150]


def _retry_after(failures, limit: int, window: timedelta) -> int | None:
    """Seconds until fewer than ``limit`` of ``failures`` lie in the window, or None."""
    now = timezone.now()
    recent = failures.filter(at__gt=now - window).order_by("-at")
    if recent.count() < limit:
        return None
    # Locked until the limit-th newest failure leaves the window.
    oldest_counted = recent.values_list("at", flat=True)[limit - 1]
    return max(1, math.ceil((oldest_counted + window - now).total_seconds()))


def login_lockout(*, username: str | None, ip: str | None) -> Lockout | None:
    """The lockout in force for this username or address, else None."""
    per_username, per_ip, window = _rules()
    name = _normal(username)
    if name:
        wait = _retry_after(LoginFailure.objects.filter(username=name), per_username, window)
        if wait:
            return Lockout("username", wait)
    if ip:
        wait = _retry_after(LoginFailure.objects.filter(ip=ip), per_ip, window)
        if wait:
            return Lockout("ip", wait)
    return None


def login_failure_record(*, username: str | None, ip: str | None) -> None:
    """Count one failed log-in (not while locked out), and forget failures past the window."""
    if login_lockout(username=username, ip=ip) is not None:
        return
    _, _, window = _rules()
    LoginFailure.objects.filter(at__lte=timezone.now() - window).delete()
    LoginFailure.objects.create(username=_normal(username), ip=ip)


def login_failures_clear(*, username: str | None) -> None:
    """A successful log-in clears its username's failures (the address's stay counted)."""
    LoginFailure.objects.filter(username=_normal(username)).delete()


def _on_login_failed(sender, credentials, request=None, **kwargs) -> None:
    login_failure_record(username=credentials.get("username"), ip=client_ip(request))


def _on_logged_in(sender, request, user, **kwargs) -> None:
    login_failures_clear(username=user.get_username())


def connect_signals() -> None:
    user_login_failed.connect(_on_login_failed, dispatch_uid="accounts.lockout.failed")
    user_logged_in.connect(_on_logged_in, dispatch_uid="accounts.lockout.logged_in")
