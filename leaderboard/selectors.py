"""Reads for the board and the catalogue. One ranking query serves the pages and the API."""

from __future__ import annotations

from django.conf import settings
from django.db.models import QuerySet

from .models import HardwareProfile, Score, SuiteOperator, SuiteVersion


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


def leaderboard_rows(*, suite: SuiteVersion, hardware: HardwareProfile) -> QuerySet[Score]:
    """Published, public scores for one (suite version, hardware), best first."""
    return (
        Score.objects.filter(
            suite_version=suite,
            hardware=hardware,
            submission__visibility="public",
            submission__status="published",
        )
        .select_related("submission", "submission__owner")
        .order_by("-aggregate", "published_at")
    )


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
