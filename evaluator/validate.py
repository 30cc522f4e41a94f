"""Check a (draft) suite against the built-in operators: ``validate_suite(suite)``.

The web admin edits shapes without torch; it runs ``python -m evaluator validate-suite``
on a draft in a child process, which calls this module. Beyond the suite's own
invariants (``Suite.problems``), every shape of a built-in operator is checked against
the operator itself: ``Model(**init_kwargs)`` is constructed, the inputs are drawn with
``make_inputs(**input_kwargs)`` on the ``meta`` device (shapes only, no memory), and the
work model's W/Q is compared with the suite's figures.

Errors make the suite unusable (a kwarg the reference rejects, a negative weight, a
missing W/Q, W/Q that disagree with the work model on a shape the portal defined).
Warnings are worth a look but stand: W/Q that differ from the work model on a shape
the upstream release published (those keep the published figures), a shape too large
to draw on the CPU when the meta device cannot draw it, an operator that is not built
in (uploaded operators are checked elsewhere).

Imports torch and the operator registry (lazily, inside ``validate_suite``).
"""

from __future__ import annotations

import hashlib
import inspect
from collections.abc import Mapping
from typing import Any

from evaluator.errors import UserError
from evaluator.suite import (
    SUITE_FORMAT,
    OperatorEntry,
    ShapeSpec,
    Suite,
    canonical_json,
)

SCHEMA = "atrex-suite-validation/1"
DEVICES: tuple[str, ...] = ("meta", "cpu")
# Shapes whose inputs may be drawn for real on the CPU (when meta cannot draw them, or
# when asked for the CPU): above this estimated input size they are not drawn.
CPU_DRAW_LIMIT_BYTES = 64 * 1024 * 1024
WORK_TOLERANCE = 0.01
# make_inputs' own parameters, never shape kwargs.
_DRAW_PARAMETERS = ("device", "generator")
# Exceptions that mean "these kwargs are wrong" on any device, as opposed to a meta
# limitation (RuntimeError / NotImplementedError from an op with data-dependent output).
_KWARG_ERRORS = (TypeError, ValueError, KeyError, IndexError, ZeroDivisionError)


class _Report:
    """The findings of one validation run (per-run state, kept off the module)."""

    def __init__(self) -> None:
        self.errors: list[dict[str, str | None]] = []
        self.warnings: list[dict[str, str | None]] = []

    def error(self, operator: str | None, shape_id: str | None, message: str) -> None:
        self.errors.append({"operator": operator, "shape_id": shape_id, "message": message})

    def warning(self, operator: str | None, shape_id: str | None, message: str) -> None:
        self.warnings.append({"operator": operator, "shape_id": shape_id, "message": message})


def validate_suite(suite: Suite | Mapping[str, Any], *, device: str = "meta") -> dict[str, Any]:
    """Validate ``suite`` (a Suite, or a draft's JSON data) and return the report.

    The report: ``{"schema": "atrex-suite-validation/1", "suite": slug, "hash": ...,
    "ok": bool, "errors": [{"operator", "shape_id", "message"}], "warnings": [...],
    "checked": N, "skipped": M, "device": device}``; ``checked`` counts the shapes checked
    against a built-in operator, ``skipped`` those of operators that are not built in.
    A draft is read leniently: a malformed operator or shape is an error of its own and
    the rest is still checked; a stored ``content_hash`` is not required (``hash`` is
    that of the content as given).
    """
    if device not in DEVICES:
        raise UserError(
            f"Unknown validation device {device!r}; use one of: {', '.join(DEVICES)}.",
            code="suite:invalid",
        )
    report = _Report()
    data = suite.to_dict() if isinstance(suite, Suite) else suite
    draft = _read_draft(data, report)
    checked = skipped = 0
    if draft is not None:
        for problem in draft.problems():
            report.error(problem.operator, problem.shape_id, problem.message)
        checked, skipped = _check_shapes(draft, device=device, report=report)
    return {
        "schema": SCHEMA,
        "suite": draft.slug if draft is not None else _raw_slug(data),
        "hash": draft.content_hash if draft is not None else _raw_hash(data),
        "ok": not report.errors,
        "errors": report.errors,
        "warnings": report.warnings,
        "checked": checked,
        "skipped": skipped,
        "device": device,
    }


# --- reading a draft -----------------------------------------------------------------


def _raw_slug(data: Any) -> str | None:
    if isinstance(data, Mapping) and data.get("name") and data.get("version"):
        return f"{data['name']}-{data['version']}"
    return None


def _raw_hash(data: Any) -> str | None:
    if not isinstance(data, Mapping):
        return None
    content = {key: value for key, value in data.items() if key != "content_hash"}
    try:
        text = canonical_json(content)
    except (TypeError, ValueError):
        return None
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def _read_draft(data: Any, report: _Report) -> Suite | None:
    """The draft as a Suite of its well-formed parts; the malformed ones become errors."""
    if not isinstance(data, Mapping):
        report.error(None, None, "A suite must be a JSON object.")
        return None
    if data.get("format") != SUITE_FORMAT:
        report.error(
            None,
            None,
            f"Suite format {data.get('format')!r} is not supported (expected {SUITE_FORMAT!r}).",
        )
        return None
    missing = [key for key in ("name", "version", "operators", "shapes") if key not in data]
    if missing:
        report.error(None, None, f"Suite data lacks key(s): {', '.join(missing)}.")
        return None
    if not isinstance(data["operators"], list) or not isinstance(data["shapes"], list):
        report.error(None, None, "Suite operators and shapes must be lists.")
        return None
    operators = []
    for item in data["operators"]:
        try:
            operators.append(OperatorEntry.from_dict(_mapping(item)))
        except UserError as exc:
            report.error(_field(item, "slug"), None, exc.message)
    shapes = []
    for item in data["shapes"]:
        try:
            shapes.append(ShapeSpec.from_dict(_mapping(item)))
        except UserError as exc:
            report.error(_field(item, "operator"), _field(item, "shape_id"), exc.message)
    suite = Suite(
        name=str(data["name"]),
        version=str(data["version"]),
        description=str(data.get("description", "")),
        threshold_own_share=data.get("threshold_own_share", 0.8),
        operators=tuple(operators),
        shapes=tuple(shapes),
    )
    stored = data.get("content_hash")
    if stored is not None and stored != suite.content_hash:
        report.warning(
            None,
            None,
            f"Suite {suite.slug}: the stored content_hash {stored} is not that of the content "
            f"({suite.content_hash}); publishing it seals it with the new hash.",
        )
    return suite


def _mapping(item: Any) -> dict[str, Any]:
    if not isinstance(item, Mapping):
        raise UserError(f"Suite entry {item!r} is not an object.", code="suite:invalid")
    return dict(item)


def _field(item: Any, key: str) -> str | None:
    value = item.get(key) if isinstance(item, Mapping) else None
    return None if value is None else str(value)


# --- checking shapes against the built-in operators -----------------------------------


def _check_shapes(suite: Suite, *, device: str, report: _Report) -> tuple[int, int]:
    """Check every shape of a built-in operator; returns (checked, skipped) counts."""
    import torch

    from evaluator.operators import OPERATORS

    checked = skipped = 0
    not_built_in: dict[str, int] = {}
    for shape in suite.shapes:
        spec = OPERATORS.get(shape.operator)
        if spec is None:
            not_built_in[shape.operator] = not_built_in.get(shape.operator, 0) + 1
            skipped += 1
            continue
        # Keep the draw cheap and deterministic; the validator never runs a forward.
        with torch.no_grad():
            _check_shape(spec, shape, device=device, report=report)
        checked += 1
    for operator, count in not_built_in.items():
        report.warning(
            operator, None, f"{operator}: skipped: not built in ({count} shape(s) not checked)."
        )
    return checked, skipped


def _check_shape(spec: Any, shape: ShapeSpec, *, device: str, report: _Report) -> None:
    where = f"{shape.operator}/{shape.shape_id}"
    init_problem = _signature_problem(spec.model_class.__init__, shape.init_kwargs, skip=1)
    if init_problem:
        report.error(
            shape.operator, shape.shape_id, f"{where}: init_kwargs rejected: {init_problem}."
        )
    else:
        try:
            spec.build_reference(shape.init_kwargs)
        except Exception as exc:  # the reference's own check of its arguments
            report.error(
                shape.operator,
                shape.shape_id,
                f"{where}: Model(**init_kwargs) failed: {type(exc).__name__}: {exc}.",
            )
    reserved = [key for key in _DRAW_PARAMETERS if key in shape.input_kwargs]
    if reserved:
        report.error(
            shape.operator,
            shape.shape_id,
            f"{where}: input_kwargs may not set {', '.join(reserved)} (chosen by the harness).",
        )
        return
    input_problem = _signature_problem(
        spec.input_maker, shape.input_kwargs, fixed=dict.fromkeys(_DRAW_PARAMETERS)
    )
    if input_problem:
        report.error(
            shape.operator, shape.shape_id, f"{where}: input_kwargs rejected: {input_problem}."
        )
        return
    for key in sorted(set(shape.init_kwargs) & set(shape.input_kwargs)):
        if shape.init_kwargs[key] != shape.input_kwargs[key]:
            report.error(
                shape.operator,
                shape.shape_id,
                f"{where}: {key} is {shape.init_kwargs[key]!r} in init_kwargs but "
                f"{shape.input_kwargs[key]!r} in input_kwargs; they must agree.",
            )
    try:
        work = spec.work(shape.init_kwargs, shape.input_kwargs)
    except Exception as exc:
        report.error(
            shape.operator,
            shape.shape_id,
            f"{where}: the work model cannot evaluate these kwargs: {type(exc).__name__}: {exc}.",
        )
        return
    _compare_work(shape, work, report)
    _check_draw(spec, shape, estimated_bytes=work.q_read, device=device, report=report)


def _signature_problem(
    function: Any, kwargs: Mapping[str, Any], *, skip: int = 0, fixed: Mapping | None = None
) -> str | None:
    """Why ``function(**fixed, **kwargs)`` would not bind: the unexpected and the missing
    kwargs by name, or None. ``skip`` leading parameters (``self``) are ignored."""
    parameters = list(inspect.signature(function).parameters.values())[skip:]
    named = {
        p.name: p
        for p in parameters
        if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    }
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)
    given = {*kwargs, *(fixed or {})}
    unexpected = [] if takes_any else sorted(key for key in kwargs if key not in named)
    missing = [
        name
        for name, parameter in named.items()
        if parameter.default is inspect.Parameter.empty and name not in given
    ]
    parts = []
    if unexpected:
        parts.append("unexpected " + ", ".join(repr(key) for key in unexpected))
    if missing:
        parts.append("missing " + ", ".join(repr(key) for key in missing))
    return "; ".join(parts) or None


def _close(ours: float, theirs: float) -> bool:
    return abs(ours - theirs) <= WORK_TOLERANCE * abs(theirs) or ours == theirs


def _compare_work(shape: ShapeSpec, work: Any, report: _Report) -> None:
    """Suite W/Q against the work model: within 1%, or a warning / an error."""
    where = f"{shape.operator}/{shape.shape_id}"
    differences = []
    dtypes = set(shape.w_flops) | {key for key, value in work.w_flops.items() if value}
    for dtype in sorted(dtypes):
        ours, theirs = work.w_flops.get(dtype, 0), shape.w_flops.get(dtype, 0)
        if _is_count(theirs) and not _close(ours, theirs):
            differences.append(f"w_flops[{dtype!r}] {theirs!r} (work model: {ours})")
    for key in ("q_read", "q_write"):
        ours, theirs = getattr(work, key), getattr(shape, key)
        if _is_count(theirs) and not _close(ours, theirs):
            differences.append(f"{key} {theirs!r} (work model: {ours})")
    if not differences:
        return
    text = "; ".join(differences)
    if shape.from_release:
        report.warning(
            shape.operator,
            shape.shape_id,
            f"{where}: the published W/Q differ from the work model by more than 1%: {text} "
            f"(published figures kept).",
        )
    else:
        report.error(
            shape.operator,
            shape.shape_id,
            f"{where}: W/Q differ from the work model by more than 1%: {text}.",
        )


def _is_count(value: Any) -> bool:
    # A value that is not a count is already an error of Suite.problems(); not compared.
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _check_draw(
    spec: Any, shape: ShapeSpec, *, estimated_bytes: int, device: str, report: _Report
) -> None:
    """Draw the inputs (meta, else CPU for small shapes); a failure is an error."""
    import torch

    where = f"{shape.operator}/{shape.shape_id}"
    if device == "meta":
        try:
            _draw(spec, shape, torch.device("meta"))
            return
        except _KWARG_ERRORS as exc:
            report.error(
                shape.operator,
                shape.shape_id,
                f"{where}: make_inputs rejected the kwargs: {type(exc).__name__}: {exc}.",
            )
            return
        except Exception as exc:  # an op that cannot run on meta: try the CPU below
            meta_failure = f"{type(exc).__name__}: {exc}"
    else:
        meta_failure = None
    if estimated_bytes >= CPU_DRAW_LIMIT_BYTES:
        reason = f"meta cannot draw them ({meta_failure})" if meta_failure else "asked for cpu"
        report.warning(
            shape.operator,
            shape.shape_id,
            f"{where}: not checked on meta: inputs not drawn ({reason}), and ~"
            f"{estimated_bytes / 2**20:.0f} MB is over the {CPU_DRAW_LIMIT_BYTES // 2**20} MB "
            f"limit for drawing them on the CPU.",
        )
        return
    try:
        _draw(spec, shape, torch.device("cpu"))
    except Exception as exc:
        report.error(
            shape.operator,
            shape.shape_id,
            f"{where}: make_inputs failed on cpu: {type(exc).__name__}: {exc}.",
        )


def _draw(spec: Any, shape: ShapeSpec, device: Any) -> None:
    """make_inputs on ``device`` with a CPU generator (meta has none), checked for tensors."""
    import torch

    generator = torch.Generator()
    generator.manual_seed(0)
    inputs = spec.input_maker(device=device, generator=generator, **shape.input_kwargs)
    if not isinstance(inputs, Mapping) or not all(
        isinstance(value, torch.Tensor) for value in inputs.values()
    ):
        raise TypeError("make_inputs did not return a dict of tensors")
