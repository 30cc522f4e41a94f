"""torch.profiler (Kineto) traces: streamed reading, operator trees, kernel attribution.

The JSON is read one event at a time (``json.JSONDecoder.raw_decode`` over a sliding
buffer), so a trace of a few hundred MB never sits in memory as one document; only what
the attribution needs is kept per event.

Attribution: every unit of time is charged to the operator call that caused it. On a GPU
trace the units are device activities (kernels, memcpy, memset), linked to the CPU
operator that launched them by ``External id``; on a trace without device activity (a
CPU recording) they are the operators' self times on the CPU. From the launching operator
the enclosing operators of the same thread are walked (nesting by time); the time goes to
the rule match chosen by ``traces.mapping`` (engine tier first, then innermost), or to
the unmapped report under the outermost operator's name.
"""

from __future__ import annotations

import json
import math
import re
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from traces.mapping import Derived, OpCall, Rule, RuleSet, ShapeUnknown
from traces.parsing import Limits, MappedRow, ParsedTrace, TraceFormatError, UnmappedRow

OP_CATEGORIES = {"cpu_op", "operator"}
DEVICE_CATEGORIES = {"kernel", "gpu_memcpy", "gpu_memset"}
KEPT_METADATA = ("schemaVersion", "traceName", "displayTimeUnit", "record_shapes", "with_stack")
COMPACT_AT = 4 * (1 << 20)
NO_RULE = "no rule for this operator"
RECORDING_KEY = "atrex_recording"
_SPACE = re.compile(r"[ \t\r\n]*")


class _Stream:
    """A JSON text read from chunks, parsed value by value."""

    def __init__(self, chunks: Iterator[str], name: str) -> None:
        self._chunks = chunks
        self._name = name
        self.buf = ""
        self.pos = 0
        self.eof = False
        self.consumed = 0
        self._decoder = json.JSONDecoder()

    def _fill(self) -> bool:
        if self.eof:
            return False
        if self.pos > COMPACT_AT:
            self.consumed += self.pos
            self.buf = self.buf[self.pos :]
            self.pos = 0
        for chunk in self._chunks:
            self.buf += chunk
            return True
        self.eof = True
        return False

    def _truncated(self) -> TraceFormatError:
        return TraceFormatError(
            f"{self._name}: the JSON ends early (cut off after "
            f"{(self.consumed + len(self.buf)) / 2**20:.1f} MiB); the trace was not written "
            "completely. Record or copy it again.",
            code="trace:truncated",
        )

    def _bad(self, what: str) -> TraceFormatError:
        where = self.consumed + self.pos
        return TraceFormatError(
            f"{self._name}: not valid JSON at character {where}: {what}.",
            code="trace:not-json",
        )

    def skip_ws(self) -> str:
        """The next non-space character (not consumed); '' at the end of the text."""
        while True:
            self.pos = _SPACE.match(self.buf, self.pos).end()
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self._fill():
                return ""

    def expect(self, chars: str) -> str:
        char = self.skip_ws()
        if not char:
            raise self._truncated()
        if char not in chars:
            raise self._bad(f"expected one of {chars!r}, found {char!r}")
        self.pos += 1
        return char

    def value(self) -> Any:
        """The next JSON value; a value that reaches the buffer's end is re-read with more."""
        self.skip_ws()
        while True:
            try:
                value, end = self._decoder.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as exc:
                if self._fill():
                    continue
                if exc.pos >= len(self.buf) - 1 or exc.msg.startswith("Unterminated"):
                    raise self._truncated() from None
                self.pos = exc.pos
                raise self._bad(exc.msg) from None
            # A number (or literal) that ends with the buffer may go on in the next chunk.
            if end >= len(self.buf) and not self.eof and self._fill():
                continue
            self.pos = end
            return value


def iter_document(chunks: Iterator[str], name: str) -> Iterator[tuple[str, Any]]:
    """("meta", (key, value)) for each top-level member, ("event", e) for each trace event."""
    stream = _Stream(chunks, name)
    stream.expect("{")
    if stream.skip_ws() == "}":
        stream.pos += 1
        return
    while True:
        key = stream.value()
        if not isinstance(key, str):
            raise stream._bad("an object key must be a string")
        stream.expect(":")
        if key == "traceEvents":
            stream.expect("[")
            if stream.skip_ws() == "]":
                stream.pos += 1
            else:
                while True:
                    yield "event", stream.value()
                    if stream.expect(",]") == "]":
                        break
            yield "meta", (key, True)
        else:
            yield "meta", (key, stream.value())
        if stream.expect(",}") == "}":
            break
    if stream.skip_ws():
        raise stream._bad("text after the end of the JSON object")


# --------------------------------------------------------------------------- events


@dataclass(slots=True)
class _Op:
    thread: tuple[Any, Any]
    name: str
    start: float
    end: float
    call: OpCall | None
    parent: int = -1
    children: list[int] = field(default_factory=list)
    self_time: float = 0.0


@dataclass
class _Match:
    rule: Rule
    calls: list[OpCall]
    first: int  # index of the first op of the match
    members: tuple[int, ...]


def _dims(raw: Any) -> tuple[tuple[int, ...] | None, ...]:
    out: list[tuple[int, ...] | None] = []
    for item in raw if isinstance(raw, list) else []:
        if isinstance(item, list) and all(isinstance(d, int) for d in item):
            out.append(tuple(item))
        else:
            out.append(None)
    return tuple(out)


def _strings(raw: Any) -> tuple[str, ...]:
    return tuple(str(item) for item in raw) if isinstance(raw, list) else ()


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


class _Collector:
    """What the attribution needs from the event stream, and the checks on it."""

    def __init__(self, rules: RuleSet, limits: Limits, name: str) -> None:
        self.rules = rules
        self.limits = limits
        self.name = name
        self.ops: list[_Op] = []
        self.by_external: dict[Any, int] = {}
        self.device: list[tuple[Any, float, str]] = []
        self.events = 0
        self.op_events = 0
        self.with_dims = 0
        self.device_names: set[str] = set()
        self.metadata: dict[str, Any] = {}
        self.saw_events_key = False

    def meta(self, key: str, value: Any) -> None:
        if key == "traceEvents":
            self.saw_events_key = True
        elif key in KEPT_METADATA:
            self.metadata[key] = value
        elif key == RECORDING_KEY and isinstance(value, dict):
            # scripts/record_trace.py writes how the trace was made (add_metadata_json).
            self.metadata["recording"] = value
        elif key == "deviceProperties" and isinstance(value, list):
            self.metadata["devices"] = sorted(
                {str(d.get("name")) for d in value if isinstance(d, dict) and d.get("name")}
            )
        elif key == "distributedInfo" and isinstance(value, dict):
            self.metadata["distributed"] = {
                k: value[k] for k in ("backend", "rank", "world_size") if k in value
            }

    def event(self, event: Any) -> None:
        self.events += 1
        if self.events > self.limits.max_events:
            raise TraceFormatError(
                f"{self.name}: more than {self.limits.max_events:,} events; record fewer steps "
                "or split the trace.",
                code="trace:too-large",
            )
        if not isinstance(event, dict) or event.get("ph") != "X":
            return
        category = str(event.get("cat", "")).lower()
        start, duration = _number(event.get("ts")), _number(event.get("dur"))
        if start is None or duration is None or duration < 0:
            return
        args = event.get("args") if isinstance(event.get("args"), dict) else {}
        name = str(event.get("name", ""))
        if category in OP_CATEGORIES:
            self.op_events += 1
            call = None
            if "Input Dims" in args:
                self.with_dims += 1
                if self.rules.interesting(name):
                    call = OpCall(
                        name=name,
                        dims=_dims(args.get("Input Dims")),
                        types=_strings(args.get("Input type")),
                        concrete=_strings(args.get("Concrete Inputs")),
                    )
            index = len(self.ops)
            self.ops.append(
                _Op(
                    thread=(event.get("pid"), event.get("tid")),
                    name=name,
                    start=start,
                    end=start + duration,
                    call=call,
                )
            )
            external = args.get("External id")
            if external not in (None, 0):
                self.by_external.setdefault(external, index)
        elif category in DEVICE_CATEGORIES:
            self.device.append((args.get("External id"), duration, name))
            self.device_names.add(category)


def parse_kineto(
    chunks: Iterator[str], *, name: str, rules: RuleSet, limits: Limits
) -> ParsedTrace:
    """Read a torch.profiler JSON trace from text chunks and map its time."""
    collector = _Collector(rules, limits, name)
    for kind, item in iter_document(chunks, name):
        if kind == "event":
            collector.event(item)
        else:
            collector.meta(*item)
    _check(collector)
    _build_trees(collector.ops)
    matches = _match(collector.ops, rules)
    return _attribute(collector, matches)


def _check(collector: _Collector) -> None:
    name = collector.name
    if not collector.saw_events_key:
        raise TraceFormatError(
            f'{name}: a JSON object without "traceEvents": not a torch.profiler trace.',
            code="trace:other-tool",
        )
    if not collector.op_events:
        raise TraceFormatError(
            f"{name}: {collector.events} events but no PyTorch operator events (category "
            "cpu_op): this trace was not written by torch.profiler, or it profiled no PyTorch "
            "operators.",
            code="trace:other-tool",
        )
    if not collector.with_dims:
        raise TraceFormatError(
            f"{name}: the operators carry no input shapes: record with "
            "torch.profiler.profile(..., record_shapes=True).",
            code="trace:no-shapes",
        )


def _build_trees(ops: list[_Op]) -> None:
    """Parent of each op: the innermost op of the same thread whose interval contains it."""
    by_thread: dict[tuple[Any, Any], list[int]] = defaultdict(list)
    for index, op in enumerate(ops):
        by_thread[op.thread].append(index)
    for indices in by_thread.values():
        indices.sort(key=lambda i: (ops[i].start, -ops[i].end, i))
        stack: list[int] = []
        for index in indices:
            op = ops[index]
            while stack and ops[stack[-1]].end <= op.start:
                stack.pop()
            if stack:
                op.parent = stack[-1]
                ops[stack[-1]].children.append(index)
            stack.append(index)
    for op in ops:
        op.self_time = max(
            0.0, (op.end - op.start) - sum(ops[c].end - ops[c].start for c in op.children)
        )


def _siblings(ops: list[_Op]) -> Iterator[list[int]]:
    roots: dict[tuple[Any, Any], list[int]] = defaultdict(list)
    for index, op in enumerate(ops):
        if op.parent < 0:
            roots[op.thread].append(index)
    for indices in roots.values():
        yield sorted(indices, key=lambda i: ops[i].start)
    for op in ops:
        if op.children:
            yield sorted(op.children, key=lambda i: ops[i].start)


def _match_sequence(
    ops: list[_Op], run: list[int], at: int, rule: Rule
) -> list[tuple[int, bool]] | None:
    """The ops of ``run`` from ``at`` on that spell ``rule``'s sequence, with whether each
    was optional; None when a required name is not where it should be."""
    taken: list[tuple[int, bool]] = []
    position = at
    for name, optional in rule.sequence:
        if position < len(run) and ops[run[position]].name == name:
            taken.append((run[position], optional))
            position += 1
        elif not optional:
            return None
    return taken or None


def _match(ops: list[_Op], rules: RuleSet) -> dict[int, _Match]:
    """Rule matches by op index (every member of a sequence points to the same match).

    A sequence match hands its extractor the calls of its required names, in order."""
    matches: dict[int, _Match] = {}
    for index, op in enumerate(ops):
        rule = rules.name_rule(op.name)
        if rule is not None:
            matches[index] = _Match(rule, [op.call] if op.call else [], index, (index,))
    sequences = rules.sequence_rules()
    if not sequences:
        return matches
    for run in _siblings(ops):
        at = 0
        while at < len(run):
            found = None
            for rule in sequences:
                taken = _match_sequence(ops, run, at, rule)
                if taken and not any(i in matches for i, _ in taken):
                    found = (rule, taken)
                    break
            if found is None:
                at += 1
                continue
            rule, taken = found
            required = [i for i, optional in taken if not optional]
            calls = [ops[i].call for i in required]
            match = _Match(
                rule,
                [c for c in calls if c is not None] if all(calls) else [],
                required[0],
                tuple(i for i, _ in taken),
            )
            for i, _ in taken:
                matches[i] = match
            at += len(taken)
    return matches


def _assignments(ops: list[_Op], matches: dict[int, _Match]) -> list[_Match | None]:
    """For each op, the match its time belongs to: the lowest tier among the enclosing
    matches, the innermost within that tier."""
    order = sorted(range(len(ops)), key=lambda i: (ops[i].start, -ops[i].end, i))
    assigned: list[_Match | None] = [None] * len(ops)
    for index in order:
        inherited = assigned[ops[index].parent] if ops[index].parent >= 0 else None
        own = matches.get(index)
        if own is not None and (inherited is None or own.rule.tier <= inherited.rule.tier):
            assigned[index] = own
        else:
            assigned[index] = inherited
    return assigned


def _root_name(ops: list[_Op], index: int) -> str:
    while ops[index].parent >= 0:
        index = ops[index].parent
    return ops[index].name


def _attribute(collector: _Collector, matches: dict[int, _Match]) -> ParsedTrace:
    ops = collector.ops
    assigned = _assignments(ops, matches)
    charged: dict[int, float] = defaultdict(float)  # id(match) -> time
    match_by_id: dict[int, _Match] = {}
    unmapped: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0, 0.0])

    def charge(op_index: int, time_us: float) -> None:
        match = assigned[op_index]
        if match is None:
            entry = unmapped[(_root_name(ops, op_index), NO_RULE)]
            entry[1] += time_us
            return
        match_by_id[id(match)] = match
        charged[id(match)] += time_us

    if collector.device:
        basis = "gpu-kernels"
        for external, duration, kernel in collector.device:
            index = collector.by_external.get(external)
            if index is None:
                entry = unmapped[(kernel[:200], "device activity without a launching operator")]
                entry[0] += 1
                entry[1] += duration
            else:
                charge(index, duration)
    else:
        basis = "cpu-ops"
        for index, op in enumerate(ops):
            if op.self_time > 0:
                charge(index, op.self_time)
    # Calls of unmapped root operators, counted once per root.
    for index, op in enumerate(ops):
        if op.parent < 0 and assigned[index] is None and (op.name, NO_RULE) in unmapped:
            unmapped[(op.name, NO_RULE)][0] += 1

    rows: dict[str, MappedRow] = {}
    for match_id, time_us in charged.items():
        match = match_by_id[match_id]
        members = [ops[i].name for i in match.members]
        try:
            if not match.calls:
                raise ShapeUnknown(f"{members[0]}: no input dimensions recorded")
            derived: Derived = match.rule.extractor(match.calls, match.rule.params)
        except (ShapeUnknown, IndexError, ValueError, TypeError) as exc:
            entry = unmapped[
                (" + ".join(dict.fromkeys(members)), f"{match.rule.operator}: shape unknown: {exc}")
            ]
            entry[0] += 1
            entry[1] += time_us
            continue
        row = MappedRow(
            operator=derived.operator,
            init_kwargs=derived.init_kwargs,
            input_kwargs=derived.input_kwargs,
            calls=1,
            time_us=time_us,
            sources={" + ".join(dict.fromkeys(members))},
            note=derived.note,
        )
        existing = rows.get(row.shape_key)
        if existing is None:
            rows[row.shape_key] = row
        else:
            existing.calls += 1
            existing.time_us += time_us
            existing.sources |= row.sources
    total = math.fsum(r.time_us for r in rows.values()) + math.fsum(v[1] for v in unmapped.values())
    if total <= 0:
        raise TraceFormatError(
            f"{collector.name}: the trace records no {'GPU' if basis == 'gpu-kernels' else 'CPU'} "
            "time to attribute.",
            code="trace:empty",
        )
    metadata = dict(collector.metadata)
    metadata.update(
        {
            "events": collector.events,
            "operator_events": collector.op_events,
            "device_activities": len(collector.device),
        }
    )
    return ParsedTrace(
        format="kineto",
        time_basis=basis,
        rows=sorted(rows.values(), key=lambda r: -r.time_us),
        unmapped=sorted(
            (
                UnmappedRow(name=key[0], reason=key[1], calls=int(v[0]), time_us=v[1])
                for key, v in unmapped.items()
                if v[1] > 0
            ),
            key=lambda r: -r.time_us,
        ),
        metadata=metadata,
    )
