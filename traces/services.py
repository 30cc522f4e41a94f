"""Writes: applications, trace imports, and suite proposals from trace weights.

A trace upload is stored first (nothing is lost), then read and mapped outside any
transaction; its rows, its unmapped time and its ``imported`` status are written in one
transaction. A trace that cannot be read is marked ``failed`` with the error's code and
message and has no rows. A proposal becomes a draft suite version through
``catalogue.services`` (the only writer of suite versions); publishing it stays the
admin's step, through the draft's diff page.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict
from typing import IO, Any

from django.conf import settings
from django.core.files.base import File
from django.db import transaction
from django.utils import timezone

from catalogue import services as curation
from catalogue.models import Operator, Shape, SuiteVersion
from catalogue.selectors import without_suite_definition
from evaluator.errors import UserError
from evaluator.figures import duration_ms, percent
from evaluator.upstream import builtin_operator_slugs

from . import aggregation, selectors
from .mapping import RuleSet, compile_rules
from .models import Application, Proposal, Trace, TraceRow, UnmappedTime
from .parsing import Limits, ParsedTrace, TraceFormatError, parse_trace
from .proposal import Parameters, plan_proposal
from .work import WorkModelError, shapes_work


class TraceImportError(Exception):
    """An import that was refused; the trace (if stored) says why in its status."""

    def __init__(self, message: str, *, code: str = "trace:invalid", trace: Trace | None = None):
        super().__init__(message)
        self.message = message
        self.code = code
        self.trace = trace


class ProposalError(Exception):
    def __init__(self, message: str, problems: Iterable[str] = ()) -> None:
        self.message = message
        self.problems = list(problems)
        super().__init__(message + "".join(f"\n- {p}" for p in self.problems))


def application_upsert(
    *, name: str, card_hours: float | None, description: str = ""
) -> Application:
    """The application named ``name``, created (card-hours required) or updated."""
    name = (name or "").strip()
    if not name:
        raise TraceImportError("An application name is required.", code="trace:no-application")
    if card_hours is not None and (
        isinstance(card_hours, bool) or not math.isfinite(float(card_hours)) or card_hours < 0
    ):
        raise TraceImportError(
            f"card-hours {card_hours!r} must be a finite number >= 0.", code="trace:card-hours"
        )
    application = Application.objects.filter(name=name).first()
    if application is None:
        if card_hours is None:
            raise TraceImportError(
                f"Application {name!r} does not exist yet: give its card-hours to create it.",
                code="trace:no-application",
            )
        return Application.objects.create(
            name=name, card_hours=float(card_hours), description=description
        )
    changed = []
    if card_hours is not None and application.card_hours != float(card_hours):
        application.card_hours = float(card_hours)
        changed.append("card_hours")
    if description and application.description != description:
        application.description = description
        changed.append("description")
    if changed:
        application.save(update_fields=changed)
    return application


def _limits() -> Limits:
    return Limits(max_bytes=int(settings.ATREX.get("TRACE_MAX_BYTES", 1 << 30)))


def upload_digest(upload: IO[bytes]) -> tuple[str, int]:
    digest = hashlib.sha256()
    size = 0
    upload.seek(0)
    for chunk in iter(lambda: upload.read(1 << 20), b""):
        digest.update(chunk)
        size += len(chunk)
    upload.seek(0)
    return digest.hexdigest(), size


def trace_upload(
    *,
    upload: IO[bytes],
    name: str,
    application: Application | None,
    format: str = "auto",
    notes: str = "",
    rules: RuleSet | None = None,
    actor: Any = None,
) -> Trace:
    """Store an upload and import it (see :func:`trace_import`); returns the trace, which
    is ``imported`` or ``failed`` with the reason (TraceImportError is raised in the latter
    case, carrying the stored trace)."""
    max_upload = int(settings.ATREX.get("TRACE_MAX_UPLOAD_BYTES", 256 << 20))
    sha256, size = upload_digest(upload)
    trace = Trace(
        application=application,
        original_name=name[:255],
        size_bytes=size,
        sha256=sha256,
        format=format,
        provenance={"notes": notes} if notes else {},
        uploaded_by=actor if getattr(actor, "pk", None) else None,
    )
    trace.upload.save(name.rsplit("/", 1)[-1][:200] or "trace", File(upload), save=False)
    trace.save()
    if size > max_upload:
        message = (
            f"{name}: {size / 2**20:.0f} MiB is over the {max_upload / 2**20:.0f} MiB upload "
            "limit; record fewer steps or split the trace."
        )
        _fail(trace, "trace:too-large", message)
        raise TraceImportError(message, code="trace:too-large", trace=trace)
    return trace_import(trace=trace, rules=rules)


def _fail(trace: Trace, code: str, message: str) -> None:
    Trace.objects.filter(pk=trace.pk).update(
        status=Trace.Status.FAILED, error_code=code, error_message=message
    )
    trace.refresh_from_db()


def trace_import(*, trace: Trace, rules: RuleSet | None = None) -> Trace:
    """Read and map a stored trace, then write its rows in one transaction."""
    if trace.status == Trace.Status.IMPORTED:
        return trace
    rules = rules or compile_rules()
    try:
        with trace.upload.open("rb") as stream:
            parsed = parse_trace(
                stream, name=trace.original_name, format=trace.format, rules=rules, limits=_limits()
            )
        _check_operators(parsed, trace)
        applications = _applications(parsed, trace)
    except (TraceFormatError, UserError) as error:
        _fail(trace, error.code, error.message)
        raise TraceImportError(error.message, code=error.code, trace=trace) from None
    except TraceImportError as error:
        _fail(trace, error.code, error.message)
        error.trace = trace
        raise
    _store(trace, parsed, applications, rules)
    return trace


def _check_operators(parsed: ParsedTrace, trace: Trace) -> None:
    known = builtin_operator_slugs() | set(Operator.objects.values_list("slug", flat=True))
    unknown = sorted({row.operator for row in parsed.rows} - known)
    if unknown:
        raise TraceImportError(
            f"{trace.original_name}: unknown operator(s) {', '.join(unknown)}; use the slugs "
            "of the suite's operators (rms_norm, silu_and_mul, ...).",
            code="trace:unknown-operator",
        )


def _applications(parsed: ParsedTrace, trace: Trace) -> dict[str | None, Application]:
    named = {row.application for row in parsed.rows} | {row.application for row in parsed.unmapped}
    names = {name for name in named if name is not None}
    found: dict[str | None, Application] = {
        app.name: app for app in Application.objects.filter(name__in=names)
    }
    missing = sorted(name for name in names if name not in found)
    if missing:
        raise TraceImportError(
            f"{trace.original_name}: application(s) {', '.join(missing)} do not exist; create "
            "them with their card-hours first.",
            code="trace:no-application",
        )
    result = dict(found)
    if None in named:
        if trace.application is None:
            raise TraceImportError(
                f"{trace.original_name}: choose the application the trace belongs to.",
                code="trace:no-application",
            )
        result[None] = trace.application
    return result


@transaction.atomic
def _store(
    trace: Trace,
    parsed: ParsedTrace,
    applications: Mapping[str | None, Application],
    rules: RuleSet,
) -> None:
    TraceRow.objects.bulk_create(
        TraceRow(
            trace=trace,
            application=applications[row.application],
            operator=row.operator,
            init_kwargs=row.init_kwargs,
            input_kwargs=row.input_kwargs,
            shape_key=row.shape_key,
            calls=row.calls,
            time_us=row.time_us,
            sources=sorted(row.sources),
            note=row.note,
        )
        for row in parsed.rows
    )
    UnmappedTime.objects.bulk_create(
        UnmappedTime(
            trace=trace,
            application=applications[row.application],
            name=row.name[:255],
            reason=row.reason,
            calls=row.calls,
            time_us=row.time_us,
        )
        for row in parsed.unmapped
    )
    provenance = dict(trace.provenance)
    provenance.update(parsed.metadata)
    Trace.objects.filter(pk=trace.pk).update(
        status=Trace.Status.IMPORTED,
        error_code="",
        error_message="",
        format=parsed.format,
        time_basis=parsed.time_basis,
        total_time_us=parsed.total_time_us,
        mapped_time_us=parsed.mapped_time_us,
        provenance=provenance,
        rules=rules.table() if parsed.format == "kineto" else [],
        imported_at=timezone.now(),
    )
    trace.refresh_from_db()


# --------------------------------------------------------------------------- proposals


def proposal_create(
    *,
    base: SuiteVersion,
    traces: Sequence[Trace],
    version_label: str,
    parameters: Parameters,
    actor: Any = None,
) -> Proposal:
    """A draft of ``base`` re-weighted (and extended) from the traces' weights.

    New shapes get W/Q from the evaluator's work models (child process); a shape whose
    kwargs the work model rejects is left out and listed in the summary. Nothing is
    written when the proposal is refused.
    """
    problems = parameters.problems()
    traces = [t for t in traces if t.status == Trace.Status.IMPORTED]
    if not traces:
        problems.append("choose at least one imported trace")
    if problems:
        raise ProposalError("The proposal cannot be made.", problems)
    frame = selectors.trace_frame(traces=traces)
    weights = aggregation.shape_weights(frame, selectors.card_hours(traces=traces))
    base_shapes = list(
        base.shapes.filter(enabled=True, smoke=False)
        .select_related("operator")
        .values("operator__slug", "shape_id", "init_kwargs", "input_kwargs")
    )
    base_importance = {
        row.operator.slug: row.importance
        for row in base.suite_operators.filter(enabled=True).select_related("operator")
    }
    plan = plan_proposal(
        weights=weights.to_dict("records"),
        base_shapes=[
            {
                "operator": s["operator__slug"],
                "shape_id": s["shape_id"],
                "init_kwargs": s["init_kwargs"],
                "input_kwargs": s["input_kwargs"],
            }
            for s in base_shapes
        ],
        base_importance=base_importance,
        parameters=parameters,
    )
    if not plan.reweighted and not plan.added:
        raise ProposalError(
            "The traces map no time to an operator of "
            f"{base.slug}"
            + (f" (they map {', '.join(plan.not_in_base)})" if plan.not_in_base else "")
            + "."
        )
    try:
        work = shapes_work(
            [
                {
                    "operator": c.operator,
                    "init_kwargs": c.init_kwargs,
                    "input_kwargs": c.input_kwargs,
                }
                for c in plan.added
            ]
        )
    except WorkModelError as error:
        raise ProposalError("W/Q of the new shapes could not be computed.", [str(error)]) from None
    summary = plan.summary()
    summary["skipped"] = []
    trace_ids = ", ".join(f"#{t.pk}" for t in traces)
    with transaction.atomic():
        try:
            draft = curation.suite_version_draft_create(
                from_version=base,
                version_label=version_label,
                description=(
                    f"{base.description}\n\nTrace-driven weights from traces {trace_ids} "
                    f"(coverage {percent(parameters.coverage)}, snap tolerance "
                    f"{percent(parameters.snap_tolerance)}, unobserved operators "
                    f"{parameters.unobserved})."
                ).strip(),
            )
        except curation.CurationError as error:
            raise ProposalError(error.message, error.problems) from None
        # Looked up by (operator, base shape id); a re-weighted cluster always has its base's.
        shapes: dict[tuple[str, str | None], Shape] = {
            (row.operator.slug, row.shape_id): row
            for row in without_suite_definition(
                draft.shapes.select_related("operator", "suite_version")
            )
        }
        for cluster in plan.reweighted:
            curation.shape_update(
                shape=shapes[(cluster.operator, cluster.base_shape_id)],
                weight=_round(cluster.weight),
                enabled=True,
            )
        for operator, shape_id in plan.disabled:
            curation.shape_update(shape=shapes[(operator, shape_id)], enabled=False)
        added = summary["added"]
        numbers = _next_ids(draft)
        for index, (cluster, figures) in enumerate(zip(plan.added, work, strict=True)):
            if "error" in figures:
                summary["skipped"].append({**added[index], "reason": figures["error"]})
                added[index]["shape_id"] = None
                continue
            shape_id = numbers(cluster.operator)
            curation.shape_add(
                draft=draft,
                operator=cluster.operator,
                shape_id=shape_id,
                init_kwargs=cluster.init_kwargs,
                input_kwargs=cluster.input_kwargs,
                w_flops=figures["w_flops"],
                q_read=figures["q_read"],
                q_write=figures["q_write"],
                weight=_round(cluster.weight),
                source=f"trace {trace_ids}",
                description=(
                    f"from production traces {trace_ids} "
                    f"({', '.join(sorted(cluster.applications))}): {cluster.calls} calls, "
                    f"{duration_ms(cluster.time_us / 1e3)} GPU time, "
                    f"{_round(cluster.weight)} card-hours"
                ),
            )
            added[index]["shape_id"] = shape_id
        summary["added"] = [item for item in added if item["shape_id"] is not None]
        for row in without_suite_definition(
            draft.suite_operators.select_related("operator", "suite_version")
        ):
            slug = row.operator.slug
            if slug in plan.importance:
                curation.operator_update(suite_operator=row, importance=plan.importance[slug])
            elif slug in plan.disabled_operators:
                curation.operator_update(suite_operator=row, enabled=False)
        proposal = Proposal.objects.create(
            draft=draft,
            base=base,
            parameters=asdict(parameters),
            summary=summary,
            created_by=actor if getattr(actor, "pk", None) else None,
        )
        proposal.traces.set(traces)
    return proposal


def _round(value: float) -> float:
    return float(f"{value:.6g}")


def _next_ids(draft: SuiteVersion) -> Callable[[str], str]:
    """Shape ids for new shapes of an operator: "t1", "t2", ... after any already there."""
    taken = set(Shape.objects.filter(suite_version=draft).values_list("operator__slug", "shape_id"))
    counters: dict[str, int] = {}

    def next_id(operator: str) -> str:
        n = counters.get(operator, 0)
        while True:
            n += 1
            if (operator, f"t{n}") not in taken:
                counters[operator] = n
                return f"t{n}"

    return next_id
