"""Reading and validating a kernel bundle without executing anything (pure stdlib).

A bundle is a zip, a tar.gz (or plain tar), a single ``<operator>.py`` or a directory.
It holds one ``<operator>.py`` per operator, each with a top-level ``class Model``;
helper modules may sit beside them; ``atrex.toml`` gives optional metadata. An upstream
Atrex-Bench ``generated_kernel.py`` is accepted inside a folder named after its
operator (``rms_norm/generated_kernel.py``), or alone when the caller says which
operator it is for (``operator_hint``).

The web side calls :func:`inspect_bundle` on uploads; the worker calls
:func:`extract_bundle`, which checks every entry again while it writes.

What a bundle may hold: regular files and folders only (no links, hard links, devices or
sparse files), relative paths without ``..``, at most ``max_entries`` entries, source and
text files only (:data:`ALLOWED_SUFFIXES`), all UTF-8, and at most ``max_total_bytes``
once unpacked, counted on the bytes actually decompressed (a zip or tar.gz bomb is
stopped there, whatever its headers say).
"""

from __future__ import annotations

import ast
import codecs
import io
import os
import stat
import tarfile
import tomllib
import zipfile
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO, Any

from evaluator.errors import BundleError

MiB = 1024 * 1024
DEFAULT_MAX_BYTES = 20 * MiB
DEFAULT_MAX_ENTRIES = 200
DEFAULT_MAX_TOTAL_BYTES = 64 * MiB
ALLOWED_SUFFIXES = (".py", ".cu", ".cuh", ".cpp", ".h", ".toml", ".json", ".md", ".txt")
"""The file types a bundle may hold: kernel sources, their headers, metadata and notes."""
MAX_SOURCE_BYTES = 4 * MiB
"""Largest Python file read for the syntax check."""

UPSTREAM_FILENAME = "generated_kernel.py"
METADATA_FILENAME = "atrex.toml"
METADATA_KEYS = ("title", "dsl", "model", "agent", "notes")
_JUNK_PARTS = frozenset({"__MACOSX", "__pycache__", ".DS_Store", ".git"})
_CHUNK = 1024 * 1024


@dataclass
class BundleManifest:
    """What a bundle holds: operator slug -> relative path, its files, metadata, warnings."""

    operators: dict[str, str]
    files: list[str]
    metadata: dict[str, Any]
    warnings: list[str] = field(default_factory=list)
    kind: str = "directory"
    root: str = ""
    """Folder inside the archive that the paths above are relative to ('' = top level)."""
    problems: dict[str, dict[str, str]] = field(default_factory=dict)
    """Per-operator errors ({"code", "message"}) found in lenient mode (``strict=False``)."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready copy."""
        return {
            "operators": dict(self.operators),
            "files": list(self.files),
            "metadata": dict(self.metadata),
            "warnings": list(self.warnings),
            "kind": self.kind,
            "root": self.root,
            "problems": {slug: dict(problem) for slug, problem in self.problems.items()},
        }


def _error(code: str, message: str) -> BundleError:
    return BundleError(message, code=f"bundle:{code}")


# --------------------------------------------------------------------------- entries


@dataclass
class _Entry:
    name: str  # safe relative posix path, as in the archive
    size: int
    read: Any  # () -> bytes, bounded by MAX_SOURCE_BYTES; only called for small files
    open: Any = None  # () -> binary reader of the whole content (streamed checks)


def _name_encoding_error(shown: str) -> BundleError:
    return _error(
        "name-encoding",
        f"The bundle entry '{shown}' has a name that is not valid UTF-8. Rename it using "
        "UTF-8 (or plain ASCII) characters, then pack and upload the bundle again.",
    )


def safe_relative_path(name: str) -> str:
    """``name`` as a safe relative posix path, or raise ``bundle:unsafe-entry`` (or
    ``bundle:name-encoding`` for a name whose bytes are not UTF-8)."""
    if any(0xD800 <= ord(char) <= 0xDFFF for char in name):
        # tarfile and os.listdir decode undecodable bytes as lone surrogates, which no
        # database, JSON encoder or page can store or show: refuse the name itself.
        raw = name.encode("utf-8", "surrogateescape")
        raise _name_encoding_error(raw.decode("utf-8", "backslashreplace"))
    unsafe = (
        not name
        or any(ord(char) < 32 or ord(char) == 127 for char in name)
        or "\\" in name
        or name.startswith("/")
        or (len(name) > 1 and name[1] == ":")
    )
    parts = [part for part in name.split("/") if part not in ("", ".")]
    if unsafe or not parts or ".." in parts:
        raise _error(
            "unsafe-entry",
            f"The bundle entry {name!r} has an unsafe path (absolute, with '..', a "
            "backslash, a drive letter or a control character). Use plain relative paths "
            "such as 'rms_norm.py'.",
        )
    return "/".join(parts)


def _is_junk(name: str) -> bool:
    parts = name.split("/")
    return any(part in _JUNK_PARTS or part.startswith("._") for part in parts)


def _check_counts(count: int, total: int, *, max_entries: int, max_total_bytes: int) -> None:
    if count > max_entries:
        raise _error(
            "too-large",
            f"The bundle has more than {max_entries} entries; keep only the kernel sources "
            "and the helpers they import.",
        )
    if total > max_total_bytes:
        raise _error(
            "too-large",
            f"The bundle unpacks to more than {max_total_bytes / MiB:g} MiB; remove large "
            "files (data, binaries, caches).",
        )


def _zip_entries(data: bytes, *, max_entries: int, max_total_bytes: int) -> list[_Entry]:
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        infos = archive.infolist()
    except UnicodeDecodeError as exc:
        # An entry flagged as UTF-8 whose name bytes are not.
        raise _name_encoding_error(exc.object.decode("utf-8", "backslashreplace")) from None
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise _error("not-an-archive", f"The zip file cannot be read: {exc}.") from None
    entries: list[_Entry] = []
    total = 0
    for count, info in enumerate(infos, start=1):
        name = safe_relative_path(info.filename.rstrip("/") or info.filename)
        # Only the file-type bits matter: zip writers often store permissions without them.
        file_type = stat.S_IFMT(info.external_attr >> 16)
        if file_type and file_type not in (stat.S_IFREG, stat.S_IFDIR):
            raise _error(
                "unsafe-entry",
                f"The bundle entry {info.filename!r} is a link or a special file; "
                "bundles may hold only regular files and folders.",
            )
        total += info.file_size
        _check_counts(count, total, max_entries=max_entries, max_total_bytes=max_total_bytes)
        if info.is_dir():
            continue
        if info.flag_bits & 0x1:
            raise _error(
                "not-an-archive",
                f"The bundle entry {info.filename!r} is encrypted; upload an archive without "
                "a password.",
            )

        def read(info: zipfile.ZipInfo = info) -> bytes:
            with archive.open(info) as handle:
                return handle.read(MAX_SOURCE_BYTES + 1)

        def open_entry(info: zipfile.ZipInfo = info) -> IO[bytes]:
            return archive.open(info)

        entries.append(_Entry(name=name, size=info.file_size, read=read, open=open_entry))
    return entries


def _check_tar_member(member: tarfile.TarInfo) -> str:
    name = safe_relative_path(member.name)
    if member.issparse():
        raise _error(
            "unsafe-entry",
            f"The bundle entry {member.name!r} is a sparse file; bundles may hold only "
            "regular files and folders.",
        )
    if not (member.isfile() or member.isdir()):
        kind = "link" if (member.issym() or member.islnk()) else "device or special file"
        raise _error(
            "unsafe-entry",
            f"The bundle entry {member.name!r} is a {kind}; bundles may hold only regular "
            "files and folders.",
        )
    return name


def _tar_entries(data: bytes, *, max_entries: int, max_total_bytes: int) -> list[_Entry]:
    entries: list[_Entry] = []
    total = 0
    try:
        archive = tarfile.open(fileobj=io.BytesIO(data), mode="r:*")
        for count, member in enumerate(_iter_tar(archive), start=1):
            name = _check_tar_member(member)
            total += member.size
            _check_counts(count, total, max_entries=max_entries, max_total_bytes=max_total_bytes)
            if member.isdir():
                continue

            def read(member: tarfile.TarInfo = member) -> bytes:
                handle = archive.extractfile(member)
                return handle.read(MAX_SOURCE_BYTES + 1) if handle else b""

            def open_entry(member: tarfile.TarInfo = member) -> IO[bytes]:
                return archive.extractfile(member) or io.BytesIO()

            entries.append(_Entry(name=name, size=member.size, read=read, open=open_entry))
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise _error("not-an-archive", f"The tar archive cannot be read: {exc}.") from None
    return entries


def _iter_tar(archive: tarfile.TarFile) -> Iterator[tarfile.TarInfo]:
    while True:
        member = archive.next()
        if member is None:
            return
        yield member


def _directory_entries(root: Path, *, max_entries: int, max_total_bytes: int) -> list[_Entry]:
    entries: list[_Entry] = []
    total = 0
    count = 0
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in sorted(dirnames + filenames):
            full = Path(dirpath) / name
            relative = full.relative_to(root).as_posix()
            info = full.lstat()
            if stat.S_ISDIR(info.st_mode):
                continue
            if _is_junk(relative):
                continue
            count += 1
            if not stat.S_ISREG(info.st_mode):
                raise _error(
                    "unsafe-entry",
                    f"The bundle entry {relative!r} is a link or a special file; bundles "
                    "may hold only regular files and folders.",
                )
            total += info.st_size
            _check_counts(count, total, max_entries=max_entries, max_total_bytes=max_total_bytes)

            def read(full: Path = full) -> bytes:
                with open(full, "rb") as handle:
                    return handle.read(MAX_SOURCE_BYTES + 1)

            def open_entry(full: Path = full) -> IO[bytes]:
                return open(full, "rb")

            entries.append(_Entry(name=relative, size=info.st_size, read=read, open=open_entry))
        dirnames[:] = [d for d in dirnames if d not in _JUNK_PARTS]
    return entries


# --------------------------------------------------------------------------- detection


def detect_kind(data: bytes) -> str:
    """'zip', 'tar' (gzip-compressed or plain) or 'py', from the content; else raise."""
    if data.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        return "zip"
    if data.startswith(b"\x1f\x8b") or data[257:262] == b"ustar":
        return "tar"
    if b"\x00" not in data[:65536]:
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            pass
        else:
            return "py"
    raise _error(
        "not-an-archive",
        "The upload is neither a zip, a tar.gz nor a Python source file. Upload a .zip or "
        ".tar.gz holding one <operator>.py per operator, or a single <operator>.py.",
    )


def _common_root(names: list[str], known: frozenset[str]) -> str:
    """The single top folder that every entry sits in, unless it is an operator folder."""
    tops = {name.split("/", 1)[0] for name in names}
    if len(tops) != 1 or not all("/" in name for name in names):
        return ""
    top = next(iter(tops))
    return "" if top in known else top


# --------------------------------------------------------------------------- source checks


def _module_level_statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """The statements that run when the module is imported: the top level, and the bodies
    of module-level ``if``/``else``, ``try``/``except``/``else``/``finally`` and ``with``
    (a common way to pick an implementation), not function or class bodies."""
    for node in body:
        yield node
        if isinstance(node, ast.If):
            yield from _module_level_statements(node.body)
            yield from _module_level_statements(node.orelse)
        elif isinstance(node, ast.Try | ast.TryStar):
            yield from _module_level_statements(node.body)
            for handler in node.handlers:
                yield from _module_level_statements(handler.body)
            yield from _module_level_statements(node.orelse)
            yield from _module_level_statements(node.finalbody)
        elif isinstance(node, ast.With):
            yield from _module_level_statements(node.body)


def _defines_model(tree: ast.Module) -> bool:
    for node in _module_level_statements(tree.body):
        if isinstance(node, ast.ClassDef) and node.name == "Model":
            return True
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == "Model" for t in targets):
                return True
        if isinstance(node, ast.ImportFrom | ast.Import):
            if any((alias.asname or alias.name) == "Model" for alias in node.names):
                return True
    return False


def _parse(path: str, source: bytes) -> ast.Module:
    if len(source) > MAX_SOURCE_BYTES:
        raise _error("too-large", f"{path} is larger than {MAX_SOURCE_BYTES // MiB} MiB.")
    try:
        return ast.parse(source, filename=path)
    except SyntaxError as exc:
        raise _error("syntax-error", _syntax_error_text(path, exc)) from None
    except ValueError as exc:  # e.g. null bytes
        raise _error("syntax-error", f"{path}: {exc}.") from None


def _syntax_error_text(path: str, exc: SyntaxError) -> str:
    """``path, line N: message.`` then the offending line with a caret under the column."""
    where = f"line {exc.lineno}" if exc.lineno else "unknown line"
    text = f"{path}, {where}: {exc.msg}."
    line = (exc.text or "").rstrip("\r\n")
    if line.strip():
        shown = line.expandtabs(4)
        indent = len(shown) - len(shown.lstrip())
        column = max((exc.offset or 1) - 1 - (len(line) - len(line.lstrip())), 0)
        text += f"\n    {shown.strip()}\n    {' ' * min(column, len(shown) - indent)}^"
    return text + "\nFix the Python syntax and upload again."


def _read_metadata(source: bytes, warnings: list[str]) -> dict[str, Any]:
    try:
        raw = tomllib.loads(source.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        warnings.append(f"{METADATA_FILENAME} is not valid TOML and was ignored: {exc}")
        return {}
    metadata: dict[str, Any] = {}
    for key, value in raw.items():
        if key not in METADATA_KEYS:
            warnings.append(
                f"{METADATA_FILENAME}: unknown key {key!r} ignored "
                f"(known: {', '.join(METADATA_KEYS)})"
            )
        elif not isinstance(value, str):
            warnings.append(f"{METADATA_FILENAME}: {key!r} must be a string; ignored")
        else:
            metadata[key] = value
    return metadata


def _locate_operators(
    files: list[str], known: frozenset[str], operator_hint: str | None, warnings: list[str]
) -> dict[str, str]:
    operators: dict[str, str] = {}
    for name in files:
        path = PurePosixPath(name)
        if len(path.parts) == 1 and path.suffix == ".py" and path.stem in known:
            operators[path.stem] = name
    for name in files:
        path = PurePosixPath(name)
        if len(path.parts) == 2 and path.name == UPSTREAM_FILENAME and path.parts[0] in known:
            slug = path.parts[0]
            if slug in operators:
                warnings.append(f"{name} ignored: {operators[slug]} implements {slug} already")
            else:
                operators[slug] = name
    if UPSTREAM_FILENAME in files and operator_hint:
        if operator_hint not in known:
            raise _unknown_operator(operator_hint, known)
        if operators and operator_hint not in operators:
            warnings.append(
                f"{UPSTREAM_FILENAME} taken as {operator_hint} beside other operator files"
            )
        operators.setdefault(operator_hint, UPSTREAM_FILENAME)
    return operators


def _unknown_operator(name: str, known: frozenset[str], also: list[str] = ()) -> BundleError:
    others = f" (nor are the other kernel files: {', '.join(also)})" if also else ""
    return _error(
        "unknown-operator",
        f"{name!r} is not an operator of this suite{others}. Name each kernel file after "
        f"its operator, or choose the suite that has it; known operators: "
        f"{', '.join(sorted(known))}.",
    )


def _check_operator_file(slug: str, name: str, source: bytes) -> None:
    tree = _parse(name, source)
    if not _defines_model(tree):
        raise _error(
            "missing-model",
            f"{name} (operator {slug}) has no top-level 'class Model'. Define "
            "class Model(nn.Module) with the reference's __init__ and forward.",
        )


def _check_file_type(name: str) -> None:
    suffix = PurePosixPath(name).suffix.lower()
    if suffix not in ALLOWED_SUFFIXES:
        raise _error(
            "file-type",
            f"The bundle entry {name!r} is not an allowed file type "
            f"({suffix or 'no extension'}). Bundles hold kernel sources and text only: "
            f"{', '.join(ALLOWED_SUFFIXES)}. Remove binaries, build outputs and data files.",
        )


def _check_contents(entries: list[_Entry], *, max_total_bytes: int) -> None:
    """Every entry once: unique, an allowed type, UTF-8 text; the bytes actually unpacked
    are counted against ``max_total_bytes`` as they are decompressed (streamed)."""
    seen: set[str] = set()
    budget = _Budget(max_total_bytes)
    for entry in entries:
        if entry.name in seen:
            raise _error(
                "unsafe-entry",
                f"The bundle entry {entry.name!r} appears twice; each path may appear once.",
            )
        seen.add(entry.name)
        _check_file_type(entry.name)
        if entry.open is None:
            source = entry.read()
            budget.spend(len(source))
            _check_utf8(entry.name, [source])
            continue
        # Sources read again later (syntax check, metadata) are kept from this one pass:
        # a tar.gz cannot seek back without decompressing again from its start.
        kept: list[bytes] | None = [] if entry.name.endswith((".py", ".toml")) else None
        try:
            with entry.open() as reader:
                _check_utf8(entry.name, _keeping(budget.chunks(reader), kept))
        except (zipfile.BadZipFile, tarfile.TarError, OSError, EOFError, zlib.error) as exc:
            raise _error(
                "not-an-archive", f"The bundle entry {entry.name!r} cannot be read: {exc}."
            ) from None
        if kept is not None:
            content = b"".join(kept)
            entry.read = lambda content=content: content


def _keeping(chunks: Iterable[bytes], kept: list[bytes] | None) -> Iterator[bytes]:
    """The chunks, the first MAX_SOURCE_BYTES + 1 bytes of them also kept in ``kept``."""
    size = 0
    for chunk in chunks:
        if kept is not None and size <= MAX_SOURCE_BYTES:
            kept.append(chunk[: MAX_SOURCE_BYTES + 1 - size])
            size += len(kept[-1])
        yield chunk


def _check_utf8(name: str, chunks: Iterable[bytes]) -> None:
    decoder = codecs.getincrementaldecoder("utf-8")()
    offset = 0
    try:
        for chunk in chunks:
            decoder.decode(chunk)
            offset += len(chunk)
        decoder.decode(b"", final=True)
    except UnicodeDecodeError as exc:
        raise _error(
            "encoding",
            f"The bundle entry {name!r} is not UTF-8 text (invalid byte near offset "
            f"{max(offset + exc.start, 0)}). Save sources as UTF-8.",
        ) from None


def _check_entries(
    entries: list[_Entry],
    *,
    kind: str,
    known: frozenset[str],
    operator_hint: str | None,
    strict: bool = True,
    max_total_bytes: int = DEFAULT_MAX_TOTAL_BYTES,
) -> BundleManifest:
    entries = [entry for entry in entries if not _is_junk(entry.name)]
    _check_contents(entries, max_total_bytes=max_total_bytes)
    root = _common_root([entry.name for entry in entries], known)
    by_name = {entry.name[len(root) + 1 :] if root else entry.name: entry for entry in entries}
    files = sorted(by_name)
    if not files:
        raise _error(
            "empty",
            f"The {kind} archive holds no files. Put one <operator>.py per operator in it "
            "(e.g. rms_norm.py) and upload it again.",
        )
    warnings: list[str] = []
    skipped: list[str] = []
    operators = _locate_operators(files, known, operator_hint, warnings)

    for name in files:
        path = PurePosixPath(name)
        if len(path.parts) != 1 or path.suffix != ".py":
            continue
        if path.stem in operators or path.stem in ("__init__", "setup", "conftest"):
            continue
        if name == UPSTREAM_FILENAME:
            continue
        try:
            tree = _parse(name, by_name[name].read())
        except BundleError:
            warnings.append(f"helper {name} does not parse; importing it will fail")
            continue
        if _defines_model(tree):
            skipped.append(name)

    if not operators and skipped:
        raise _unknown_operator(PurePosixPath(skipped[0]).stem, known, also=skipped[1:])
    if skipped:
        warnings.append(
            f"Skipped {len(skipped)} kernel file{'s' if len(skipped) > 1 else ''} for "
            f"operators this suite does not have: {', '.join(skipped)}. They define class "
            "Model but are not evaluated; choose the suite that has them, or name kernel "
            "files after this suite's operators."
        )
    if not operators:
        listed = ", ".join(files[:20]) + (" …" if len(files) > 20 else "") or "(none)"
        hint = ""
        if UPSTREAM_FILENAME in files:
            hint = (
                f" A lone {UPSTREAM_FILENAME} needs its operator: rename it to "
                "<operator>.py or put it in a folder named after the operator."
            )
        raise _error(
            "no-operators",
            f"No kernel file named after a known operator was found. Files found: {listed}. "
            f"Known operators: {', '.join(sorted(known))}.{hint}",
        )

    problems: dict[str, dict[str, str]] = {}
    for slug, name in sorted(operators.items()):
        try:
            _check_operator_file(slug, name, by_name[name].read())
        except BundleError as exc:
            if strict or exc.code == "bundle:too-large":
                raise
            problems[slug] = exc.to_dict()

    metadata: dict[str, Any] = {}
    if METADATA_FILENAME in by_name:
        metadata = _read_metadata(by_name[METADATA_FILENAME].read(), warnings)
    return BundleManifest(
        operators=dict(sorted(operators.items())),
        files=files,
        metadata=metadata,
        warnings=warnings,
        kind=kind,
        root=root,
        problems=problems,
    )


# --------------------------------------------------------------------------- public API


def _load(source: str | os.PathLike[str] | bytes, max_bytes: int) -> tuple[bytes | Path, str]:
    if isinstance(source, bytes | bytearray):
        data = bytes(source)
        if len(data) > max_bytes:
            raise _too_large_upload(max_bytes)
        return data, ""
    path = Path(source)
    if path.is_dir():
        return path, path.name
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise _error("not-found", f"The bundle {str(path)!r} cannot be read: {exc}.") from None
    if size > max_bytes:
        raise _too_large_upload(max_bytes)
    return path.read_bytes(), path.name


def _too_large_upload(max_bytes: int) -> BundleError:
    return _error("too-large", f"The upload is larger than {max_bytes // MiB} MiB.")


def inspect_bundle(
    source: str | os.PathLike[str] | bytes,
    *,
    filename: str | None = None,
    known_operators: Iterable[str],
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_entries: int = DEFAULT_MAX_ENTRIES,
    max_total_bytes: int = DEFAULT_MAX_TOTAL_BYTES,
    operator_hint: str | None = None,
    strict: bool = True,
) -> BundleManifest:
    """Validate a bundle (path, directory or bytes) without executing it.

    The type is detected from the content. ``filename`` names a single-file upload
    (``rms_norm.py``); it defaults to the path's name. Raises BundleError with a
    ``bundle:*`` code (empty, not-an-archive, no-operators, syntax-error,
    missing-model, unknown-operator, unsafe-entry, name-encoding, too-large). With ``strict=False``
    a syntax error or a missing ``class Model`` in one operator's file does not reject
    the bundle: it is recorded in ``manifest.problems`` (the worker then reports that
    operator as ``compile_error`` and evaluates the others).
    """
    known = frozenset(known_operators)
    loaded, default_name = _load(source, max_bytes)
    limits = {"max_entries": max_entries, "max_total_bytes": max_total_bytes}
    if isinstance(loaded, Path):
        entries = _directory_entries(loaded, **limits)
        return _check_entries(
            entries,
            kind="directory",
            known=known,
            operator_hint=operator_hint,
            strict=strict,
            max_total_bytes=max_total_bytes,
        )
    if not loaded:
        raise _error("empty", "The upload is empty (0 bytes). Upload a .zip, .tar.gz or .py.")
    kind = detect_kind(loaded)
    if kind == "zip":
        entries = _zip_entries(loaded, **limits)
    elif kind == "tar":
        entries = _tar_entries(loaded, **limits)
    else:
        entries = [_single_file_entry(loaded, filename or default_name)]
    return _check_entries(
        entries,
        kind=kind,
        known=known,
        operator_hint=operator_hint,
        strict=strict,
        max_total_bytes=max_total_bytes,
    )


def _single_file_entry(data: bytes, filename: str) -> _Entry:
    """A single uploaded source file, kept under its own base name."""
    name = PurePosixPath(filename.replace("\\", "/")).name if filename else ""
    suffix = PurePosixPath(name).suffix
    if suffix and suffix != ".py":
        # Text under another name (notes.txt, kernel.cu) is not a bundle on its own.
        raise _error(
            "not-an-archive",
            f"{name!r} is neither a .zip or .tar.gz archive nor a Python file. Upload a .zip "
            "or .tar.gz holding one <operator>.py per operator, or a single <operator>.py.",
        )
    if not name.endswith(".py"):
        name = f"{PurePosixPath(name).stem or 'upload'}.py"
    return _Entry(name=name, size=len(data), read=lambda: data)


class _Budget:
    """Counts bytes actually unpacked, so a lying archive header cannot bypass the cap."""

    def __init__(self, max_total_bytes: int) -> None:
        self.left = max_total_bytes
        self.max_total_bytes = max_total_bytes

    def spend(self, size: int) -> None:
        """Count ``size`` more bytes; ``bundle:too-large`` past the cap."""
        self.left -= size
        if self.left < 0:
            raise _error(
                "too-large",
                f"The bundle unpacks to more than {self.max_total_bytes / MiB:g} MiB; remove "
                "large files (data, binaries, caches).",
            )

    def chunks(self, reader: IO[bytes]) -> Iterator[bytes]:
        """The reader's content in chunks, counted."""
        while chunk := reader.read(_CHUNK):
            self.spend(len(chunk))
            yield chunk

    def copy(self, reader: IO[bytes], target: Path) -> None:
        target.parent.mkdir(parents=True, exist_ok=True)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
        with os.fdopen(os.open(target, flags, 0o644), "wb") as out:
            for chunk in self.chunks(reader):
                out.write(chunk)


def _target(dest: Path, name: str, root: str) -> Path | None:
    if _is_junk(name):
        return None
    if root:
        if not name.startswith(root + "/"):
            return None
        name = name[len(root) + 1 :]
    target = (dest / name).resolve()
    if dest.resolve() not in target.parents:
        raise _error("unsafe-entry", f"The bundle entry {name!r} points outside the bundle.")
    return target


def extract_bundle(
    source: str | os.PathLike[str] | bytes,
    dest_dir: str | os.PathLike[str],
    *,
    filename: str | None = None,
    known_operators: Iterable[str],
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_total_bytes: int = DEFAULT_MAX_TOTAL_BYTES,
    max_entries: int = DEFAULT_MAX_ENTRIES,
    operator_hint: str | None = None,
    strict: bool = True,
) -> BundleManifest:
    """Validate then unpack a bundle into ``dest_dir`` (streamed, every entry re-checked).

    A single top folder that all entries share is dropped, so the operator files land
    at ``dest_dir/<operator>.py``. Returns the manifest of the unpacked tree.
    """
    known = frozenset(known_operators)
    manifest = inspect_bundle(
        source,
        filename=filename,
        known_operators=known,
        max_bytes=max_bytes,
        max_entries=max_entries,
        max_total_bytes=max_total_bytes,
        operator_hint=operator_hint,
        strict=strict,
    )
    dest = Path(dest_dir)
    dest.mkdir(parents=True, exist_ok=True)
    budget = _Budget(max_total_bytes)
    loaded, _ = _load(source, max_bytes)
    if isinstance(loaded, Path):
        for entry in _directory_entries(
            loaded, max_entries=max_entries, max_total_bytes=max_total_bytes
        ):
            target = _target(dest, entry.name, manifest.root)
            if target is not None:
                with open(loaded / entry.name, "rb") as reader:
                    budget.copy(reader, target)
    elif manifest.kind == "zip":
        with zipfile.ZipFile(io.BytesIO(loaded)) as archive:
            for info in archive.infolist():
                name = safe_relative_path(info.filename.rstrip("/") or info.filename)
                target = _target(dest, name, manifest.root)
                if target is None or info.is_dir():
                    continue
                with archive.open(info) as reader:
                    budget.copy(reader, target)
    elif manifest.kind == "tar":
        with tarfile.open(fileobj=io.BytesIO(loaded), mode="r|*") as archive:
            for member in archive:
                name = _check_tar_member(member)
                target = _target(dest, name, manifest.root)
                if target is None or member.isdir():
                    continue
                reader = archive.extractfile(member)
                if reader is not None:
                    budget.copy(reader, target)
    else:
        (name,) = manifest.files
        budget.copy(io.BytesIO(loaded), dest / name)
    return inspect_bundle(
        dest,
        known_operators=known,
        max_bytes=max_bytes,
        max_entries=max_entries,
        max_total_bytes=max_total_bytes,
        operator_hint=operator_hint,
        strict=strict,
    )
