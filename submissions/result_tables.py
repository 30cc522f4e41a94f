"""What a submission page shows of a run's results, as plain data: a summary per operator
whose verdict tells the truth, the per-shape rows grouped by operator (each with its
arguments and weight), the status filter, and the run's environment as readable items.

Pure functions over rows the selector read (``selectors.submission_result_tables``); no
query here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from evaluator.figures import significant
from evaluator.scoring import verdict_of

STATUS_GROUPS: dict[str, tuple[str, ...]] = {
    "pass": ("pass",),
    "incorrect": ("incorrect",),
    "fallback": ("fallback",),
    "error": ("compile_error", "runtime_error", "timeout"),
    "missing": ("missing",),
}
"""The page's five kinds of shape result (and its filter's choices): the evaluator's shape
statuses, the three ways of crashing counted together as errors."""
_GROUP_OF = {status: group for group, statuses in STATUS_GROUPS.items() for status in statuses}

VERDICT_WORDS: dict[str, str] = {
    "pass": "every shape passed",
    "incorrect": "a wrong answer on at least one shape",
    "partial": "some shapes passed; the others crashed, timed out or fell back to PyTorch",
    "fallback": "no shape passed; some were correct, computed by PyTorch instead of the kernels",
    "failed": "no shape passed",
    "held": "a sign of deception on a shape: held for an admin's review",
    "missing": "not in the bundle",
}
"""What each operator verdict means, for the page's legend and the verdict's title. The
words are the scoring's per-operator verdicts (``pass`` … ``failed``, ``held``) and
``missing`` for an operator the bundle does not implement."""


def status_group(status: str) -> str:
    """The page's kind of a shape status; an unknown status counts as an error."""
    return _GROUP_OF.get(status, "error")


def operator_verdict(
    *, reported: str | None, counts: Mapping[str, int], wrong: bool = False, held: bool = False
) -> str:
    """One word for an operator's result that never flatters it.

    A verdict the scoring stored (``reported``) is shown as it is. Otherwise it is the
    scoring's own rule (``evaluator.scoring.verdict_of``) over the operator's shapes
    (``counts``: shapes per status group, hidden shapes included; ``wrong``/``held``:
    whether a shape carries a ``wrong`` or ``hold`` verdict code). The one word of the
    page's own: ``missing`` when every shape is missing (the bundle has no file for it),
    where the scoring says ``failed`` (``OperatorSummary.is_missing`` folds such an
    operator whatever word it was given)."""
    if reported:
        return reported
    total = sum(counts.values())
    if total == 0 or counts.get("missing", 0) == total:
        return "missing"
    return verdict_of(counts=counts, wrong=wrong, held=held)


@dataclass
class ShapeRow:
    result: Any  # a ShapeResult
    group: str
    arguments: list  # catalogue.shape_words.ShapeArgument
    weight_share: float | None
    shown: bool


@dataclass
class OperatorSummary:
    operator: str
    importance: float
    score: float
    verdict: str
    verdict_reported: bool
    counts: dict[str, int]
    total: int
    first_error: str
    first_error_shape: str | None
    warnings: list[str]
    rows: list[ShapeRow] = field(default_factory=list)

    @property
    def verdict_words(self) -> str:
        return VERDICT_WORDS.get(self.verdict, self.verdict.replace("_", " "))

    @property
    def first_error_line(self) -> str:
        """The first error in one line: a Python traceback by its last line (the exception
        and its message), any other message as it is."""
        text = self.first_error.strip()
        if text.startswith("Traceback"):
            lines = [line for line in text.splitlines() if line.strip()]
            return lines[-1].strip() if lines else text
        return text

    @property
    def is_missing(self) -> bool:
        """Not in the bundle: every shape missing (whatever verdict the scoring gave)."""
        return self.total == 0 or self.counts.get("missing", 0) == self.total

    @property
    def hidden_rows(self) -> int:
        """Shapes scored but not shown to this reader (the suite's hidden shapes)."""
        return self.total - len(self.rows)

    @property
    def has_errors(self) -> bool:
        """Whether any shown row carries an error message (else the column is left out)."""
        return any(row.result.error for row in self.rows)

    @property
    def shown_rows(self) -> int:
        return sum(1 for row in self.rows if row.shown)


@dataclass
class ResultTables:
    operators: list[OperatorSummary]
    """Every operator with a result, in the run's order (most important first)."""
    status_filter: str
    """The filter in force: "" (every shape) or a key of ``STATUS_GROUPS``."""
    unknown_filter: str | None
    filter_counts: list[tuple[str, int]]
    """(status group, rows this reader sees) for the filter's choices."""

    @property
    def present(self) -> list[OperatorSummary]:
        return [summary for summary in self.operators if not summary.is_missing]

    @property
    def missing(self) -> list[OperatorSummary]:
        return [summary for summary in self.operators if summary.is_missing]

    @property
    def pass_count(self) -> int:
        """Operators whose verdict is ``pass`` (every shape passed)."""
        return sum(1 for summary in self.operators if summary.verdict == "pass")

    @property
    def missing_shapes(self) -> int:
        return sum(summary.total for summary in self.missing)

    @property
    def shown_groups(self) -> list[OperatorSummary]:
        return [summary for summary in self.present if summary.shown_rows]

    @property
    def nothing_shown(self) -> bool:
        """A filter is in force and no row (nor the folded missing operators) matches it."""
        if not self.status_filter:
            return False
        return not self.shown_groups and not (self.status_filter == "missing" and self.missing)

    @property
    def rows_total(self) -> int:
        return sum(count for _, count in self.filter_counts)


def result_tables(
    *,
    operator_results: Sequence[Any],
    shape_results: Sequence[Any],
    status_counts: Mapping[tuple[str, str], tuple[int, float]],
    reported_verdicts: Mapping[str, str],
    arguments: Mapping[tuple[str, str], list],
    status_filter: str,
    wrong_operators: frozenset[str] | set[str] = frozenset(),
    held_operators: frozenset[str] | set[str] = frozenset(),
) -> ResultTables:
    """Group a run's rows for the page.

    ``operator_results`` and ``shape_results``: the run's rows (the shape rows this reader
    may see); ``status_counts``: (operator, shape status) -> (shapes, their weight) over
    every shape of the run, hidden ones included, so that a verdict and a weight share
    are the same for every reader; ``reported_verdicts``: operator -> verdict where the
    scoring stored one; ``arguments``: (operator, shape id) -> the shape's arguments;
    ``status_filter``: the reader's ``?status=`` (unknown values show every shape);
    ``wrong_operators``/``held_operators``: operators with a shape whose codes say a wrong
    result or a sign of deception (for the verdicts not stored)."""
    unknown = None
    if status_filter and status_filter not in STATUS_GROUPS:
        unknown, status_filter = status_filter, ""
    counts: dict[str, dict[str, int]] = {}
    weights: dict[str, float] = {}
    for (operator, status), (count, weight) in status_counts.items():
        by_group = counts.setdefault(operator, dict.fromkeys(STATUS_GROUPS, 0))
        by_group[status_group(status)] += count
        weights[operator] = weights.get(operator, 0.0) + (weight or 0.0)
    rows: dict[str, list[ShapeRow]] = {}
    for result in shape_results:
        group = status_group(result.status)
        total_weight = weights.get(result.operator, 0.0)
        rows.setdefault(result.operator, []).append(
            ShapeRow(
                result=result,
                group=group,
                arguments=arguments.get((result.operator, str(result.shape_id)), []),
                weight_share=result.weight / total_weight if total_weight > 0 else None,
                shown=not status_filter or group == status_filter,
            )
        )
    summaries = []
    for operator_result in operator_results:
        operator = operator_result.operator
        operator_counts = counts.get(operator, dict.fromkeys(STATUS_GROUPS, 0))
        reported = reported_verdicts.get(operator)
        first_error, first_error_shape = operator_result.error or "", None
        operator_rows = rows.get(operator, [])
        if not first_error:
            failing = next((row for row in operator_rows if row.result.error), None)
            if failing is not None:
                first_error = failing.result.error
                first_error_shape = str(failing.result.shape_id)
        summaries.append(
            OperatorSummary(
                operator=operator,
                importance=operator_result.importance,
                score=operator_result.score,
                verdict=operator_verdict(
                    reported=reported,
                    counts=operator_counts,
                    wrong=operator in wrong_operators,
                    held=operator in held_operators,
                ),
                verdict_reported=bool(reported),
                counts=operator_counts,
                total=sum(operator_counts.values()),
                first_error=first_error,
                first_error_shape=first_error_shape,
                warnings=list(operator_result.warnings or []),
                rows=operator_rows,
            )
        )
    visible: dict[str, int] = dict.fromkeys(STATUS_GROUPS, 0)
    for operator_rows in rows.values():
        for row in operator_rows:
            visible[row.group] += 1
    return ResultTables(
        operators=summaries,
        status_filter=status_filter,
        unknown_filter=unknown,
        filter_counts=list(visible.items()),
    )


# --- The run's environment as a definition list ---


@dataclass
class EnvironmentItem:
    label: str
    value: str
    details: list[EnvironmentItem] = field(default_factory=list)


_ENVIRONMENT_LABELS = {
    "device_name": "Device",
    "device": "Runs on",
    "driver": "Driver",
    "torch": "PyTorch",
    "triton": "Triton",
    "python": "Python",
    "harness_version": "Harness",
    "hostname": "Host",
    "clocks_start": "Clocks at the start",
    "clocks_end": "Clocks at the end",
    "sandbox": "Sandbox",
    "start_ahead": "Started ahead of their turn",
    "sanitizer": "Memory checks (compute-sanitizer)",
    "shards": "Parts",
}


def _plain(value: Any) -> str:
    """Any JSON value in words: numbers without e-notation, mappings as ``key: value``."""
    if value is None or value == "" or value == [] or value == {}:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer()):
        return str(int(value))
    if isinstance(value, float):
        return significant(value)
    if isinstance(value, Mapping):
        return "; ".join(f"{key.replace('_', ' ')}: {_plain(item)}" for key, item in value.items())
    if isinstance(value, list | tuple):
        return ", ".join(_plain(item) for item in value)
    return str(value)


def _clocks(clocks: Any) -> str:
    if not isinstance(clocks, Mapping):
        return _plain(clocks)
    parts = []
    if clocks.get("sm_mhz") is not None:
        sm = f"SM {_plain(clocks['sm_mhz'])} MHz"
        if clocks.get("max_sm_mhz") is not None:
            sm += f" (max {_plain(clocks['max_sm_mhz'])})"
        parts.append(sm)
    if clocks.get("mem_mhz") is not None:
        parts.append(f"memory {_plain(clocks['mem_mhz'])} MHz")
    if clocks.get("temperature_c") is not None:
        parts.append(f"{_plain(clocks['temperature_c'])} °C")
    if clocks.get("power_w") is not None:
        parts.append(f"{_plain(clocks['power_w'])} W")
    known = {"sm_mhz", "max_sm_mhz", "mem_mhz", "temperature_c", "power_w"}
    parts += [
        f"{key.replace('_', ' ')}: {_plain(v)}" for key, v in clocks.items() if key not in known
    ]
    return " · ".join(parts) or "—"


def _sandbox(sandbox: Any) -> EnvironmentItem:
    if not isinstance(sandbox, Mapping):
        return EnvironmentItem("Sandbox", _plain(sandbox))
    words = [str(sandbox.get("mode") or "—")]
    if sandbox.get("active"):
        words.append("active: " + ", ".join(str(item) for item in sandbox["active"]))
    missing = sandbox.get("missing") or {}
    if isinstance(missing, Mapping) and missing:
        words.append("missing: " + "; ".join(f"{name} ({why})" for name, why in missing.items()))
    shown = {"mode", "active", "missing"}
    details = [
        EnvironmentItem(key.replace("_", " ").capitalize(), _plain(value))
        for key, value in sandbox.items()
        if key not in shown
    ]
    return EnvironmentItem("Sandbox", " · ".join(words), details)


def _started_ahead(started: Any, depth: Any) -> EnvironmentItem:
    """Whether, and how many, operators' children warmed up ahead of their turn (the
    evaluator's ``start_ahead`` and ``start_ahead_depth``, 1 where a run does not say)."""
    label = _ENVIRONMENT_LABELS["start_ahead"]
    if started is not True:
        return EnvironmentItem(label, _plain(started))
    if isinstance(depth, int) and depth > 1:
        return EnvironmentItem(label, f"the next {depth} operators' children")
    return EnvironmentItem(label, "the next operator's child")


def _operators(names: Any) -> str:
    count = len(names) if isinstance(names, list) else 0
    return f"{count} operator{'s' if count != 1 else ''}"


def _sanitizer(sanitizer: Any) -> EnvironmentItem:
    """The sanitizer pass in a line (each tool, on how many operators, which failed, how
    long), with each tool's operators, skips and failures under "More"."""
    label = _ENVIRONMENT_LABELS["sanitizer"]
    if not isinstance(sanitizer, Mapping):
        return EnvironmentItem(label, _plain(sanitizer))
    if sanitizer.get("missing") or sanitizer.get("error"):
        why = sanitizer.get("missing") or sanitizer.get("error")
        return EnvironmentItem(label, f"not run: {why}")
    tools = sanitizer.get("tools")
    if not isinstance(tools, Mapping) or not tools:
        return EnvironmentItem(label, _plain(sanitizer))
    words, details, failed_any = [], [], False
    for tool, figures in tools.items():
        if not isinstance(figures, Mapping):
            details.append(EnvironmentItem(str(tool), _plain(figures)))
            continue
        failed = figures.get("failed") or []
        failed_any = failed_any or bool(failed)
        words.append(
            f"{tool} on {_operators(figures.get('operators'))}"
            + (f", failed: {', '.join(map(str, failed))}" if failed else "")
        )
        parts = [f"operators: {_plain(figures.get('operators'))}"]
        if isinstance(figures.get("seconds"), int | float):
            parts.append(f"{significant(figures['seconds'], 3)} s")
        parts.append(f"failed: {_plain(failed)}")
        skipped = figures.get("skipped")
        if isinstance(skipped, Mapping) and skipped:
            parts.append("not run on: " + "; ".join(f"{op} ({why})" for op, why in skipped.items()))
        races = figures.get("library_races")
        if isinstance(races, Mapping) and races:
            parts.append(
                "hazards inside library kernels only, not counted: " + ", ".join(map(str, races))
            )
        details.append(EnvironmentItem(str(tool), " · ".join(parts)))
    line = "; ".join(words) + ("" if failed_any else " · no memory error")
    if isinstance(sanitizer.get("pass_s"), int | float):
        line += f" · {significant(sanitizer['pass_s'], 3)} s"
    if sanitizer.get("executable"):
        details.append(EnvironmentItem("Executable", str(sanitizer["executable"])))
    if sanitizer.get("concurrent") is not None:
        details.append(EnvironmentItem("Tools at once", _plain(sanitizer["concurrent"])))
    return EnvironmentItem(label, line, details)


def _shards(shards: Any) -> EnvironmentItem:
    if not isinstance(shards, list):
        return EnvironmentItem("Parts", _plain(shards))
    details = []
    for shard in shards:
        if not isinstance(shard, Mapping):
            continue
        environment = shard.get("environment") or {}
        operators = shard.get("operators") or []
        wall = shard.get("wall_s")
        details.append(
            EnvironmentItem(
                f"Part {shard.get('index')}",
                f"{shard.get('worker') or '—'}"
                f" ({environment.get('device_name') or 'device unknown'})"
                f" · {len(operators)} operator{'s' if len(operators) != 1 else ''}"
                + (f" in {significant(wall, 3)} s" if isinstance(wall, int | float) else ""),
            )
        )
    count = len(details)
    return EnvironmentItem("Parts", f"{count} part{'s' if count != 1 else ''}", details)


def environment_items(environment: Mapping[str, Any] | None) -> list[EnvironmentItem]:
    """The run's ``environment`` block as labelled items, the known keys first in a fixed
    order and in words (clocks, sandbox, parts), any other key after them as it is."""
    environment = environment or {}
    items = []
    for key in [*_ENVIRONMENT_LABELS, *(k for k in environment if k not in _ENVIRONMENT_LABELS)]:
        if key not in environment:
            continue
        value = environment[key]
        if key.startswith("clocks_"):
            if value is None:
                continue  # not measured (a CPU run)
            items.append(EnvironmentItem(_ENVIRONMENT_LABELS[key], _clocks(value)))
        elif key == "sandbox":
            items.append(_sandbox(value))
        elif key == "shards":
            items.append(_shards(value))
        elif key == "start_ahead":
            items.append(_started_ahead(value, environment.get("start_ahead_depth")))
        elif key == "start_ahead_depth":
            continue  # in the start_ahead item
        elif key == "sanitizer":
            items.append(_sanitizer(value))
        else:
            label = _ENVIRONMENT_LABELS.get(key, key.replace("_", " ").capitalize())
            items.append(EnvironmentItem(label, _plain(value)))
    return items
