"""Reads of the suite catalogue: published suite versions, hardware profiles, defaults."""

from __future__ import annotations

from django.conf import settings
from django.db.models import QuerySet

from .models import HardwareProfile, SuiteOperator, SuiteVersion


def suite_versions_published() -> QuerySet[SuiteVersion]:
    return SuiteVersion.objects.filter(status=SuiteVersion.Status.PUBLISHED).order_by(
        "name", "-published_at"
    )


def suite_version_default() -> SuiteVersion | None:
    """The configured default suite if published, else the newest published one."""
    wanted = settings.ATREX["DEFAULT_SUITE"]
    for version in suite_versions_published():
        if version.slug == wanted:
            return version
    return suite_versions_published().order_by("-published_at").first()


def hardware_default() -> HardwareProfile | None:
    wanted = settings.ATREX["DEFAULT_HARDWARE"]
    return (
        HardwareProfile.objects.filter(slug=wanted, enabled=True).first()
        or HardwareProfile.objects.filter(enabled=True).first()
    )


def suite_operators(*, suite: SuiteVersion) -> list[SuiteOperator]:
    """The suite's operators, most important first."""
    return list(suite.suite_operators.select_related("operator").order_by("-importance"))


def suite_version_pick(*, slug: str | None) -> SuiteVersion | None:
    """A published suite version by slug (``name-version``), or the default one."""
    if not slug:
        return suite_version_default()
    return next((s for s in suite_versions_published() if s.slug == slug), None)


def hardware_pick(*, slug: str | None) -> HardwareProfile | None:
    """An enabled hardware profile by slug, or the default one."""
    if not slug:
        return hardware_default()
    return HardwareProfile.objects.filter(slug=slug, enabled=True).first()
