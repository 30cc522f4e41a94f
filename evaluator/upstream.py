"""Operators in the upstream Atrex-Bench directory format, read without running them.

An upstream operator directory holds ``reference.py`` (``class Model``), ``input.py``
(``_make_inputs(**input_kwargs)``), ``shapes.json`` (shape id -> ``init_kwargs``, null
meaning {}, and ``input_kwargs``), ``roofline.json`` (per shape id: W keyed by the
metadata dtype, Q read and write bytes) and ``metadata.json`` (``id``, ``dtype``,
``phase``, ``importance_score``); a release ``data/`` directory is one such folder per
operator plus ``operator_importance.json``. See the release notes (OPERATORS.md A.2-A.5).

Parsing is pure stdlib: the ``.py`` files are checked with ``ast.parse`` only, never
imported, so the web side can use this module. Only :func:`uploaded_operator_spec`,
called in the evaluator's child process on a worker, imports torch and the sources.

Suite definition format for operators that are not built in: the suite file keeps the
``atrex-suite/1`` content (which ``evaluator.suite.Suite`` reads and hashes) and gains two
top-level keys that ``Suite.from_dict`` ignores:

* ``"operator_sources"``: ``{slug: {"reference.py": text, "input.py": text}}``;
* ``"operator_sources_hash"``: ``"sha256:"`` + hex of the canonical JSON of the above.

The version's identity (:func:`version_content_hash`) covers both: it is the suite's own
content hash when there are no sources, else the hash of (suite hash, sources).
"""

from __future__ import annotations

import ast
import hashlib
import io
import json
import zipfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import Any

from evaluator.errors import PlatformError, UserError
from evaluator.hardware import DTYPE_TO_PATH
from evaluator.suite import OperatorEntry, ShapeSpec, Suite, canonical_json, load_suite

SOURCE_FILES: tuple[str, ...] = ("reference.py", "input.py")
DATA_FILES: tuple[str, ...] = ("shapes.json", "roofline.json", "metadata.json")
SOURCES_KEY = "operator_sources"
SOURCES_HASH_KEY = "operator_sources_hash"
IMPORTANCE_FILE = "operator_importance.json"
SMOKE_COUNT = 3
SMOKE_COPY_SOURCE = "portal (smoke copy of shape"
CATALOGUE_SUITE = "atrex-bench-v1"
MAX_UPLOAD_BYTES = 8 * 1024 * 1024
OPERATORS_DIR = Path(__file__).parent / "operators"


class UpstreamFormatError(UserError):
    """An upstream operator directory (or release) that cannot be read; lists every problem."""

    code = "upstream:invalid"

    def __init__(self, problems: list[str], *, where: str = "") -> None:
        self.problems = list(problems)
        prefix = f"{where}: " if where else ""
        super().__init__(prefix + "; ".join(self.problems), code=self.code)


@dataclass(frozen=True)
class UpstreamOperator:
    """One parsed operator: its suite entry, shapes with the published W/Q, and sources.

    ``sources`` is empty when the directory carried no ``.py`` files (a built-in
    operator's release data); ``importance_raw`` is the metadata's score, unnormalised.
    """

    entry: OperatorEntry
    shapes: tuple[ShapeSpec, ...]
    sources: dict[str, str] = field(default_factory=dict)

    @property
    def slug(self) -> str:
        """The operator's slug."""
        return self.entry.slug


def builtin_operator_slugs() -> set[str]:
    """Slugs of the operators this evaluator implements (module names; nothing imported)."""
    return {
        path.stem
        for path in OPERATORS_DIR.glob("*.py")
        if not path.stem.startswith("_") and path.stem != "base"
    }


def _id_order(shape_id: str) -> tuple[int, str]:
    # Numeric ids sort numerically ("2" before "10"); anything else after, by text.
    return (int(shape_id), "") if shape_id.isdigit() else (1 << 62, shape_id)


def smoke_ids(q_totals: Mapping[str, int], count: int = SMOKE_COUNT) -> set[str]:
    """The ``count`` shape ids with the fewest bytes moved, ties by id (as build_suite)."""
    ranked = sorted(q_totals, key=lambda sid: (q_totals[sid], _id_order(sid)))
    return set(ranked[:count])


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _parse_json(name: str, data: bytes | str | None, problems: list[str]) -> Any:
    if data is None:
        problems.append(f"{name} is missing")
        return None
    try:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
        return json.loads(text)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        problems.append(f"{name} is not valid JSON ({exc})")
        return None


def _check_source(name: str, data: bytes | str | None, problems: list[str]) -> str | None:
    if data is None:
        problems.append(f"{name} is missing")
        return None
    try:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
    except UnicodeDecodeError:
        problems.append(f"{name} is not UTF-8 text")
        return None
    try:
        tree = ast.parse(text, filename=name)
    except SyntaxError as exc:
        problems.append(f"{name} has a syntax error at line {exc.lineno}: {exc.msg}")
        return None
    wanted = {
        "reference.py": ("Model", ast.ClassDef),
        "input.py": ("_make_inputs", ast.FunctionDef),
    }
    symbol, kind = wanted[name]
    if not any(isinstance(node, kind) and node.name == symbol for node in tree.body):
        what = "class" if kind is ast.ClassDef else "function"
        problems.append(f"{name} defines no top-level {what} {symbol!r}")
    return text


def _read_metadata(metadata: Any, problems: list[str]) -> dict[str, Any]:
    if not isinstance(metadata, dict):
        if metadata is not None:
            problems.append("metadata.json must be a JSON object")
        return {}
    for key in ("id", "dtype"):
        if not isinstance(metadata.get(key), str) or not metadata.get(key):
            problems.append(f"metadata.json lacks {key!r}")
    score = metadata.get("importance_score", 0.0)
    if isinstance(score, bool) or not isinstance(score, int | float) or score < 0:
        problems.append(f"metadata.json importance_score {score!r} must be a number >= 0")
    return metadata


def _read_shapes(
    slug: str,
    shapes: Any,
    roofline: Any,
    metadata: Mapping[str, Any],
    *,
    source: str,
    problems: list[str],
) -> list[ShapeSpec]:
    if shapes is not None and (not isinstance(shapes, dict) or not shapes):
        problems.append("shapes.json must be a non-empty object keyed by shape id")
        shapes = None
    roofline_shapes = roofline.get("shapes") if isinstance(roofline, dict) else None
    if roofline is not None and not isinstance(roofline_shapes, dict):
        problems.append('roofline.json must hold an object "shapes" keyed by shape id')
    if not isinstance(shapes, dict) or not isinstance(roofline_shapes, dict):
        return []
    only_shapes = sorted(set(shapes) - set(roofline_shapes), key=_id_order)
    only_roofline = sorted(set(roofline_shapes) - set(shapes), key=_id_order)
    if only_shapes:
        problems.append(
            f"shape id(s) {', '.join(only_shapes)} of shapes.json have no W/Q in roofline.json"
        )
    if only_roofline:
        problems.append(
            f"roofline.json has shape id(s) {', '.join(only_roofline)} that shapes.json lacks"
        )
    dtype = metadata.get("dtype")
    shape_descriptions = metadata.get("shapes") if isinstance(metadata.get("shapes"), dict) else {}
    parsed: dict[str, tuple[dict, dict, dict, int, int]] = {}
    for sid in sorted(set(shapes) & set(roofline_shapes), key=_id_order):
        point, work = shapes[sid], roofline_shapes[sid]
        where = f"shape {sid}"
        if not isinstance(point, dict) or not isinstance(point.get("input_kwargs"), dict):
            problems.append(f"shapes.json {where} needs an object input_kwargs")
            continue
        init_kwargs = point.get("init_kwargs")
        if init_kwargs is not None and not isinstance(init_kwargs, dict):
            problems.append(f"shapes.json {where}: init_kwargs must be an object or null")
            continue
        if not isinstance(work, dict):
            problems.append(f"roofline.json {where} must be an object")
            continue
        w_flops = work.get("semantic_W_flops")
        q_read, q_write = work.get("semantic_Q_read_bytes"), work.get("semantic_Q_write_bytes")
        if not isinstance(w_flops, dict) or not _is_count(q_read) or not _is_count(q_write):
            problems.append(
                f"roofline.json {where} lacks W/Q (semantic_W_flops object, "
                "semantic_Q_read_bytes and semantic_Q_write_bytes counts)"
            )
            continue
        bad = [k for k, v in w_flops.items() if k not in DTYPE_TO_PATH or not _is_count(v)]
        if bad:
            problems.append(
                f"roofline.json {where}: W entries {', '.join(map(repr, bad))} are invalid"
            )
            continue
        if w_flops and isinstance(dtype, str) and set(w_flops) != {dtype}:
            problems.append(
                f"roofline.json {where}: W is keyed by {', '.join(sorted(w_flops))}, "
                f"not by the metadata dtype {dtype!r}"
            )
            continue
        parsed[sid] = (
            dict(init_kwargs or {}),
            dict(point["input_kwargs"]),
            w_flops,
            q_read,
            q_write,
        )
    published = [
        ShapeSpec(
            operator=slug,
            shape_id=sid,
            init_kwargs=init_kwargs,
            input_kwargs=input_kwargs,
            weight=1.0,
            w_flops=dict(w_flops),
            q_read=q_read,
            q_write=q_write,
            visibility="public",
            smoke=False,
            source=source,
            description=str((shape_descriptions.get(sid) or {}).get("description", "")),
        )
        for sid, (init_kwargs, input_kwargs, w_flops, q_read, q_write) in parsed.items()
    ]
    return published + smoke_copies(published)


def smoke_copies(shapes: Iterable[ShapeSpec], count: int = SMOKE_COUNT) -> list[ShapeSpec]:
    """Smoke shapes for an operator without a work model: copies of its ``count`` smallest
    shapes (fewest bytes moved), ids ``smoke-<id>``, same kwargs and W/Q.

    The smoke set is separate from the scored ("full") set (``Suite.shapes_for``), and
    without the operator's work model the site cannot make up smaller shapes with true W/Q.
    """
    by_id = {shape.shape_id: shape for shape in shapes if not shape.smoke}
    chosen = smoke_ids({sid: shape.q_total for sid, shape in by_id.items()}, count)
    return [
        replace(
            by_id[sid],
            shape_id=f"smoke-{sid}",
            smoke=True,
            source=f"{SMOKE_COPY_SOURCE} {sid})",
        )
        for sid in sorted(chosen, key=_id_order)
    ]


def read_operator_files(
    files: Mapping[str, bytes | str],
    *,
    slug: str,
    source: str,
    require_sources: bool,
    importance_raw: float | None = None,
) -> UpstreamOperator:
    """Parse one operator from its files (name -> content); every problem in one error.

    ``require_sources``: the ``.py`` files must be present (an operator the evaluator does
    not implement). Without it, sources are kept if present and checked all the same.
    ``importance_raw`` overrides the metadata's importance score (the release's
    ``operator_importance.json``).
    """
    problems: list[str] = []
    if not slug or not slug.replace("_", "").isalnum() or not slug[0].isalpha():
        problems.append(f"{slug!r} is not a valid operator slug (letters, digits, underscores)")
    metadata = _read_metadata(
        _parse_json("metadata.json", files.get("metadata.json"), problems), problems
    )
    shapes = _parse_json("shapes.json", files.get("shapes.json"), problems)
    roofline = _parse_json("roofline.json", files.get("roofline.json"), problems)
    sources: dict[str, str] = {}
    if require_sources or any(name in files for name in SOURCE_FILES):
        for name in SOURCE_FILES:
            text = _check_source(name, files.get(name), problems)
            if text is not None:
                sources[name] = text
    specs = _read_shapes(slug, shapes, roofline, metadata, source=source, problems=problems)
    if problems:
        raise UpstreamFormatError(problems, where=f"operator {slug}")
    raw = (
        importance_raw
        if importance_raw is not None
        else float(metadata.get("importance_score", 0.0))
    )
    entry = OperatorEntry(
        slug=slug,
        atrex_id=str(metadata["id"]),
        importance=raw,  # normalised over the suite by the caller
        importance_raw=raw,
        dtype=str(metadata["dtype"]),
        phase=str(metadata.get("phase", "")),
        description=_describe(metadata, len(specs), slug),
    )
    return UpstreamOperator(entry=entry, shapes=tuple(specs), sources=sources)


def _describe(metadata: Mapping[str, Any], shape_count: int, slug: str) -> str:
    origin = metadata.get("origin") if isinstance(metadata.get("origin"), dict) else {}
    return (
        f"From {origin.get('framework', '?')} {origin.get('symbol', slug)} "
        f"({origin.get('module', '?')}); {metadata.get('status', '?')}; {shape_count} shapes."
    )


def _directory_files(path: Path) -> dict[str, bytes]:
    return {
        name: (path / name).read_bytes()
        for name in (*SOURCE_FILES, *DATA_FILES)
        if (path / name).is_file()
    }


def read_operator_dir(
    path: str | Path,
    *,
    source: str,
    require_sources: bool = False,
    importance_raw: float | None = None,
) -> UpstreamOperator:
    """Parse an upstream operator directory; its name is the slug."""
    directory = Path(path)
    return read_operator_files(
        _directory_files(directory),
        slug=directory.name,
        source=source,
        require_sources=require_sources,
        importance_raw=importance_raw,
    )


def read_operator_zip(data: bytes, *, source: str, slug: str | None = None) -> UpstreamOperator:
    """Parse a zip of one operator directory (files at the root or in one top folder).

    The slug is ``slug`` if given, else the top folder's name. The ``.py`` files are
    required: an upload adds an operator that the evaluator does not implement.
    """
    if len(data) > MAX_UPLOAD_BYTES:
        raise UpstreamFormatError(
            [f"the zip is larger than {MAX_UPLOAD_BYTES} bytes"], where="upload"
        )
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile:
        raise UpstreamFormatError(["the file is not a zip archive"], where="upload") from None
    wanted = (*SOURCE_FILES, *DATA_FILES)
    files: dict[str, bytes] = {}
    folders: set[str] = set()
    with archive:
        for info in archive.infolist():
            parts = PurePosixPath(info.filename).parts
            if info.is_dir() or not parts or parts[0] == "__MACOSX" or parts[-1] not in wanted:
                continue
            if len(parts) > 2:
                continue
            folders.add(parts[0] if len(parts) == 2 else "")
            if info.file_size > MAX_UPLOAD_BYTES:
                raise UpstreamFormatError([f"{info.filename} is too large"], where="upload")
            files[parts[-1]] = archive.read(info)
    if len(folders) > 1:
        raise UpstreamFormatError(
            [f"the zip holds several operator folders ({', '.join(sorted(folders))}); upload one"],
            where="upload",
        )
    name = slug or next(iter(folders), "")
    if not name:
        raise UpstreamFormatError(
            ["the files are at the zip's root: name the operator (slug) or zip its folder"],
            where="upload",
        )
    return read_operator_files(files, slug=name, source=source, require_sources=True)


@dataclass(frozen=True)
class ReleaseImport:
    """A whole upstream ``data/`` directory read as a suite plus uploaded sources."""

    suite: Suite
    sources: dict[str, dict[str, str]]


def normalise_importance(operators: Iterable[OperatorEntry]) -> tuple[OperatorEntry, ...]:
    """The entries with ``importance`` = raw score / total raw score (sums to 1)."""
    entries = tuple(operators)
    total = sum(entry.importance_raw for entry in entries)
    if total <= 0:
        raise UpstreamFormatError(["the operators' importance scores sum to 0"])
    return tuple(
        OperatorEntry(**{**entry.to_dict(), "importance": entry.importance_raw / total})
        for entry in entries
    )


def read_release(
    data_dir: str | Path,
    *,
    name: str,
    version: str,
    description: str = "",
    source: str | None = None,
    builtin: set[str] | None = None,
    catalogue: Suite | None = None,
) -> ReleaseImport:
    """Read a release ``data/`` directory (one folder per operator, operator_importance.json).

    A built-in operator (``builtin``, default: this evaluator's) uses the evaluator's own
    reference and the smoke shapes of the shipped catalogue suite (``catalogue``, default
    ``atrex-bench-v1``; W/Q from its work model); any other needs its ``reference.py``
    and ``input.py``, which are kept as the suite's operator sources, and gets smoke
    copies of its smallest shapes. Problems of every operator are reported together, each
    naming its file. Importance comes from ``operator_importance.json`` (else metadata).
    """
    root = Path(data_dir)
    if not root.is_dir():
        raise UpstreamFormatError([f"{root} is not a directory"])
    builtin = builtin_operator_slugs() if builtin is None else builtin
    # The prefix marks shapes whose kwargs and W/Q are upstream's published figures
    # (evaluator.suite.RELEASE_SOURCE_PREFIX); override it for data that is not a release.
    source = source or f"atrex-bench release (imported from {root.name}/)"
    problems: list[str] = []
    raw_importance: dict[str, float] = {}
    importance_path = root / IMPORTANCE_FILE
    if importance_path.is_file():
        data = _parse_json(str(importance_path), importance_path.read_bytes(), problems)
        operators = data.get("operators") if isinstance(data, dict) else None
        if data is not None and not isinstance(operators, dict):
            problems.append(f'{importance_path} must hold an object "operators"')
        for slug, item in (operators or {}).items():
            score = item.get("importance_score") if isinstance(item, dict) else None
            if isinstance(score, bool) or not isinstance(score, int | float) or score < 0:
                problems.append(f"{importance_path}: {slug} has importance_score {score!r}")
            else:
                raw_importance[slug] = float(score)
    else:
        problems.append(f"{importance_path} is missing")
    folders = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    if not folders:
        problems.append(f"{root} holds no operator folders")
    parsed: list[UpstreamOperator] = []
    for folder in folders:
        try:
            operator = read_operator_dir(
                folder,
                source=source,
                require_sources=folder.name not in builtin,
                importance_raw=raw_importance.get(folder.name),
            )
        except UpstreamFormatError as exc:
            problems.extend(f"{folder}/: {problem}" for problem in exc.problems)
            continue
        if folder.name in builtin:
            if catalogue is None:
                catalogue = load_suite(CATALOGUE_SUITE)
            smoke = [
                shape for shape in catalogue.shapes if shape.operator == folder.name and shape.smoke
            ]
            shapes = [shape for shape in operator.shapes if not shape.smoke]
            released = {shape.shape_id for shape in shapes}
            if smoke and not released & {shape.shape_id for shape in smoke}:
                shapes += smoke
            else:
                shapes = list(operator.shapes)
            operator = UpstreamOperator(entry=operator.entry, shapes=tuple(shapes))
        parsed.append(operator)
    if problems:
        raise UpstreamFormatError(problems)
    suite = Suite(
        name=name,
        version=version,
        description=description
        or f"Imported from an upstream Atrex-Bench data directory ({root}).",
        operators=normalise_importance(op.entry for op in parsed),
        shapes=tuple(shape for op in parsed for shape in op.shapes),
    )
    try:
        suite.validate()
    except UserError as exc:
        raise UpstreamFormatError([exc.message]) from exc
    return ReleaseImport(suite=suite, sources={op.slug: op.sources for op in parsed if op.sources})


# --------------------------------------------------------------------------- definitions


def sources_hash(sources: Mapping[str, Mapping[str, str]]) -> str:
    """``"sha256:"`` + hex of the canonical JSON of the operator sources."""
    return "sha256:" + hashlib.sha256(canonical_json(sources).encode("utf-8")).hexdigest()


def suite_definition(
    suite: Suite, sources: Mapping[str, Mapping[str, str]] | None
) -> dict[str, Any]:
    """The stored suite file: the suite's own dict plus its operators' sources, if any."""
    definition = suite.to_dict()
    kept = {slug: dict(files) for slug, files in (sources or {}).items() if files}
    if kept:
        definition[SOURCES_KEY] = kept
        definition[SOURCES_HASH_KEY] = sources_hash(kept)
    return definition


def version_content_hash(suite: Suite, sources: Mapping[str, Mapping[str, str]] | None) -> str:
    """A suite version's identity: the suite's hash, combined with its sources' if any."""
    kept = {slug: dict(files) for slug, files in (sources or {}).items() if files}
    if not kept:
        return suite.content_hash
    combined = canonical_json({"suite": suite.content_hash, "sources": sources_hash(kept)})
    return "sha256:" + hashlib.sha256(combined.encode("utf-8")).hexdigest()


def definition_sources(definition: Mapping[str, Any]) -> dict[str, dict[str, str]]:
    """The operator sources of a stored suite file, checked against their hash.

    PlatformError ``platform:suite-hash-mismatch`` when the sources were changed after
    the definition was written.
    """
    sources = definition.get(SOURCES_KEY) or {}
    if not sources:
        return {}
    if not isinstance(sources, dict) or definition.get(SOURCES_HASH_KEY) != sources_hash(sources):
        raise PlatformError(
            "The suite's operator sources do not match their stored hash; they were modified "
            "after the suite was written.",
            code="platform:suite-hash-mismatch",
        )
    return {str(slug): dict(files) for slug, files in sources.items()}


def load_suite_with_sources(name_or_path: str) -> tuple[Suite, dict[str, dict[str, str]]]:
    """``load_suite`` plus the file's operator sources (checked; {} for a plain suite)."""
    suite = load_suite(name_or_path)
    path = Path(name_or_path)
    if not path.is_file():
        return suite, {}
    data = json.loads(path.read_text(encoding="utf-8"))
    return suite, definition_sources(data)


# --------------------------------------------------------------------------- worker side


def uploaded_operator_spec(
    *, slug: str, sources: Mapping[str, str], dtype: str, directory: str | Path
) -> Any:
    """An ``OperatorSpec`` for an uploaded operator, built from its sources (worker only).

    Writes ``reference.py`` and ``input.py`` into ``directory`` and imports them under
    unique names. Inputs follow upstream (A.6): Python's ``random``, NumPy (if present) and
    torch's CPU and CUDA generators are seeded with the derived seed, then
    ``_make_inputs(**input_kwargs)`` runs with the target device as torch's default
    device. W/Q come from the suite's shapes, so the work model is never called here.
    Correctness: the portal's policy for the operator's dtype (relative on the reference).
    """
    import importlib.util
    import random
    import secrets
    import sys

    import torch

    from evaluator.operators.base import (
        BF16_POLICY,
        FP16_POLICY,
        FP32_POLICY,
        CorrectnessPolicy,
        OperatorSpec,
        Work,
    )

    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    modules = {}
    for name in SOURCE_FILES:
        if name not in sources:
            raise PlatformError(f"Operator {slug}: the suite carries no {name}.")
        (folder / name).write_text(sources[name], encoding="utf-8")
    # reference.py may import its sibling input.py (or helpers) by plain name.
    sys.path.insert(0, str(folder))
    for name in SOURCE_FILES:
        module_name = f"atrex_uploaded_{slug}_{name[:-3]}_{secrets.token_hex(4)}"
        spec = importlib.util.spec_from_file_location(module_name, folder / name)
        if spec is None or spec.loader is None:
            raise PlatformError(f"Operator {slug}: cannot load {name}.")
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        spec.loader.exec_module(module)
        modules[name] = module
    model_class = modules["reference.py"].Model
    make = modules["input.py"]._make_inputs

    def input_maker(
        *, device: torch.device, generator: torch.Generator, **input_kwargs: Any
    ) -> dict:
        seed = int(generator.initial_seed())
        random.seed(seed)
        try:
            import numpy

            numpy.random.seed(seed)
        except ImportError:
            pass
        torch.manual_seed(seed)  # the CPU generator and every CUDA generator
        with torch.device(device):
            inputs = make(**input_kwargs)
        if not isinstance(inputs, dict):
            raise TypeError(
                f"{slug} input.py _make_inputs returned {type(inputs).__name__}, not a dict"
            )
        return {
            key: value.to(device) if isinstance(value, torch.Tensor) else value
            for key, value in inputs.items()
        }

    def work_model(init_kwargs: Mapping[str, Any], input_kwargs: Mapping[str, Any]) -> Work:
        raise PlatformError(f"Operator {slug}: W/Q of an uploaded operator come from the suite.")

    policies: dict[str, CorrectnessPolicy] = {
        "bf16": BF16_POLICY,
        "fp16": FP16_POLICY,
        "fp32": FP32_POLICY,
        "fp32_tf32": FP32_POLICY,
    }
    return OperatorSpec(
        slug=slug,
        atrex_id="",
        model_class=model_class,
        input_maker=input_maker,
        work_model=work_model,
        policy=policies.get(dtype, BF16_POLICY),
        dtype=dtype,
        phase="",
    )
