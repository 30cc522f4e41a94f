"""Writes to the suite catalogue, and the curation rules.

Curation: an admin copies a published suite version into a draft, edits the draft's
operators and shapes (or adds an operator uploaded in the upstream format), looks at the
diff against its parent and publishes it. Publishing rebuilds the draft's suite file from
its rows, validates it (``evaluator.suite`` invariants plus the evaluator's
``validate-suite`` command in a child process) and freezes it. A published version is
immutable: every service here refuses to change its rows or its definition.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from django.db import transaction
from django.utils import timezone

from evaluator.errors import UserError
from evaluator.hardware import DTYPE_TO_PATH, PATHS, PROFILES
from evaluator.suite import VISIBILITIES, OperatorEntry, ShapeSpec, Suite
from evaluator.upstream import (
    ReleaseImport,
    UpstreamOperator,
    builtin_operator_slugs,
    suite_definition,
    version_content_hash,
)

from .models import HardwareProfile, Operator, Shape, SuiteOperator, SuiteVersion
from .suite_check import suite_definition_check


class CurationError(Exception):
    """A curation request that breaks a rule; ``problems`` lists each one in plain words."""

    def __init__(self, message: str, problems: Iterable[str] = ()) -> None:
        self.message = message
        self.problems = list(problems)
        super().__init__(message + ("".join(f"\n- {p}" for p in self.problems)))


class SuiteVersionImmutableError(CurationError):
    """An attempt to change a published suite version."""


def _shape_row(version: SuiteVersion, operator: Operator, shape: ShapeSpec) -> Shape:
    """An unsaved Shape row of ``version`` holding one ShapeSpec."""
    return Shape(
        suite_version=version,
        operator=operator,
        shape_id=shape.shape_id,
        init_kwargs=shape.init_kwargs,
        input_kwargs=shape.input_kwargs,
        weight=shape.weight,
        w_flops=shape.w_flops,
        q_read=shape.q_read,
        q_write=shape.q_write,
        visibility=shape.visibility,
        smoke=shape.smoke,
        source=shape.source,
        description=shape.description,
    )


def hardware_profiles_sync() -> list[HardwareProfile]:
    """Create or update the built-in hardware profiles from ``evaluator.hardware``."""
    rows = []
    for profile in PROFILES.values():
        row, _ = HardwareProfile.objects.update_or_create(
            slug=profile.slug,
            defaults={
                "name": profile.name,
                "device_kind": profile.device_kind,
                "peak_flops": dict(profile.peak_flops),
                "hbm_bytes_per_s": profile.hbm_bytes_per_s,
                "source": profile.source,
                "notes": profile.notes,
            },
        )
        rows.append(row)
    return rows


# --------------------------------------------------------------------------- import


def _suite_version_create(
    *,
    suite: Suite,
    sources: Mapping[str, Mapping[str, str]] | None,
    publish: bool,
    parent: SuiteVersion | None = None,
    actor: Any = None,
) -> SuiteVersion:
    sources = {slug: dict(files) for slug, files in (sources or {}).items() if files}
    if SuiteVersion.objects.filter(name=suite.name, version=suite.version).exists():
        raise CurationError(
            f"Suite version {suite.slug} already exists; choose another version label."
        )
    version = SuiteVersion.objects.create(
        name=suite.name,
        version=suite.version,
        description=suite.description,
        content_hash=(
            version_content_hash(suite, sources) if publish else f"draft:{uuid.uuid4().hex}"
        ),
        definition=suite_definition(suite, sources),
        threshold_own_share=suite.threshold_own_share,
        status=SuiteVersion.Status.PUBLISHED if publish else SuiteVersion.Status.DRAFT,
        published_at=timezone.now() if publish else None,
        published_by=actor if publish else None,
        parent=parent,
    )
    operators = {}
    for entry in suite.operators:
        operator, _ = Operator.objects.get_or_create(
            slug=entry.slug,
            defaults={
                "atrex_id": entry.atrex_id,
                "description": entry.description,
                "dtype": entry.dtype,
                "phase": entry.phase,
            },
        )
        operators[entry.slug] = operator
        SuiteOperator.objects.create(
            suite_version=version,
            operator=operator,
            importance=entry.importance,
            importance_raw=entry.importance_raw,
            description=entry.description,
            sources=sources.get(entry.slug, {}),
        )
    Shape.objects.bulk_create(
        _shape_row(version, operators[shape.operator], shape) for shape in suite.shapes
    )
    return version


@transaction.atomic
def suite_version_import(
    *,
    suite: Suite,
    publish: bool = True,
    sources: Mapping[str, Mapping[str, str]] | None = None,
) -> SuiteVersion:
    """Store a suite file as a suite version (idempotent on its content hash).

    The stored ``definition`` is exactly what the evaluator runs (plus the sources of
    operators it does not implement, see ``evaluator.upstream``); the operator and shape
    rows are a browsable copy. An existing version with the same hash is returned as is.
    """
    suite.validate()
    existing = SuiteVersion.objects.filter(
        content_hash=version_content_hash(suite, sources)
    ).first()
    if existing is not None:
        return existing
    return _suite_version_create(suite=suite, sources=sources, publish=publish)


@transaction.atomic
def suite_version_import_release(
    *, release: ReleaseImport, publish: bool = False, actor: Any = None
) -> SuiteVersion:
    """Store a suite read from an upstream ``data/`` directory as a draft, or publish it.

    Publishing goes through :func:`suite_version_publish` (full validation); a refusal
    rolls the whole import back, so nothing is left half-imported.
    """
    try:
        release.suite.validate()
    except UserError as error:
        raise CurationError("The imported suite is invalid.", [error.message]) from error
    draft = _suite_version_create(suite=release.suite, sources=release.sources, publish=False)
    if publish:
        return suite_version_publish(draft=draft, actor=actor)
    return draft


# --------------------------------------------------------------------------- drafts


def _require_draft(version: SuiteVersion) -> None:
    """Refuse any change to a published version (status read from the database)."""
    status = SuiteVersion.objects.filter(pk=version.pk).values_list("status", flat=True).first()
    if status != SuiteVersion.Status.DRAFT:
        raise SuiteVersionImmutableError(
            f"Suite version {version.slug} is published and immutable; create a draft from "
            "it and edit the draft instead."
        )


@transaction.atomic
def suite_version_draft_create(
    *, from_version: SuiteVersion, version_label: str, description: str | None = None
) -> SuiteVersion:
    """A draft named like ``from_version`` with version ``version_label``, copying its
    operators (importance, enabled, description, sources) and shapes (all fields)."""
    label = (version_label or "").strip()
    if not label or any(ch.isspace() for ch in label) or len(label) > 40:
        raise CurationError(
            f"Version label {version_label!r} must be 1-40 characters without spaces."
        )
    if SuiteVersion.objects.filter(name=from_version.name, version=label).exists():
        raise CurationError(
            f"Suite version {from_version.name}-{label} already exists; choose another label."
        )
    draft = SuiteVersion.objects.create(
        name=from_version.name,
        version=label,
        description=from_version.description if description is None else description,
        content_hash=f"draft:{uuid.uuid4().hex}",
        definition=from_version.definition,
        threshold_own_share=from_version.threshold_own_share,
        status=SuiteVersion.Status.DRAFT,
        parent=from_version,
    )
    SuiteOperator.objects.bulk_create(
        SuiteOperator(
            suite_version=draft,
            operator_id=row.operator_id,
            importance=row.importance,
            importance_raw=row.importance_raw,
            enabled=row.enabled,
            description=row.description,
            sources=row.sources,
        )
        for row in from_version.suite_operators.all()
    )
    Shape.objects.bulk_create(
        Shape(
            suite_version=draft,
            operator_id=row.operator_id,
            shape_id=row.shape_id,
            init_kwargs=row.init_kwargs,
            input_kwargs=row.input_kwargs,
            weight=row.weight,
            w_flops=row.w_flops,
            q_read=row.q_read,
            q_write=row.q_write,
            visibility=row.visibility,
            smoke=row.smoke,
            enabled=row.enabled,
            source=row.source,
            description=row.description,
        )
        for row in from_version.shapes.all()
    )
    return draft


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _shape_problems(fields: Mapping[str, Any]) -> list[str]:
    """Rule violations among shape fields (only the fields given are checked)."""
    problems = []
    if "weight" in fields:
        weight = fields["weight"]
        if (
            isinstance(weight, bool)
            or not isinstance(weight, int | float)
            or not math.isfinite(weight)
            or weight < 0
        ):
            problems.append(f"weight {weight!r} must be a finite number >= 0")
    if "visibility" in fields and fields["visibility"] not in VISIBILITIES:
        problems.append(
            f"visibility {fields['visibility']!r} must be one of {', '.join(VISIBILITIES)}"
        )
    for key in ("init_kwargs", "input_kwargs"):
        if key in fields and not isinstance(fields[key], dict):
            problems.append(f"{key} must be a JSON object")
    if "w_flops" in fields:
        w_flops = fields["w_flops"]
        if not isinstance(w_flops, dict):
            problems.append("w_flops (W) must be an object {dtype: FLOPs}")
        else:
            for dtype, flops in w_flops.items():
                if dtype not in DTYPE_TO_PATH:
                    problems.append(
                        f"W dtype {dtype!r} is unknown; known: {', '.join(DTYPE_TO_PATH)}"
                    )
                elif not _is_count(flops):
                    problems.append(f"W[{dtype!r}] = {flops!r} must be a whole number >= 0")
    for key in ("q_read", "q_write"):
        if key in fields and not _is_count(fields[key]):
            problems.append(f"{key} (Q) = {fields[key]!r} must be a whole number of bytes >= 0")
    for key in ("enabled", "smoke"):
        if key in fields and not isinstance(fields[key], bool):
            problems.append(f"{key} must be true or false")
    return problems


SHAPE_EDITABLE = (
    "init_kwargs",
    "input_kwargs",
    "weight",
    "w_flops",
    "q_read",
    "q_write",
    "visibility",
    "smoke",
    "enabled",
    "source",
    "description",
)


@transaction.atomic
def shape_add(
    *,
    draft: SuiteVersion,
    operator: Operator | str,
    shape_id: str,
    input_kwargs: dict[str, Any],
    w_flops: dict[str, int] | None,
    q_read: int | None,
    q_write: int | None,
    init_kwargs: dict[str, Any] | None = None,
    weight: float = 1.0,
    visibility: str = Shape.Visibility.PUBLIC,
    smoke: bool = False,
    enabled: bool = True,
    source: str = "admin",
    description: str = "",
) -> Shape:
    """Add a shape to a draft; W/Q are required (a shape without them cannot be scored)."""
    _require_draft(draft)
    slug = operator if isinstance(operator, str) else operator.slug
    where = f"Shape {slug}/{shape_id}"
    row = draft.suite_operators.filter(operator__slug=slug).select_related("operator").first()
    if row is None:
        raise CurationError(f"{where}: operator {slug!r} is not in {draft.slug}.")
    problems = []
    if w_flops is None or q_read is None or q_write is None:
        problems.append("W (w_flops) and Q (q_read, q_write) are required")
    fields = {
        "init_kwargs": init_kwargs if init_kwargs is not None else {},
        "input_kwargs": input_kwargs,
        "weight": weight,
        "visibility": visibility,
        "smoke": smoke,
        "enabled": enabled,
    }
    fields.update(
        {
            k: v
            for k, v in (("w_flops", w_flops), ("q_read", q_read), ("q_write", q_write))
            if v is not None
        }
    )
    problems += _shape_problems(fields)
    shape_id = str(shape_id).strip()
    if not shape_id:
        problems.append("shape_id must not be empty")
    elif draft.shapes.filter(operator=row.operator, shape_id=shape_id).exists():
        problems.append(f"shape id {shape_id!r} already exists for {slug}")
    if problems:
        raise CurationError(f"{where} cannot be added.", problems)
    return Shape.objects.create(
        suite_version=draft,
        operator=row.operator,
        shape_id=shape_id,
        source=source,
        description=description,
        **fields,
    )


@transaction.atomic
def shape_update(*, shape: Shape, **fields: Any) -> Shape:
    """Change a draft's shape (kwargs, weight, W/Q, visibility public/hidden, enabled, ...)."""
    _require_draft(shape.suite_version)
    where = f"Shape {shape.operator.slug}/{shape.shape_id}"
    unknown = sorted(set(fields) - set(SHAPE_EDITABLE))
    if unknown:
        raise CurationError(f"{where}: these fields cannot be edited: {', '.join(unknown)}.")
    problems = _shape_problems(fields)
    if problems:
        raise CurationError(f"{where} was not changed.", problems)
    for key, value in fields.items():
        setattr(shape, key, value)
    shape.save(update_fields=list(fields) or None)
    return shape


@transaction.atomic
def shape_delete(*, shape: Shape) -> None:
    """Remove a shape from a draft (use ``enabled=False`` to keep it for later)."""
    _require_draft(shape.suite_version)
    shape.delete()


@transaction.atomic
def operator_update(
    *,
    suite_operator: SuiteOperator,
    enabled: bool | None = None,
    description: str | None = None,
    importance: float | None = None,
) -> SuiteOperator:
    """Enable or disable a draft's operator, or change its description or importance.

    Importance is relative: the draft's enabled operators are renormalised to sum to 1
    when it is published.
    """
    _require_draft(suite_operator.suite_version)
    where = f"Operator {suite_operator.operator.slug}"
    changed = []
    if importance is not None:
        if (
            isinstance(importance, bool)
            or not isinstance(importance, int | float)
            or not math.isfinite(importance)
            or importance < 0
        ):
            raise CurationError(f"{where}: importance {importance!r} must be a finite number >= 0.")
        suite_operator.importance = float(importance)
        changed.append("importance")
    if enabled is not None:
        suite_operator.enabled = bool(enabled)
        changed.append("enabled")
    if description is not None:
        suite_operator.description = str(description)
        changed.append("description")
    if changed:
        suite_operator.save(update_fields=changed)
    return suite_operator


@transaction.atomic
def suite_version_update(*, draft: SuiteVersion, description: str | None = None) -> SuiteVersion:
    """Change a draft's description (the only free-text field of a version)."""
    _require_draft(draft)
    if description is not None:
        draft.description = description
        draft.save(update_fields=["description"])
    return draft


@transaction.atomic
def operator_upload_add(
    *, draft: SuiteVersion, upload: UpstreamOperator, importance: float | None = None
) -> SuiteOperator:
    """Add an operator read from an upstream-format upload (sources, shapes, W/Q) to a draft.

    Built-in operators cannot be replaced by an upload (the evaluator always runs its own
    reference for them); an operator already in the draft must be removed first.
    """
    _require_draft(draft)
    slug = upload.slug
    if slug in builtin_operator_slugs():
        raise CurationError(
            f"Operator {slug!r} is built into the evaluator; an upload cannot replace "
            "its reference."
        )
    if draft.suite_operators.filter(operator__slug=slug).exists():
        raise CurationError(f"Operator {slug!r} is already in {draft.slug}.")
    operator, _ = Operator.objects.get_or_create(
        slug=slug,
        defaults={
            "atrex_id": upload.entry.atrex_id,
            "description": upload.entry.description,
            "dtype": upload.entry.dtype,
            "phase": upload.entry.phase,
        },
    )
    if operator.dtype != upload.entry.dtype:
        raise CurationError(
            f"Operator {slug!r} exists with dtype {operator.dtype!r}; the upload says "
            f"{upload.entry.dtype!r}."
        )
    row = SuiteOperator.objects.create(
        suite_version=draft,
        operator=operator,
        importance=upload.entry.importance_raw if importance is None else importance,
        importance_raw=upload.entry.importance_raw,
        description=upload.entry.description,
        sources=dict(upload.sources),
    )
    Shape.objects.bulk_create(_shape_row(draft, operator, shape) for shape in upload.shapes)
    return row


# --------------------------------------------------------------------------- build, diff


def _id_order(shape_id: str) -> tuple[int, str]:
    return (int(shape_id), "") if shape_id.isdigit() else (1 << 62, shape_id)


def _effective_operators(version: SuiteVersion) -> list[SuiteOperator]:
    """Enabled operators, in slug order, with ``effective_importance`` (normalised)."""
    rows = list(
        version.suite_operators.filter(enabled=True)
        .select_related("operator")
        .order_by("operator__slug")
    )
    total = math.fsum(row.importance for row in rows)
    for row in rows:
        row.effective_importance = row.importance / total if total > 0 else 0.0
    return rows


def _effective_shapes(version: SuiteVersion, slugs: set[str]) -> list[Shape]:
    rows = [
        row
        for row in version.shapes.filter(enabled=True).select_related("operator")
        if row.operator.slug in slugs
    ]
    return sorted(rows, key=lambda row: (row.operator.slug, _id_order(row.shape_id)))


def suite_version_build(*, version: SuiteVersion) -> tuple[Suite, dict[str, dict[str, str]]]:
    """The suite (and operator sources) that ``version``'s enabled rows describe.

    Disabled operators and shapes are left out; importance is renormalised to sum to 1
    over the enabled operators. CurationError when the rows cannot form a suite.
    """
    operators = _effective_operators(version)
    if not operators:
        raise CurationError(f"{version.slug} has no enabled operator.")
    if math.fsum(row.importance for row in operators) <= 0:
        raise CurationError(f"{version.slug}: the enabled operators' importance sums to 0.")
    entries = [
        OperatorEntry(
            slug=row.operator.slug,
            atrex_id=row.operator.atrex_id,
            importance=row.effective_importance,
            importance_raw=row.importance_raw,
            dtype=row.operator.dtype,
            phase=row.operator.phase,
            description=row.description,
        )
        for row in operators
    ]
    shapes = [
        ShapeSpec(
            operator=row.operator.slug,
            shape_id=row.shape_id,
            init_kwargs=row.init_kwargs or {},
            input_kwargs=row.input_kwargs,
            weight=row.weight,
            w_flops=row.w_flops,
            q_read=row.q_read,
            q_write=row.q_write,
            visibility=row.visibility,
            smoke=row.smoke,
            source=row.source,
            description=row.description,
        )
        for row in _effective_shapes(version, {row.operator.slug for row in operators})
    ]
    suite = Suite(
        name=version.name,
        version=version.version,
        description=version.description,
        threshold_own_share=version.threshold_own_share,
        operators=tuple(entries),
        shapes=tuple(shapes),
    )
    sources = {row.operator.slug: dict(row.sources) for row in operators if row.sources}
    return suite, sources


SHAPE_COMPARED = (
    "init_kwargs",
    "input_kwargs",
    "weight",
    "w_flops",
    "q_read",
    "q_write",
    "visibility",
    "smoke",
    "source",
    "description",
)


def suite_version_diff(*, draft: SuiteVersion, against: SuiteVersion) -> dict[str, Any]:
    """What publishing ``draft`` changes relative to ``against`` (enabled rows only).

    ``{"draft", "against", "operators": {"added", "removed", "changed": [{"operator",
    "changes": {field: [old, new]}}]}, "shapes": {"added", "removed", "changed":
    [{"operator", "shape_id", "changes"}]}, "summary": {...}}``; operator importance is
    compared normalised (as it will be published); disabled rows count as removed.
    """
    old_ops = {row.operator.slug: row for row in _effective_operators(against)}
    new_ops = {row.operator.slug: row for row in _effective_operators(draft)}
    operators_changed = []
    for slug in sorted(set(old_ops) & set(new_ops)):
        old, new = old_ops[slug], new_ops[slug]
        changes: dict[str, list[Any]] = {}
        if not math.isclose(
            old.effective_importance, new.effective_importance, rel_tol=1e-12, abs_tol=1e-15
        ):
            changes["importance"] = [old.effective_importance, new.effective_importance]
        if old.description != new.description:
            changes["description"] = [old.description, new.description]
        if old.sources != new.sources:
            changes["sources"] = [sorted(old.sources), sorted(new.sources)]
        if changes:
            operators_changed.append({"operator": slug, "changes": changes})
    old_shapes = {
        (r.operator.slug, r.shape_id): r for r in _effective_shapes(against, set(old_ops))
    }
    new_shapes = {(r.operator.slug, r.shape_id): r for r in _effective_shapes(draft, set(new_ops))}

    def key_order(key: tuple[str, str]) -> tuple[str, tuple[int, str]]:
        return key[0], _id_order(key[1])

    shapes_changed = []
    for key in sorted(set(old_shapes) & set(new_shapes), key=key_order):
        old_shape, new_shape = old_shapes[key], new_shapes[key]
        changes = {
            field: [getattr(old_shape, field), getattr(new_shape, field)]
            for field in SHAPE_COMPARED
            if getattr(old_shape, field) != getattr(new_shape, field)
        }
        if changes:
            shapes_changed.append({"operator": key[0], "shape_id": key[1], "changes": changes})

    def listed(keys: Iterable[tuple[str, str]]) -> list[dict[str, str]]:
        return [{"operator": op, "shape_id": sid} for op, sid in sorted(keys, key=key_order)]

    diff: dict[str, Any] = {
        "draft": draft.slug,
        "against": against.slug,
        "operators": {
            "added": sorted(set(new_ops) - set(old_ops)),
            "removed": sorted(set(old_ops) - set(new_ops)),
            "changed": operators_changed,
        },
        "shapes": {
            "added": listed(set(new_shapes) - set(old_shapes)),
            "removed": listed(set(old_shapes) - set(new_shapes)),
            "changed": shapes_changed,
        },
    }
    diff["summary"] = {
        "operators_added": len(diff["operators"]["added"]),
        "operators_removed": len(diff["operators"]["removed"]),
        "operators_changed": len(operators_changed),
        "shapes_added": len(diff["shapes"]["added"]),
        "shapes_removed": len(diff["shapes"]["removed"]),
        "shapes_changed": len(shapes_changed),
        "weights_changed": sum("weight" in item["changes"] for item in shapes_changed),
    }
    return diff


# --------------------------------------------------------------------------- publish


def suite_version_check(
    *, version: SuiteVersion
) -> tuple[Suite, dict[str, dict[str, str]], list[str]]:
    """Build ``version``'s suite and list every problem that would stop it being published."""
    suite, sources = suite_version_build(version=version)
    problems: list[str] = []
    try:
        suite.validate()
    except UserError as error:
        problems.append(error.message)
    enabled = {slug for slug in suite.operator_slugs()}
    builtin = builtin_operator_slugs()
    for slug in sorted(enabled - builtin - set(sources)):
        problems.append(
            f"operator {slug!r} is not built into the evaluator and has no uploaded sources"
        )
    for shape in suite.shapes:
        if shape.weight < 0:
            problems.append(f"{shape.operator}/{shape.shape_id}: weight {shape.weight} is below 0")
    if not problems:
        check = suite_definition_check(definition=suite_definition(suite, sources))
        problems.extend(check.problems)
    return suite, sources, problems


def suite_version_publish(*, draft: SuiteVersion, actor: Any) -> SuiteVersion:
    """Validate a draft and freeze it: definition rebuilt from its rows, hash recomputed.

    Refuses (CurationError listing each problem) when the suite is invalid, when the
    evaluator's ``validate-suite`` rejects a shape (kwargs the reference refuses, ...), or
    when a version with the same content already exists. Rows of the published version
    then carry the normalised importance that its definition holds.

    The check, which runs the evaluator in a child process for seconds, holds no
    transaction: on SQLite a write transaction is the whole database's lock, and the
    worker's heartbeats and the reaper must go on meanwhile. The short transaction that
    publishes then rebuilds the draft under its row lock and refuses if its content changed
    since it was checked.
    """
    draft = SuiteVersion.objects.get(pk=draft.pk)
    _require_draft(draft)
    suite, sources, problems = suite_version_check(version=draft)
    if problems:
        raise CurationError(f"{draft.slug} cannot be published.", problems)
    checked_hash = version_content_hash(suite, sources)
    with transaction.atomic():
        draft = SuiteVersion.objects.select_for_update().get(pk=draft.pk)
        _require_draft(draft)
        suite, sources = suite_version_build(version=draft)
        content_hash = version_content_hash(suite, sources)
        if content_hash != checked_hash:
            raise CurationError(
                f"{draft.slug} was edited while it was being checked; publish it again to "
                "check what it holds now."
            )
        twin = SuiteVersion.objects.filter(content_hash=content_hash).exclude(pk=draft.pk).first()
        if twin is not None:
            raise CurationError(
                f"{draft.slug} cannot be published: its content is identical to {twin.slug}."
            )
        normalised = suite.importance()
        for row in draft.suite_operators.filter(enabled=True).select_related("operator"):
            row.importance = normalised[row.operator.slug]
            row.save(update_fields=["importance"])
        draft.definition = suite_definition(suite, sources)
        draft.content_hash = content_hash
        draft.status = SuiteVersion.Status.PUBLISHED
        draft.published_at = timezone.now()
        draft.published_by = actor if getattr(actor, "pk", None) else None
        draft.save(
            update_fields=["definition", "content_hash", "status", "published_at", "published_by"]
        )
    return draft


# --------------------------------------------------------------------------- hardware


def _hardware_problems(fields: Mapping[str, Any]) -> list[str]:
    problems = []
    if "peak_flops" in fields:
        peaks = fields["peak_flops"]
        if not isinstance(peaks, dict) or not peaks:
            problems.append("peak_flops must be a non-empty object {path: FLOP/s}")
        else:
            for path, value in peaks.items():
                if path not in PATHS:
                    problems.append(
                        f"peak_flops path {path!r} is unknown; known: {', '.join(PATHS)}"
                    )
                elif (
                    isinstance(value, bool)
                    or not isinstance(value, int | float)
                    or not value > 0
                    or not math.isfinite(value)
                ):
                    problems.append(f"peak_flops[{path!r}] = {value!r} must be a number > 0")
    if "hbm_bytes_per_s" in fields:
        value = fields["hbm_bytes_per_s"]
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not value > 0
            or not math.isfinite(value)
        ):
            problems.append(f"hbm_bytes_per_s {value!r} must be a number > 0")
    if "source" in fields and not str(fields["source"]).strip():
        problems.append("source must say where the figures come from")
    return problems


HARDWARE_EDITABLE = ("name", "peak_flops", "hbm_bytes_per_s", "source", "notes", "enabled")


def hardware_profile_update(*, profile: HardwareProfile, **fields: Any) -> HardwareProfile:
    """Change a hardware profile's peaks, bandwidth, source, notes or availability.

    Scores already published keep the figures they were computed with (results store
    T_sol per shape); new evaluations use the new figures.
    """
    unknown = sorted(set(fields) - set(HARDWARE_EDITABLE))
    if unknown:
        raise CurationError(
            f"Hardware {profile.slug}: these fields cannot be edited: {', '.join(unknown)}."
        )
    problems = _hardware_problems(fields)
    if problems:
        raise CurationError(f"Hardware {profile.slug} was not changed.", problems)
    for key, value in fields.items():
        setattr(profile, key, value)
    profile.save(update_fields=list(fields) or None)
    return profile
