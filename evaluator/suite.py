"""Suite versions: immutable, content-hashed snapshots of operators, shapes and weights.

Pure stdlib. A suite file (``evaluator/suites/<name>-<version>.json``) holds the format
tag ``"atrex-suite/1"``, the suite's fields and its ``content_hash``: "sha256:" and the
hex digest of the canonical JSON (sorted keys, no whitespace) of the file's content
without the hash itself. Loading recomputes the hash and refuses a file whose content no
longer matches it, so a leaderboard's suite version can never change under its scores.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any

from evaluator.errors import (
    PlatformError,
    UnknownOperatorError,
    UnknownSuiteError,
    UserError,
)
from evaluator.hardware import DTYPE_TO_PATH

SUITE_FORMAT = "atrex-suite/1"
SUITES_DIR = Path(__file__).parent / "suites"
SHAPE_SETS: tuple[str, ...] = ("full", "smoke")
VISIBILITIES: tuple[str, ...] = ("public", "hidden")
IMPORTANCE_TOLERANCE = 1e-9
# A shape whose ``source`` starts with this carries the upstream release's published
# kwargs and W/Q figures (e.g. "atrex-bench release eb8697d5 (Apache-2.0)").
RELEASE_SOURCE_PREFIX = "atrex-bench release"


def _invalid(message: str) -> UserError:
    return UserError(message, code="suite:invalid")


@dataclass(frozen=True)
class SuiteProblem:
    """One broken suite invariant: the operator and shape it concerns (None: the suite)."""

    operator: str | None
    shape_id: str | None
    message: str


@dataclass(frozen=True)
class ShapeSpec:
    """One (init_kwargs, input_kwargs) point of an operator, with its work model and weight.

    ``weight`` is relative within the operator. ``w_flops`` maps dtype names ("bf16",
    "fp8_e4m3", ...) to FLOPs; ``q_read``/``q_write`` are bytes. Hidden shapes are scored
    but never shown to agents. Smoke shapes (``smoke=True``) form the separate, small set
    run on a CPU (the "smoke" shape set); they are not part of the "full" set.
    """

    operator: str
    shape_id: str
    init_kwargs: dict[str, Any]
    input_kwargs: dict[str, Any]
    weight: float
    w_flops: dict[str, int]
    q_read: int
    q_write: int
    visibility: str = "public"
    smoke: bool = False
    source: str = ""
    description: str = ""

    @property
    def q_total(self) -> int:
        """Bytes read plus bytes written."""
        return self.q_read + self.q_write

    @property
    def from_release(self) -> bool:
        """Whether the shape is one the upstream release published (its W/Q as published)."""
        return self.source.startswith(RELEASE_SOURCE_PREFIX)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of the shape."""
        return {
            "operator": self.operator,
            "shape_id": self.shape_id,
            "init_kwargs": self.init_kwargs,
            "input_kwargs": self.input_kwargs,
            "weight": self.weight,
            "w_flops": self.w_flops,
            "q_read": self.q_read,
            "q_write": self.q_write,
            "visibility": self.visibility,
            "smoke": self.smoke,
            "source": self.source,
            "description": self.description,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ShapeSpec:
        """Build a shape from ``to_dict()`` output; UserError naming the shape if malformed."""
        where = f"shape {data.get('operator')!r}/{data.get('shape_id')!r}"
        required = ("operator", "shape_id", "input_kwargs", "weight", "w_flops")
        missing = [key for key in (*required, "q_read", "q_write") if key not in data]
        if missing:
            raise _invalid(f"Suite {where} lacks key(s): {', '.join(missing)}.")
        for key in ("init_kwargs", "input_kwargs", "w_flops"):
            if data.get(key) is not None and not isinstance(data[key], dict):
                raise _invalid(f"Suite {where}: {key} must be an object.")
        return cls(
            operator=str(data["operator"]),
            shape_id=str(data["shape_id"]),
            init_kwargs=dict(data.get("init_kwargs") or {}),
            input_kwargs=dict(data["input_kwargs"]),
            weight=data["weight"],
            w_flops=dict(data["w_flops"]),
            q_read=data["q_read"],
            q_write=data["q_write"],
            visibility=str(data.get("visibility", "public")),
            smoke=bool(data.get("smoke", False)),
            source=str(data.get("source", "")),
            description=str(data.get("description", "")),
        )


@dataclass(frozen=True)
class OperatorEntry:
    """An operator of a suite: its slug, Atrex id, importance and nominal dtype and phase.

    ``importance`` is normalised to sum to 1 over the suite's operators;
    ``importance_raw`` is the score as published (the release's scores sum to ~1.095).
    """

    slug: str
    atrex_id: str
    importance: float
    importance_raw: float
    dtype: str
    phase: str
    description: str = ""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of the operator entry."""
        return {
            "slug": self.slug,
            "atrex_id": self.atrex_id,
            "importance": self.importance,
            "importance_raw": self.importance_raw,
            "dtype": self.dtype,
            "phase": self.phase,
            "description": self.description,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> OperatorEntry:
        """Build an entry from ``to_dict()`` output; UserError naming the operator if not."""
        missing = [key for key in ("slug", "importance") if key not in data]
        if missing:
            raise _invalid(
                f"Suite operator {data.get('slug')!r} lacks key(s): {', '.join(missing)}."
            )
        return cls(
            slug=str(data["slug"]),
            atrex_id=str(data.get("atrex_id", "")),
            importance=data["importance"],
            importance_raw=data.get("importance_raw", data["importance"]),
            dtype=str(data.get("dtype", "")),
            phase=str(data.get("phase", "")),
            description=str(data.get("description", "")),
        )


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def canonical_json(data: Any) -> str:
    """The canonical JSON text that content hashes are taken of: sorted keys, no spaces."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


@dataclass(frozen=True, kw_only=True)
class Suite:
    """An immutable suite version: operators with importance, shapes with weights.

    Scoring: a shape's score is its roofline fraction if it passes, an operator's score
    the weight-averaged shape score, the aggregate the importance-weighted operator
    score (see ``evaluator.scoring``). ``threshold_own_share`` is the least share of
    device time that must be spent in the submission's own kernels for a pass not to be
    a fallback.
    """

    name: str
    version: str
    description: str
    threshold_own_share: float = 0.8
    operators: tuple[OperatorEntry, ...] = field(default=())
    shapes: tuple[ShapeSpec, ...] = field(default=())

    def __post_init__(self) -> None:
        # Accept lists from callers; store tuples so the snapshot cannot grow or shrink.
        object.__setattr__(self, "operators", tuple(self.operators))
        object.__setattr__(self, "shapes", tuple(self.shapes))

    @property
    def slug(self) -> str:
        """``<name>-<version>``, e.g. ``atrex-bench-v1``; also the suite file's stem."""
        return f"{self.name}-{self.version}"

    @cached_property
    def content_hash(self) -> str:
        """The hash: "sha256:" + hex of the canonical JSON of ``to_dict()`` minus the hash."""
        digest = hashlib.sha256(canonical_json(self._content()).encode("utf-8")).hexdigest()
        return f"sha256:{digest}"

    def operator(self, slug: str) -> OperatorEntry:
        """The operator entry ``slug``; UnknownOperatorError listing the suite's operators."""
        for entry in self.operators:
            if entry.slug == slug:
                return entry
        raise UnknownOperatorError(
            f"Operator {slug!r} is not in suite {self.slug}; it holds: "
            f"{', '.join(self.operator_slugs())}."
        )

    def operator_slugs(self) -> list[str]:
        """The suite's operator slugs, in suite order."""
        return [entry.slug for entry in self.operators]

    def shapes_for(self, operator: str, shape_set: str = "full") -> list[ShapeSpec]:
        """The shapes of ``operator`` in one shape set, in suite order.

        The two sets are disjoint: "full" holds the shapes not marked smoke (the scored
        benchmark shapes), "smoke" only those marked smoke (the small CPU set).
        """
        self.operator(operator)
        if shape_set not in SHAPE_SETS:
            raise UserError(
                f"Unknown shape set {shape_set!r}; use one of: {', '.join(SHAPE_SETS)}.",
                code="suite:unknown-shape-set",
            )
        return [
            shape
            for shape in self.shapes
            if shape.operator == operator and shape.smoke == (shape_set == "smoke")
        ]

    def importance(self) -> dict[str, float]:
        """Normalised importance by operator slug (the input of ``scoring.aggregate_score``)."""
        return {entry.slug: entry.importance for entry in self.operators}

    def restrict(self, operators: list[str]) -> Suite:
        """The suite reduced to ``operators``, importance renormalised to sum to 1 among them.

        Suite order is kept and duplicates are ignored. The result has a different
        content hash from this suite (it is different content); its description says
        which operators it was restricted to.
        """
        wanted = list(dict.fromkeys(operators))
        if not wanted:
            raise UserError("Restricting a suite needs at least one operator.", code="suite:empty")
        for slug in wanted:
            self.operator(slug)
        kept = [entry for entry in self.operators if entry.slug in wanted]
        total = sum(entry.importance for entry in kept)
        if total <= 0:
            raise UserError(
                f"Operators {', '.join(wanted)} have zero total importance in suite "
                f"{self.slug}; their importance cannot be renormalised.",
                code="suite:invalid",
            )
        return replace(
            self,
            description=(
                f"{self.description} Restricted to: {', '.join(e.slug for e in kept)} "
                f"(importance renormalised among them)."
            ),
            operators=tuple(replace(entry, importance=entry.importance / total) for entry in kept),
            shapes=tuple(shape for shape in self.shapes if shape.operator in wanted),
        )

    def public_only(self) -> Suite:
        """The suite without its hidden shapes: what an agent may be shown and measured on.

        Operators and importance are unchanged; an operator whose shapes are all hidden
        keeps no shapes. The content hash differs from this suite's (different content).
        """
        return replace(
            self,
            description=f"{self.description} Public shapes only.",
            shapes=tuple(shape for shape in self.shapes if shape.visibility == "public"),
        )

    def validate(self) -> None:
        """Check the suite's invariants; UserError saying which operator or shape is wrong.

        Operators unique with importance >= 0 summing to 1 (within 1e-9); every shape's
        operator listed; (operator, shape_id) unique; weights >= 0; W keyed by known
        dtypes with counts >= 0; Q counts >= 0; visibility public or hidden; a non-empty
        smoke set for every operator; 0 <= threshold_own_share <= 1. The first problem
        found (see :meth:`problems`) is raised.
        """
        problems = self.problems()
        if problems:
            raise _invalid(problems[0].message)

    def problems(self) -> list[SuiteProblem]:
        """Every broken invariant of :meth:`validate`, in the order validate checks them."""
        found: list[SuiteProblem] = []
        if not self.name or not self.version:
            found.append(SuiteProblem(None, None, "A suite needs a name and a version."))
        if not _is_number(self.threshold_own_share) or not 0 <= self.threshold_own_share <= 1:
            found.append(
                SuiteProblem(
                    None,
                    None,
                    f"Suite {self.slug}: threshold_own_share must be in [0, 1], "
                    f"got {self.threshold_own_share!r}.",
                )
            )
        if not self.operators:
            found.append(SuiteProblem(None, None, f"Suite {self.slug} has no operators."))
            return found
        found.extend(self._operator_problems())
        seen: set[tuple[str, str]] = set()
        for shape in self.shapes:
            found.extend(self._shape_problems(shape))
            key = (shape.operator, shape.shape_id)
            if key in seen:
                found.append(
                    SuiteProblem(
                        shape.operator,
                        shape.shape_id,
                        f"Suite {self.slug}: shape {shape.operator}/{shape.shape_id} "
                        f"appears twice.",
                    )
                )
            seen.add(key)
        smoke_counts = {entry.slug: 0 for entry in self.operators}
        for shape in self.shapes:
            if shape.operator in smoke_counts:
                smoke_counts[shape.operator] += int(shape.smoke)
        for slug, count in smoke_counts.items():
            if count == 0:
                found.append(
                    SuiteProblem(
                        slug, None, f"Suite {self.slug}: operator {slug!r} has no smoke shape."
                    )
                )
        return found

    def _operator_problems(self) -> list[SuiteProblem]:
        found: list[SuiteProblem] = []
        seen: set[str] = set()
        for entry in self.operators:
            if entry.slug in seen:
                found.append(
                    SuiteProblem(
                        entry.slug,
                        None,
                        f"Suite {self.slug}: operator {entry.slug!r} is listed twice.",
                    )
                )
            seen.add(entry.slug)
            for key in ("importance", "importance_raw"):
                value = getattr(entry, key)
                if not _is_number(value) or value < 0:
                    found.append(
                        SuiteProblem(
                            entry.slug,
                            None,
                            f"Suite {self.slug}: operator {entry.slug!r} has {key} {value!r}; "
                            f"it must be a finite number >= 0.",
                        )
                    )
        if all(_is_number(entry.importance) for entry in self.operators):
            total = math.fsum(entry.importance for entry in self.operators)
            if abs(total - 1.0) > IMPORTANCE_TOLERANCE:
                found.append(
                    SuiteProblem(
                        None,
                        None,
                        f"Suite {self.slug}: operator importance sums to {total!r}, not 1 "
                        f"(within {IMPORTANCE_TOLERANCE}).",
                    )
                )
        return found

    def _shape_problems(self, shape: ShapeSpec) -> list[SuiteProblem]:
        where = f"Suite {self.slug}: shape {shape.operator}/{shape.shape_id}"
        messages: list[str] = []
        if shape.operator not in {entry.slug for entry in self.operators}:
            messages.append(f"{where} belongs to an operator the suite does not list.")
        if not _is_number(shape.weight) or shape.weight < 0:
            messages.append(f"{where} has weight {shape.weight!r}; it must be >= 0.")
        if shape.visibility not in VISIBILITIES:
            messages.append(
                f"{where} has visibility {shape.visibility!r}; use one of "
                f"{', '.join(VISIBILITIES)}."
            )
        for dtype, flops in shape.w_flops.items():
            if dtype not in DTYPE_TO_PATH:
                messages.append(
                    f"{where}: w_flops dtype {dtype!r} is unknown; known: "
                    f"{', '.join(DTYPE_TO_PATH)}."
                )
            if not _is_count(flops):
                messages.append(f"{where}: w_flops[{dtype!r}] = {flops!r} is not a count >= 0.")
        for key in ("q_read", "q_write"):
            if not _is_count(getattr(shape, key)):
                messages.append(f"{where}: {key} = {getattr(shape, key)!r} is not a count >= 0.")
        return [SuiteProblem(shape.operator, shape.shape_id, message) for message in messages]

    def _content(self) -> dict[str, Any]:
        return {
            "format": SUITE_FORMAT,
            "name": self.name,
            "version": self.version,
            "description": self.description,
            "threshold_own_share": self.threshold_own_share,
            "operators": [entry.to_dict() for entry in self.operators],
            "shapes": [shape.to_dict() for shape in self.shapes],
        }

    def to_dict(self) -> dict[str, Any]:
        """The suite as stored: format tag, fields, and ``content_hash``."""
        return {**self._content(), "content_hash": self.content_hash}

    def to_json(self) -> str:
        """The suite file's text (readable, sorted keys; the hash does not depend on layout)."""
        return json.dumps(self.to_dict(), indent=1, sort_keys=True) + "\n"

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Suite:
        """Build a suite from stored data, checking format and (if present) content hash.

        A stored ``content_hash`` that differs from the recomputed one means the content
        was changed after it was published: PlatformError ``platform:suite-hash-mismatch``.
        The suite is then validated (UserError on a broken invariant).
        """
        if not isinstance(data, dict):
            raise _invalid("A suite must be a JSON object.")
        if data.get("format") != SUITE_FORMAT:
            raise _invalid(
                f"Suite format {data.get('format')!r} is not supported (expected {SUITE_FORMAT!r})."
            )
        missing = [key for key in ("name", "version", "operators", "shapes") if key not in data]
        if missing:
            raise _invalid(f"Suite data lacks key(s): {', '.join(missing)}.")
        suite = cls(
            name=str(data["name"]),
            version=str(data["version"]),
            description=str(data.get("description", "")),
            threshold_own_share=data.get("threshold_own_share", 0.8),
            operators=tuple(OperatorEntry.from_dict(item) for item in data["operators"]),
            shapes=tuple(ShapeSpec.from_dict(item) for item in data["shapes"]),
        )
        stored = data.get("content_hash")
        if stored is not None and stored != suite.content_hash:
            raise PlatformError(
                f"Suite {suite.slug}: stored content hash {stored} does not match its content "
                f"({suite.content_hash}); the suite was modified after it was published.",
                code="platform:suite-hash-mismatch",
            )
        suite.validate()
        return suite


def list_suites() -> list[str]:
    """Names of the suites shipped in ``evaluator/suites/`` (file stems), sorted."""
    if not SUITES_DIR.is_dir():
        return []
    return sorted(path.stem for path in SUITES_DIR.glob("*.json"))


def _resolve(name_or_path: str) -> Path:
    candidate = Path(name_or_path)
    if candidate.suffix == ".json" or candidate.is_file():
        if candidate.is_file():
            return candidate
        raise UnknownSuiteError(f"Suite file {name_or_path} does not exist.")
    shipped = SUITES_DIR / f"{name_or_path}.json"
    if "/" not in name_or_path and shipped.is_file():
        return shipped
    raise UnknownSuiteError(
        f"Unknown suite {name_or_path!r}; available: {', '.join(list_suites()) or 'none'} "
        f"(or give a path to a suite .json file)."
    )


def load_suite(name_or_path: str) -> Suite:
    """Load a suite by name (``evaluator/suites/<name>.json``) or from a JSON file path.

    The file must carry the format tag and its content hash; a missing or mismatching
    hash is refused (PlatformError), an unknown name raises UnknownSuiteError listing
    the available suites, malformed content raises UserError.
    """
    path = _resolve(name_or_path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise _invalid(f"Suite file {path} is not valid JSON: {exc}.") from exc
    if isinstance(data, dict) and "content_hash" not in data:
        raise PlatformError(
            f"Suite file {path} carries no content_hash; refusing an unsealed suite.",
            code="platform:suite-hash-mismatch",
        )
    return Suite.from_dict(data)
