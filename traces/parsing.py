"""Reading an uploaded production profile into mapped rows (no Django, no torch).

Two formats:

* **Kineto / Chrome JSON** as written by ``torch.profiler`` (``export_chrome_trace``, or
  ``tensorboard_trace_handler``), optionally gzipped, recorded with ``record_shapes=True``:
  read as a stream (``traces.kineto``), events mapped to suite operators by the rules of
  ``traces.mapping``.
* **CSV** (``CSV_COLUMNS``): one row per (application, operator, shape) with its calls and
  GPU time in microseconds; a row with an empty operator is unmapped time (``name`` says
  what it was).

Every problem is a :class:`TraceFormatError` with a stable code and a message that says
what to fix; nothing is returned half-read.
"""

from __future__ import annotations

import codecs
import csv
import gzip
import io
import json
import math
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import IO, Any

from evaluator.errors import UserError

GZIP_MAGIC = b"\x1f\x8b"
CHUNK = 1 << 20
DEFAULT_MAX_BYTES = 1 << 30  # decompressed JSON or CSV
DEFAULT_MAX_EVENTS = 5_000_000
FORMATS = ("auto", "kineto", "csv")
CSV_COLUMNS = ("application", "operator", "init_kwargs", "input_kwargs", "calls", "gpu_time_us")
CSV_REQUIRED = ("operator", "input_kwargs", "calls", "gpu_time_us")
CSV_OPTIONAL = ("application", "init_kwargs", "name")
MAX_LISTED_PROBLEMS = 20


class TraceFormatError(UserError):
    """An upload that cannot be read as a trace (codes ``trace:*``)."""

    code = "trace:invalid"


@dataclass(frozen=True)
class Limits:
    """Caps on one upload: decompressed bytes and profiler events."""

    max_bytes: int = DEFAULT_MAX_BYTES
    max_events: int = DEFAULT_MAX_EVENTS


@dataclass
class MappedRow:
    """GPU time of one (application, operator, shape) in one trace."""

    operator: str
    init_kwargs: dict[str, Any]
    input_kwargs: dict[str, Any]
    calls: int
    time_us: float
    application: str | None = None
    sources: set[str] = field(default_factory=set)
    note: str = ""

    @property
    def shape_key(self) -> str:
        return shape_key(self.operator, self.init_kwargs, self.input_kwargs)


@dataclass
class UnmappedRow:
    """Time the rules did not map: the name it was recorded under and why."""

    name: str
    reason: str
    calls: int
    time_us: float
    application: str | None = None


@dataclass
class ParsedTrace:
    """What one upload holds, mapped: the rows, the unmapped time, and about the file."""

    format: str
    time_basis: str  # "gpu-kernels", "cpu-ops" (a trace without device activity), "csv"
    rows: list[MappedRow]
    unmapped: list[UnmappedRow]
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def mapped_time_us(self) -> float:
        return math.fsum(row.time_us for row in self.rows)

    @property
    def unmapped_time_us(self) -> float:
        return math.fsum(row.time_us for row in self.unmapped)

    @property
    def total_time_us(self) -> float:
        return self.mapped_time_us + self.unmapped_time_us


def shape_key(operator: str, init_kwargs: dict[str, Any], input_kwargs: dict[str, Any]) -> str:
    """One string per distinct shape (canonical JSON), for grouping."""
    return json.dumps([operator, init_kwargs, input_kwargs], sort_keys=True, separators=(",", ":"))


# --------------------------------------------------------------------------- opening


class CappedReader(io.RawIOBase):
    """Bytes of ``source``, gunzipped when they start with the gzip magic, refusing to go
    past ``max_bytes`` (a gzip bomb or an enormous trace stops there, not in memory)."""

    def __init__(self, source: IO[bytes], *, max_bytes: int, name: str) -> None:
        self._name = name
        self._max = max_bytes
        self._read = 0
        head = source.read(2)
        self.gzipped = head == GZIP_MAGIC
        rest = _Prefixed(head, source)
        self._inner: IO[bytes] = gzip.GzipFile(fileobj=rest) if self.gzipped else rest

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        try:
            data = self._inner.read(len(buffer))
        except (OSError, EOFError, zlib.error) as exc:
            raise TraceFormatError(
                f"{self._name}: the gzip stream is damaged or cut short ({exc}); upload the "
                "whole file again.",
                code="trace:truncated",
            ) from None
        self._read += len(data)
        if self._read > self._max:
            raise TraceFormatError(
                f"{self._name}: more than {self._max / 2**20:.0f} MiB"
                f"{' once decompressed' if self.gzipped else ''}; the portal reads traces up "
                "to that size. Record fewer steps (torch.profiler schedule with active=N) or "
                "split the trace.",
                code="trace:too-large",
            )
        buffer[: len(data)] = data
        return len(data)


class _Prefixed(io.RawIOBase):
    def __init__(self, head: bytes, rest: IO[bytes]) -> None:
        self._head = head
        self._rest = rest

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self._head:
            n = min(len(buffer), len(self._head))
            buffer[:n] = self._head[:n]
            self._head = self._head[n:]
            return n
        data = self._rest.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


def text_chunks(reader: IO[bytes], *, name: str) -> Iterator[str]:
    """UTF-8 text of ``reader`` in chunks; a byte sequence that is not UTF-8 is an error."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    while True:
        data = reader.read(CHUNK)
        try:
            text = decoder.decode(data or b"", final=not data)
        except UnicodeDecodeError:
            raise TraceFormatError(
                f"{name}: the file is not UTF-8 text (nor gzipped text): not a JSON trace or CSV.",
                code="trace:not-json",
            ) from None
        if text:
            yield text
        if not data:
            return


def parse_trace(
    source: IO[bytes],
    *,
    name: str = "upload",
    format: str = "auto",
    rules: Any = None,
    limits: Limits | None = None,
) -> ParsedTrace:
    """Read a trace upload (JSON, gzipped JSON or CSV) and map it; TraceFormatError else."""
    from traces import kineto  # the JSON side; imported here to keep the CSV path light
    from traces.mapping import compile_rules

    if format not in FORMATS:
        raise TraceFormatError(
            f"Unknown trace format {format!r}; use one of {', '.join(FORMATS)}.",
            code="trace:bad-format",
        )
    limits = limits or Limits()
    reader = io.BufferedReader(CappedReader(source, max_bytes=limits.max_bytes, name=name))
    chunks = text_chunks(reader, name=name)
    first = ""
    for chunk in chunks:
        first += chunk
        if first.strip():
            break
    if not first.strip():
        raise TraceFormatError(f"{name}: the file is empty.", code="trace:empty")
    kind = _sniff(first, name=name, format=format)
    stream = _chain(first, chunks)
    if kind == "csv":
        return parse_csv(stream, name=name)
    return kineto.parse_kineto(
        stream,
        name=name,
        rules=compile_rules() if rules is None else rules,
        limits=limits,
    )


def _chain(first: str, rest: Iterator[str]) -> Iterator[str]:
    yield first
    yield from rest


def _sniff(text: str, *, name: str, format: str) -> str:
    start = text.lstrip()[:1]
    if format == "csv" or (format == "auto" and start not in "{["):
        header = text.lstrip().splitlines()[0] if text.strip() else ""
        if format == "auto" and "operator" not in header:
            raise TraceFormatError(
                f"{name}: neither JSON nor a trace CSV (the first line is {header[:80]!r}). "
                "Upload a torch.profiler trace (.json or .json.gz) or a CSV with the header "
                f"{','.join(CSV_COLUMNS)}.",
                code="trace:not-json",
            )
        return "csv"
    if start == "[":
        raise TraceFormatError(
            f"{name}: a bare JSON list of events is a Chrome trace from another tool; "
            'torch.profiler writes an object with "traceEvents". Export it with '
            "prof.export_chrome_trace(path) or tensorboard_trace_handler.",
            code="trace:other-tool",
        )
    if start != "{":
        raise TraceFormatError(
            f"{name}: expected a JSON object (a torch.profiler trace); the file starts with "
            f"{text.lstrip()[:40]!r}.",
            code="trace:not-json",
        )
    return "kineto"


# --------------------------------------------------------------------------- CSV


def _json_object(text: str, *, column: str, line: int, problems: list[str]) -> dict | None:
    if not text.strip():
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        problems.append(f"line {line}: {column} is not JSON ({exc.msg})")
        return None
    if not isinstance(value, dict):
        problems.append(f'line {line}: {column} must be a JSON object like {{"hidden_size": 4096}}')
        return None
    return value


def parse_csv(chunks: Iterator[str], *, name: str = "upload") -> ParsedTrace:
    """Rows of the documented CSV (columns CSV_COLUMNS; ``name`` optional)."""
    text = "".join(chunks)
    reader = csv.DictReader(io.StringIO(text))
    header = [h.strip() for h in (reader.fieldnames or [])]
    reader.fieldnames = header
    missing = [c for c in CSV_REQUIRED if c not in header]
    unknown = [c for c in header if c not in CSV_REQUIRED + CSV_OPTIONAL]
    if missing or unknown:
        parts = []
        if missing:
            parts.append(f"missing column(s) {', '.join(missing)}")
        if unknown:
            parts.append(f"unknown column(s) {', '.join(unknown)}")
        raise TraceFormatError(
            f"{name}: {'; '.join(parts)}. The header is {','.join(CSV_COLUMNS)} "
            "(application, init_kwargs and name optional).",
            code="trace:csv-invalid",
        )
    problems: list[str] = []
    rows: dict[tuple[str | None, str], MappedRow] = {}
    unmapped: list[UnmappedRow] = []
    count = 0
    for record in reader:
        count += 1
        line = reader.line_num
        if None in record:
            problems.append(f"line {line}: more fields than the header has")
            continue
        values = {k: (v or "").strip() for k, v in record.items()}
        try:
            calls = int(values["calls"])
            time_us = float(values["gpu_time_us"])
        except ValueError:
            problems.append(
                f"line {line}: calls must be a whole number and gpu_time_us a number "
                f"(got {values['calls']!r}, {values['gpu_time_us']!r})"
            )
            continue
        if calls < 0 or not math.isfinite(time_us) or time_us < 0:
            problems.append(f"line {line}: calls and gpu_time_us must be >= 0")
            continue
        application = values.get("application") or None
        operator = values["operator"]
        if not operator:
            unmapped.append(
                UnmappedRow(
                    name=values.get("name") or "(unnamed)",
                    reason="unmapped in the CSV",
                    calls=calls,
                    time_us=time_us,
                    application=application,
                )
            )
            continue
        init = _json_object(
            values.get("init_kwargs", ""), column="init_kwargs", line=line, problems=problems
        )
        inputs = _json_object(
            values["input_kwargs"], column="input_kwargs", line=line, problems=problems
        )
        if init is None or inputs is None:
            continue
        if not inputs:
            problems.append(f"line {line}: input_kwargs is empty; give the shape's kwargs")
            continue
        row = MappedRow(operator, init, inputs, calls, time_us, application=application)
        key = (application, row.shape_key)
        if key in rows:
            rows[key].calls += calls
            rows[key].time_us += time_us
        else:
            rows[key] = row
        if values.get("name"):
            rows[key].sources.add(values["name"])
    if problems:
        listed = problems[:MAX_LISTED_PROBLEMS]
        more = len(problems) - len(listed)
        raise TraceFormatError(
            f"{name}: {len(problems)} row(s) cannot be read: "
            + "; ".join(listed)
            + (f"; and {more} more" if more else "")
            + ". Nothing was imported.",
            code="trace:csv-invalid",
        )
    if not rows and not unmapped:
        raise TraceFormatError(f"{name}: the CSV has a header but no rows.", code="trace:empty")
    return ParsedTrace(
        format="csv",
        time_basis="csv",
        rows=list(rows.values()),
        unmapped=unmapped,
        metadata={"rows": count},
    )
