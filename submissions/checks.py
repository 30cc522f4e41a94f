"""Check a bundle without submitting it: every static validation the upload would get,
against the chosen suite and against every published one, with nothing stored, no quota
used and no worker involved. The researcher learns what would be evaluated, what would be
skipped and which suite the bundle fits, before spending a submission."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from django.conf import settings
from django.core.files.uploadedfile import UploadedFile

from catalogue import selectors as catalogue_selectors
from catalogue.models import SuiteVersion
from evaluator.bundle import inspect_bundle
from evaluator.errors import BundleError


@dataclass
class SuiteFit:
    """How much of a bundle one published suite version would evaluate."""

    suite: str
    operators: list[str]  # the bundle's operators that this suite has
    suite_operators: int  # how many operators the suite has


@dataclass
class BundleCheck:
    """The outcome of a check: ``ok`` with the manifest, or the rejection's code and text."""

    ok: bool
    suite: str
    filename: str = ""
    code: str = ""
    detail: str = ""
    operators: dict[str, str] = field(default_factory=dict)  # operator -> file
    missing: list[str] = field(default_factory=list)  # the suite's operators not in it
    warnings: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    fits: list[SuiteFit] = field(default_factory=list)  # best fit first
    best_suite: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _operators_of(version: SuiteVersion) -> list[str]:
    return [op["slug"] for op in version.definition["operators"]]


def _inspect(data: bytes, *, filename: str, known: list[str]):
    return inspect_bundle(
        data,
        filename=filename,
        known_operators=known,
        max_bytes=settings.ATREX["MAX_UPLOAD_BYTES"],
        max_entries=settings.ATREX["MAX_BUNDLE_ENTRIES"],
    )


def bundle_check(*, upload: UploadedFile, suite_version: SuiteVersion | None) -> BundleCheck:
    """Run the upload's static checks against ``suite_version`` (as a submission would;
    default: the board's default suite) and against every published suite version, to say
    which the bundle fits best."""
    suite_version = suite_version or catalogue_selectors.suite_version_default()
    if suite_version is None:
        raise BundleError("No published suite version to check against.", code="bundle:no-suite")
    max_bytes = settings.ATREX["MAX_UPLOAD_BYTES"]
    filename = upload.name or "upload"
    if (upload.size or 0) > max_bytes:
        return BundleCheck(
            ok=False,
            suite=suite_version.slug,
            filename=filename,
            code="bundle:too-large",
            detail=f"The upload is {upload.size:,} bytes; the limit is {max_bytes:,} bytes. "
            "Remove build outputs and data files and upload the sources only.",
        )
    data = b"".join(upload.chunks())
    upload.seek(0)
    known = _operators_of(suite_version)
    try:
        manifest = _inspect(data, filename=filename, known=known)
    except BundleError as error:
        result = BundleCheck(ok=False, suite=suite_version.slug, code=error.code)
        result.detail = error.message
    else:
        result = BundleCheck(
            ok=True,
            suite=suite_version.slug,
            operators=dict(manifest.operators),
            missing=[slug for slug in known if slug not in manifest.operators],
            warnings=list(manifest.warnings),
            files=list(manifest.files),
        )
    fits = []
    published = SuiteVersion.objects.filter(status=SuiteVersion.Status.PUBLISHED).order_by("pk")
    for version in published:
        operators = _operators_of(version)
        try:
            matched = sorted(_inspect(data, filename=filename, known=operators).operators)
        except BundleError:
            matched = []
        fits.append(SuiteFit(version.slug, matched, len(operators)))
    # Most of the bundle evaluated first; then the chosen suite; then the smaller suite.
    fits.sort(key=lambda fit: (-len(fit.operators), fit.suite != suite_version.slug))
    result.fits = fits
    result.filename = filename
    if fits and fits[0].operators:
        result.best_suite = fits[0].suite
    return result
