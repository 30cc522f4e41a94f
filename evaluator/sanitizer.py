"""Memory safety on the GPU: each operator's smallest shape, called once under NVIDIA's
``compute-sanitizer``.

Pure stdlib (the runner imports it; torch is never needed here). On CUDA, the runner
(``evaluator.runner.SanitizerPass``) starts one child per tool with ``compute-sanitizer``
as the wrapper of the child's command (``command``), while the last operator is still
measured; once every operator has been measured, each gets a ``sanitize`` job that lists
the operators, and the tools' children run at the same time: each checks its operators one
after another, and for each imports the candidate, builds the smallest shape's inputs and
makes one call of the candidate, neither checked against the reference (the regular child
already did), watched nor timed (``evaluator.child.run_sanitize_job``). The tool is
``memcheck`` (out-of-bounds and misaligned accesses, hardware exceptions); ``racecheck``
(shared-memory hazards) runs for the operators whose regular child compiled a kernel that
uses shared memory, or where that cannot be told (``cache_kernels``, ``native_code``,
``racecheck_reason``); ``initcheck`` (reads of uninitialised global memory) can be asked
for (``--sanitizer-tools``). PyTorch's caching allocator is off in that child
(``PYTORCH_NO_CUDA_MEMORY_CACHING=1``), so each tensor is its own allocation and a read past
a tensor's end is outside any allocation, where the sanitizer sees it. The child gets the
regular children's Triton caches, so nothing compiles under the tool. A child that crashes
(a hardware exception leaves the CUDA context unusable) is replaced by a new one that goes
on from the next operator; the crashing operator's shape gets the error.

Attribution: which operator a report belongs to. The candidate runs inside the sanitized
child and may print, write to any descriptor it can name, start threads and launch work on
other streams; it must not be able to move a report onto another operator or hide one.

* The sanitizer writes its reports to its own log (``--log-file /proc/self/fd/N``): a pipe
  the runner created and reads (``LogTap``), never the child's stdout or stderr, where the
  candidate's prints go. A pipe only takes bytes at its end: a candidate that finds it and
  writes into it can add lines (a fake report blames an operator more, never less) but
  cannot remove, reorder or rewrite what the sanitizer wrote; lines that the tool did not
  write in its documented format are ignored (``parse_report``), and a report the tool
  wrote keeps its place in the stream whatever precedes it (a candidate's partial line
  could otherwise glue itself to the start of the tool's line on a shared log).
* The boundaries between operators are the harness's frames on the result pipe
  (``operator_start`` and ``operator_done``), signed with the run's key like every other
  record (``evaluator.frames``), which the candidate cannot read: it cannot forge, move or
  drop a boundary without the runner stopping the child for a forged frame. Before
  ``operator_done`` the harness synchronises the whole device (every stream's work has
  finished, so the tool has seen every kernel of the call). The child then waits for the
  runner's go-ahead, which the runner sends once the tool's log has been quiet for
  ``QUIET_S`` (the tool's reports come from another process): a fresh random token on the
  job pipe, which the next ``operator_start`` carries back. The runner drains the log pipe
  (``LogTap.drain``) before it reads each frame and takes the log's length at each
  ``operator_start`` as the boundary. No code of the next operator runs before that frame;
  an ``operator_start`` without the token just sent (a candidate wrote into the job pipe to
  hurry its child on) leaves the previous boundary unknown.
* A report is blamed on every operator whose window holds its headline (``Window``,
  ``attribute``): an operator's window runs from its ``operator_start`` to the next
  operator's, the last one's to the end of the child's log. Where a boundary cannot be
  trusted, the window stays open to the end of that child's log, so a later report is
  blamed on this operator as well as on the one whose window it falls in: an operator that
  left a thread of its own running (the harness finds it after the call, ``outside_work``)
  or tampered, one whose go-ahead was not waited for, one whose ``operator_done`` never
  came (the child crashed or timed out: every report after its start is its). Reports
  before the first operator's start (the harness's start-up, no candidate code) blame no
  operator and are listed in the digest (``outside_operators``).
* Should the tool refuse the pipe by path (the first child never starts and the pipe stays
  empty), the pass runs again with the tool's reports on the child's own output, read
  through the same pipe and cut at the same signed frames; the digest says so
  (``shared_log``), since there a candidate's prints sit among the tool's lines: it could
  make its own operator's quoted report one of its prints, or glue a partial line to the
  start of one of the tool's lines to hide it.
* The tool stops printing after ``PRINT_LIMIT`` reports in one process: once a child has
  printed that many, it is stopped after the current operator and a new child goes on, so
  one operator's reports cannot use up another's.

So a report lands on the operator whose code was running when the sanitizer saw the kernel,
or, when that cannot be told, on every operator that may have run it; the bundle cannot
shift a report from one of its operators to another, only add more. (Native code in the
candidate's process could disable the tool itself; that, as everything one process cannot
do against code inside it, is the sandbox's and the review's concern: the sanitizer finds
memory errors, it is not a tamper-proof monitor.)

What the sanitizer prints (its lines start with ``=========``) is parsed by
:func:`parse_report`; one error makes the shape ``incorrect`` with code ``memory_error``
(``evaluator.verdicts``), and so the operator (docs/scoring.md), the error quoting the
sanitizer's first report.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PREFIX = "========="
TOOLS = ("memcheck", "racecheck", "initcheck")
DEFAULT_TOOLS = ("memcheck", "racecheck")
"""racecheck runs only where a kernel the operator's regular child compiled uses shared
memory, or where that cannot be told (``racecheck_reason``)."""
PADDING_BYTES = 512
"""memcheck's padding after each allocation (bytes)."""
PRINT_LIMIT = 10
"""Reports printed per run: the first is quoted, the count is what the summary says."""
SANITIZER_ENV = {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"}
"""The sanitized child's extra environment: one allocation per tensor (see above)."""
CANDIDATE_PATHS = ("/usr/local/cuda/bin", "/usr/local/cuda/compute-sanitizer", "/opt/cuda/bin")
QUIET_S = 0.1
"""After an operator's ``operator_done``, the runner waits until the sanitizer's log has
been quiet this long (at most ``SETTLE_MAX_S``) before it lets the child go on: the
tool's reports of the call, written by another process, are in the log by then."""
SETTLE_MAX_S = 2.0
GO_TOKEN_BYTES = 16
"""The go-ahead: this many ASCII characters of a fresh random token on the job pipe."""
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


def command(executable: str, tool: str, log_fd: int | None = None) -> list[str]:
    """The wrapper placed before the child's command: one tool, the sanitizer's reports on
    the descriptor ``log_fd`` (a ``LogTap``'s pipe; the child's log when None), the
    candidate's own processes (compilers) left alone, leaks not checked (the allocator
    frees at exit, not per call)."""
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
    if log_fd is not None:
        wrapper += ["--log-file", f"/proc/self/fd/{log_fd}"]
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


# --------------------------------------------------------------------------- attribution


class LogTap:
    """The sanitizer's own log: a pipe whose write end goes to ``compute-sanitizer``
    (``--log-file /proc/self/fd/N``) and whose read end the runner drains into ``path``.
    ``size`` is the length read so far: taken at a boundary frame, after ``drain``, it is
    where one operator's window ends and the next one's starts."""

    def __init__(self, path: os.PathLike[str] | str) -> None:
        self.path = path
        self.read_fd, self.write_fd = os.pipe()
        # The tool reopens it by path (/proc/self/fd/N) as the sandbox user, which the
        # pipe's owner (this process, often root) would refuse: writable by anyone who
        # holds it, readable by the runner alone.
        os.fchmod(self.write_fd, 0o622)
        os.set_blocking(self.read_fd, False)
        self.data = bytearray()
        self.ended = False
        """Every writer has closed the pipe (the tool has exited)."""
        self._file = open(path, "wb")  # noqa: SIM115 - closed by close()

    @property
    def size(self) -> int:
        return len(self.data)

    def drain(self) -> int:
        """Read whatever the pipe holds now (never waits); the log's length after it."""
        while True:
            try:
                chunk = os.read(self.read_fd, 1 << 16)
            except BlockingIOError:
                break
            except OSError:
                break
            if not chunk:
                self.ended = True
                break
            self.data.extend(chunk)
            self._file.write(chunk)
        self._file.flush()
        return self.size

    def close_write_end(self) -> None:
        """Once the child has its copy: the runner keeps only the read end."""
        if self.write_fd >= 0:
            os.close(self.write_fd)
            self.write_fd = -1

    def close(self) -> None:
        """Drain what is left and close everything."""
        self.close_write_end()
        self.drain()
        os.close(self.read_fd)
        self._file.close()

    def text(self) -> str:
        return self.data.decode("utf-8", errors="replace")


@dataclass
class Window:
    """The part of a sanitized child's log that belongs to one operator: from ``start`` (the
    log's length when its ``operator_start`` arrived) to ``end`` (when its ``operator_done``
    did), or to the end of the log when ``end`` is None (its boundary cannot be trusted)."""

    operator: str
    start: int
    end: int | None = None


def _line_start(data: bytes, offset: int) -> int:
    """``offset``, or the start of the next line when it falls inside one (a boundary taken
    while the tool was writing a line gives that line to the window it finishes in)."""
    if offset <= 0 or offset >= len(data) or data[offset - 1 : offset] == b"\n":
        return min(max(offset, 0), len(data))
    following = data.find(b"\n", offset)
    return len(data) if following < 0 else following + 1


def attribute(
    data: bytes, windows: Iterable[Window], tool: str = "memcheck"
) -> tuple[dict[str, SanitizerReport], SanitizerReport]:
    """Each operator's reports, by where their headlines are in the log (``windows``;
    overlapping windows blame a report on every operator whose window holds it), and the
    reports outside every window (before the first operator started)."""
    windows = list(windows)
    by_operator: dict[str, SanitizerReport] = {}
    for window in windows:
        start = _line_start(data, window.start)
        end = len(data) if window.end is None else _line_start(data, window.end)
        report = parse_report(data[start:end].decode("utf-8", errors="replace"), tool)
        # The summary line comes at the child's exit: it is no operator's error count.
        report.errors = len(report.findings) or None
        by_operator[window.operator] = report
    first = min((w.start for w in windows), default=len(data))
    before = parse_report(data[: _line_start(data, first)].decode("utf-8", errors="replace"), tool)
    before.errors = len(before.findings) or None
    return by_operator, before


# --------------------------------------------------------------------------- racecheck's operators

PTX_MAX_BYTES = 16 << 20
"""A compiled kernel's PTX read at most: a larger one counts as using shared memory."""
NATIVE_SUFFIXES = frozenset(
    {".so", ".cu", ".cuh", ".c", ".cc", ".cpp", ".cxx", ".h", ".hpp", ".o", ".a",
     ".cubin", ".ptx", ".fatbin"}
)  # fmt: skip
"""Files of a bundle that are native code: kernels the Triton cache does not list."""
_NATIVE_SOURCE = re.compile(
    r"^\s*(?:from|import)\s+(?:cuda|cupy|numba|pycuda|tilelang|cutlass|cffi|ctypes)\b"
    r"|\b(?:cpp_extension|load_inline|load_library|nvrtc|importlib|__import__)\b",
    re.MULTILINE,
)
"""What in a bundle's Python source can build or load GPU code that is not Triton's (CUDA
Python, CuPy, Numba, TileLang, CUTLASS, PyTorch's extensions), or import what cannot be
read (dynamic imports): a conservative textual check, for honest bundles."""
_SHARED_STATE_SPACE = re.compile(r"\.shared\b")


def _read_own_file(path: os.PathLike[str] | str, limit: int) -> bytes | None:
    """The first ``limit`` bytes of a regular file (never through a link: a child wrote the
    folder), or None."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    with os.fdopen(descriptor, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            return None
        return handle.read(limit)


def cache_kernels(cache_dir: os.PathLike[str] | str) -> dict[str, bool]:
    """The kernels a child compiled, from its Triton cache (``<key>/<name>.json``, the
    compiled kernel's metadata, beside ``<name>.ptx``), each with whether it uses shared
    memory: the metadata's ``shared`` (bytes of dynamic shared memory Triton launches it
    with) above 0, or its PTX naming the shared state space anywhere but Triton's own
    declaration of that memory (inline assembly can declare and use shared memory of its
    own that ``shared`` does not count)."""
    kernels: dict[str, bool] = {}
    root = Path(cache_dir)
    if not root.is_dir():
        return kernels
    keys = [key for key in sorted(root.iterdir()) if key.is_dir() and not key.is_symlink()]
    for path in [path for key in keys for path in sorted(key.glob("*.json"))]:
        if path.name.startswith("__grp__"):
            continue
        raw = _read_own_file(path, 1 << 20)
        try:
            metadata = json.loads(raw or b"")
        except ValueError:
            continue
        if not isinstance(metadata, dict):
            continue
        name, shared = metadata.get("name"), metadata.get("shared")
        if not isinstance(name, str) or not isinstance(shared, int):
            continue  # not a compiled kernel's metadata
        uses = shared > 0
        ptx = _read_own_file(path.with_suffix(".ptx"), PTX_MAX_BYTES + 1)
        if ptx is not None and not uses:
            if len(ptx) > PTX_MAX_BYTES:
                uses = True
            else:
                text = ptx.decode("utf-8", errors="replace")
                uses = any(
                    _SHARED_STATE_SPACE.search(line) and not line.lstrip().startswith(".extern")
                    for line in text.splitlines()
                )
        label = f"{name} ({path.parent.name[:8]})"
        kernels[label] = kernels.get(label, False) or uses
    return kernels


def native_code(bundle_dir: os.PathLike[str] | str) -> str | None:
    """Why a bundle may launch GPU code that no Triton cache lists (a file of native code,
    a Python source that can build or load some: ``_NATIVE_SOURCE``), or None."""
    root = Path(bundle_dir)
    for path in sorted(root.rglob("*")):
        if not path.is_file() or path.is_symlink():
            continue
        relative = path.relative_to(root)
        if path.suffix.lower() in NATIVE_SUFFIXES:
            return f"the bundle holds native code ({relative})"
        if path.suffix == ".py":
            source = _read_own_file(path, 4 << 20) or b""
            found = _NATIVE_SOURCE.search(source.decode("utf-8", errors="replace"))
            if found:
                return f"{relative} names {found.group(0).strip()!r}"
    return None


def racecheck_reason(kernels: Mapping[str, bool], native: str | None) -> tuple[bool, str]:
    """Whether an operator needs racecheck (shared-memory hazards), and why: yes where a
    kernel its regular child compiled uses shared memory, or where that cannot be told (no
    compiled kernel in its cache, as for PyTorch-only code or the Triton interpreter, or
    the bundle may launch code the cache does not list, ``native``); no where every kernel
    it compiled uses none."""
    using = sorted(name for name, uses in kernels.items() if uses)
    if using:
        return True, f"shared memory in {', '.join(using[:3])}"
    if not kernels:
        return True, "cannot tell: no compiled Triton kernel in its cache"
    if native is not None:
        return True, f"cannot tell: {native}"
    return False, f"none of its {len(kernels)} compiled kernel(s) uses shared memory"


# --------------------------------------------------------------------------- library kernels' races

LIBRARY_KERNEL = re.compile(r"nvjet_|xmma|cutlass|cublas|cudnn|at::native::|at_cuda_detail", re.I)
"""Names of kernels that come with NVIDIA's libraries (cuBLAS's ``nvjet_sm90_...`` and
``..._xmma_...`` GEMMs, CUTLASS, cuDNN) or PyTorch's own (``at::native::``)."""
_RACE_ACCESS = re.compile(r"\b(?:Read|Write) access at (.+?)\+0x[0-9a-f]+", re.I)


def race_kernels(finding: Finding) -> list[str]:
    """The kernels a racecheck report names (its two accesses), from its headline and the
    line under it ("Error: Race reported between Read access at K+0xb00" / "and Write access
    at K+0x2aa0")."""
    return [m.group(1).strip() for line in (finding.headline, *finding.details[:2])
            for m in _RACE_ACCESS.finditer(line)]  # fmt: skip


def library_race(finding: Finding, own_kernels: Iterable[str], native: str | None) -> bool:
    """Whether a racecheck report lies inside library kernels only, not the submission's
    code: every kernel it names is a library's by name (``LIBRARY_KERNEL``) and none of the
    kernels the operator's regular child compiled (``own_kernels``: their names, from its
    Triton cache); never when the bundle may launch code no Triton cache lists (``native``),
    when that cache lists no kernel (what the submission ran cannot be told) or the report
    names no kernel. A shared-memory hazard inside a library's kernel is the
    library's (racecheck reports hazards in cuBLAS's sm90 GEMMs, whose barriers it does not
    follow: the H200 run of session 15), whatever arguments the submission passed; memcheck's
    reports are never dropped this way (an out-of-bounds access in a library kernel can be
    the submission's arguments)."""
    own = {name.split(" (")[0] for name in own_kernels}
    if native is not None or finding.kind != "race" or not own:
        return False
    named = race_kernels(finding)
    return bool(named) and all(LIBRARY_KERNEL.search(k) and k not in own for k in named)


def without_library_races(
    report: SanitizerReport, own_kernels: Iterable[str], native: str | None
) -> tuple[SanitizerReport, list[Finding]]:
    """``report`` less its races inside library kernels (``library_race``), and those."""
    own = list(own_kernels)
    dropped = [f for f in report.findings if library_race(f, own, native)]
    if not dropped:
        return report, []
    kept = [f for f in report.findings if f not in dropped]
    return SanitizerReport(tool=report.tool, findings=kept, errors=len(kept) or None), dropped
