"""Memory safety on the GPU: an operator's smallest shape, called once under NVIDIA's
``compute-sanitizer``.

Pure stdlib (the runner imports it; torch is never needed here). On CUDA, after an
operator's regular child has finished, the runner starts one more child for it with
``compute-sanitizer`` as the wrapper of the child's command (``command``), and the job's
``sanitize`` flag set: that child imports the candidate and makes its correctness calls
for the operator's smallest shape once (one call, checked against the reference, neither
watched nor timed; ``evaluator.measure.evaluate_shape``). The tool is ``memcheck``
(out-of-bounds and misaligned accesses, hardware exceptions); ``racecheck`` (shared-memory
hazards) follows when the memcheck child reports that one of the bundle's own kernels
uses shared memory, or cannot tell; ``initcheck`` (reads of uninitialised global memory)
can be asked for (``--sanitizer-tools``). PyTorch's caching allocator is off in that child
(``PYTORCH_NO_CUDA_MEMORY_CACHING=1``), so each tensor is its own allocation and a read
past a tensor's end is outside any allocation, where the sanitizer sees it.

What the sanitizer prints (its lines start with ``=========``; the candidate's own prints,
which share the log, do not) is parsed by :func:`parse_report`; one error makes the shape
``incorrect`` with code ``memory_error`` (``evaluator.verdicts``), and so the operator
(docs/scoring.md), the error quoting the sanitizer's first report.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

PREFIX = "========="
TOOLS = ("memcheck", "racecheck", "initcheck")
DEFAULT_TOOLS = ("memcheck", "racecheck")
"""racecheck runs only where the memcheck child found (or could not rule out) a kernel of
the bundle's that uses shared memory."""
PADDING_BYTES = 512
"""memcheck's padding after each allocation (bytes)."""
PRINT_LIMIT = 10
"""Reports printed per run: the first is quoted, the count is what the summary says."""
SANITIZER_ENV = {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"}
"""The sanitized child's extra environment: one allocation per tensor (see above)."""
CANDIDATE_PATHS = ("/usr/local/cuda/bin", "/usr/local/cuda/compute-sanitizer", "/opt/cuda/bin")
FIRST_REPORT_LINES = 8
"""Lines of the first report quoted in the shape's error (headline, location, thread,
address and what it is near)."""

# Headlines of the documented error reports (Compute Sanitizer user guide: "Understanding
# Memcheck Errors", "Racecheck Report Modes", "Initcheck Tool"), by kind.
_HEADLINES: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "out_of_bounds",
        re.compile(r"^Invalid __(global|shared|local)__ (read|write|atomic)\b", re.IGNORECASE),
    ),
    ("out_of_bounds", re.compile(r"^Out-of-range (Shared or Local|Global) Address", re.I)),
    ("misaligned", re.compile(r"^Misaligned (Shared or Local|Global)? ?Address", re.I)),
    ("misaligned", re.compile(r"^Invalid (PC|Address Space)\b", re.I)),
    ("uninitialised", re.compile(r"^Uninitialized __(global|shared|local)__ memory read", re.I)),
    ("race", re.compile(r"^(Error|ERROR): Race reported between", re.I)),
    ("race", re.compile(r"^ERROR: Potential (RAW|WAR|WAW) hazard detected", re.I)),
    (
        "hardware_exception",
        re.compile(
            r"^(Illegal Instruction|Hardware Stack Overflow|"
            r"Warp Illegal Address|Malloc/Free Error|Cuda Barrier)",
            re.I,
        ),
    ),
)
_SUMMARY = re.compile(r"^(ERROR|RACECHECK|INITCHECK|LEAK) SUMMARY: (\d+) (error|hazard)", re.I)
_RACE_ERRORS = re.compile(r"\((\d+) errors?, \d+ warnings?\)", re.I)
KIND_WORDS = {
    "out_of_bounds": "an out-of-bounds memory access",
    "misaligned": "a misaligned memory access",
    "uninitialised": "a read of uninitialised memory",
    "race": "a shared-memory data race",
    "hardware_exception": "a hardware exception",
}


@dataclass
class Finding:
    """One error report of the sanitizer: its kind, headline and the lines under it."""

    kind: str
    headline: str
    details: list[str] = field(default_factory=list)

    def text(self, lines: int = FIRST_REPORT_LINES) -> str:
        return "\n".join([self.headline, *self.details[: max(0, lines - 1)]])


@dataclass
class SanitizerReport:
    """What one sanitized run printed: its error reports, in order, and the error count
    of its summary line (None when there was none: the run did not end normally)."""

    tool: str
    findings: list[Finding]
    errors: int | None

    @property
    def clean(self) -> bool:
        """No error reported (and a summary line that says 0, when there is one)."""
        return not self.findings and not self.errors

    def first_error(self, shape_id: str) -> str | None:
        """The shape's error from the first report, or None when the run was clean."""
        if self.clean:
            return None
        if not self.findings:
            return (
                f"shape {shape_id}: compute-sanitizer ({self.tool}) counted {self.errors} "
                "error(s) in one call of the candidate; see the operator's sanitizer log"
            )
        first = self.findings[0]
        total = max(self.errors or 0, len(self.findings))
        return (
            f"shape {shape_id}: compute-sanitizer ({self.tool}) found "
            f"{KIND_WORDS.get(first.kind, 'a memory error')} in one call of the candidate "
            f"({total} error(s)); its first report:\n{first.text()}"
        )


def _sanitizer_lines(text: str) -> Iterable[str]:
    for raw in text.splitlines():
        line = raw.rstrip()
        if line.startswith(PREFIX):
            yield line[len(PREFIX) :]


def parse_report(text: str, tool: str = "memcheck") -> SanitizerReport:
    """The error reports and summary count in a sanitized run's output (lines starting with
    ``=========``; everything else is the program's own output and ignored).

    A report starts at a documented headline ("Invalid __global__ read of size 4 bytes",
    "Error: Race reported between ...", "Uninitialized __global__ memory read ...") and
    takes the indented lines under it, up to a bare ``=========`` or the next headline.
    Racecheck warnings (hazards that are not errors) are not findings.
    """
    findings: list[Finding] = []
    errors: int | None = None
    current: Finding | None = None
    for body in _sanitizer_lines(text):
        stripped = body.strip()
        if not stripped:
            current = None
            continue
        summary = _SUMMARY.match(stripped)
        if summary:
            current = None
            count = int(summary.group(2))
            if summary.group(1).upper() == "RACECHECK":
                race = _RACE_ERRORS.search(stripped)
                count = int(race.group(1)) if race else count
            if summary.group(1).upper() != "LEAK":
                errors = (errors or 0) + count
            continue
        kind = next((k for k, pattern in _HEADLINES if pattern.match(stripped)), None)
        if kind is not None:
            current = Finding(kind=kind, headline=stripped)
            findings.append(current)
        elif current is not None and body.startswith((" ", "\t")):
            current.details.append(stripped)
        else:
            current = None
    return SanitizerReport(tool=tool, findings=findings, errors=errors)


def find_sanitizer(environ: Mapping[str, str] | None = None) -> str | None:
    """The ``compute-sanitizer`` executable: ``ATREX_COMPUTE_SANITIZER``, else on PATH,
    else under ``CUDA_HOME`` or the usual CUDA folders; None when there is none."""
    environ = os.environ if environ is None else environ
    named = environ.get("ATREX_COMPUTE_SANITIZER")
    if named:
        return named if os.access(named, os.X_OK) else None
    found = shutil.which("compute-sanitizer", path=environ.get("PATH"))
    if found:
        return found
    folders = [os.path.join(environ["CUDA_HOME"], "bin")] if environ.get("CUDA_HOME") else []
    for folder in [*folders, *CANDIDATE_PATHS]:
        path = os.path.join(folder, "compute-sanitizer")
        if os.access(path, os.X_OK):
            return path
    return None


def command(executable: str, tool: str) -> list[str]:
    """The wrapper placed before the child's command: one tool, the sanitizer's reports on
    the child's log (``=========`` lines), the candidate's own processes (compilers) left
    alone, leaks not checked (the allocator frees at exit, not per call)."""
    if tool not in TOOLS:
        raise ValueError(f"Unknown sanitizer tool {tool!r}; known: {', '.join(TOOLS)}.")
    wrapper = [
        executable,
        "--tool",
        tool,
        "--print-limit",
        str(PRINT_LIMIT),
        "--target-processes",
        "application-only",
    ]
    if tool == "memcheck":
        # A padding buffer after every allocation: a read just past a tensor's end lands
        # in it, not in the next tensor, whatever the allocations' alignment.
        wrapper += ["--leak-check", "no", "--padding", str(PADDING_BYTES)]
    if tool == "racecheck":
        wrapper += ["--racecheck-report", "analysis"]
    return wrapper


def parse_tools(text: str | None) -> tuple[str, ...]:
    """``--sanitizer-tools`` as given (comma-separated; "none" or "" for none)."""
    if text is None:
        return DEFAULT_TOOLS
    names = tuple(n.strip() for n in text.split(",") if n.strip() and n.strip() != "none")
    unknown = [n for n in names if n not in TOOLS]
    if unknown:
        raise ValueError(
            f"Unknown sanitizer tool(s) {', '.join(unknown)}; known: {', '.join(TOOLS)}."
        )
    return names


def smallest_shape(shapes: Iterable[Any]) -> Any | None:
    """The shape with the least memory traffic (then the least work): the one sanitized."""
    ranked = sorted(
        shapes,
        key=lambda s: (
            int(s.q_read or 0) + int(s.q_write or 0),
            sum(float(v) for v in (s.w_flops or {}).values()),
            str(s.shape_id),
        ),
    )
    return ranked[0] if ranked else None
