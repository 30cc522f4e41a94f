"""Reads of the suite catalogue: published suite versions, hardware profiles, defaults."""

from __future__ import annotations

from typing import TypeVar

from django.conf import settings
from django.db.models import Model, QuerySet

from .models import HardwareProfile, Shape, SuiteOperator, SuiteVersion

_Row = TypeVar("_Row", bound=Model)


def without_suite_definition(
    rows: QuerySet[_Row], *, through: str = "suite_version"
) -> QuerySet[_Row]:
    """``rows`` with the suite version they join (``through``) read without its definition:
    the whole suite as JSON (380 KB for v1, 3.4 ms to decode), decoded once a row where a
    list shows only the version's name. Decoded once a row it made a page of 200 v1
    submissions take 1.7-1.9 s (34-48 ms without), v1's admin page 4.9 s (1.3 s) and a v1
    trace proposal 7.2 s (3.6 s); a row that does read it loads it then."""
    return rows.defer(f"{through}__definition")


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


def _shape_id_order(shape: Shape) -> tuple[int, str]:
    return (int(shape.shape_id), "") if shape.shape_id.isdigit() else (1 << 62, shape.shape_id)


def suite_version_shapes(*, suite_version_id: int) -> list[Shape]:
    """Every shape of a suite version with its operator, by operator then shape id ("2"
    before "10"), the version itself not read."""
    rows = (
        Shape.objects.filter(suite_version_id=suite_version_id)
        .select_related("operator")
        .defer("init_kwargs", "input_kwargs", "w_flops", "description")
    )
    return sorted(rows, key=lambda shape: (shape.operator.slug, _shape_id_order(shape)))


def operator_public_shapes(*, suite: SuiteVersion, operator: str, smoke: bool) -> list[Shape]:
    """The public, enabled shapes of ``operator`` in ``suite`` of one shape set (``smoke``:
    the CPU set), in shape-id order ("2" before "10"). Hidden shapes are scored but never
    listed; when the set has none, the other set's public shapes."""
    rows = list(
        Shape.objects.filter(
            suite_version=suite,
            operator__slug=operator,
            visibility=Shape.Visibility.PUBLIC,
            enabled=True,
        )
    )
    chosen = [row for row in rows if row.smoke == smoke] or rows
    return sorted(chosen, key=_shape_id_order)


def suite_operator(*, suite: SuiteVersion, operator: str) -> SuiteOperator | None:
    """The suite's entry for ``operator`` (importance, description, uploaded sources)."""
    return suite.suite_operators.select_related("operator").filter(operator__slug=operator).first()
