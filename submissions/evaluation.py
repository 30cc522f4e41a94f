"""Runs the evaluator's command line in a child process and follows its progress file.

This module knows how to call ``python -m evaluator run`` (started by ``evaluator.launch``,
which owns the child's environment, scratch folder, process group and timeout); it knows
nothing of the database. The child's own output is kept as a log, never parsed: results
come only from the results file the evaluator writes.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from evaluator.errors import PlatformError
from evaluator.launch import EvaluatorServer, LaunchTimeout, ServerGone, run_evaluator_command

LOG_TAIL_BYTES = 64 * 1024


class EvaluatorTimeout(PlatformError):
    code = "platform:evaluation-timeout"


class EvaluatorCrashed(PlatformError):
    code = "platform:evaluator-crashed"


@dataclass
class EvaluatorJob:
    """Everything one evaluation needs, and where its files go."""

    bundle_path: Path
    suite_definition: dict
    hardware_slug: str
    device: str
    work_dir: Path
    timeout_s: float
    python: str = ""
    extra_args: list[str] = field(default_factory=list)
    # The sandbox options; None: the site's (``sandbox_options()``, reads Django settings).
    # A caller without Django (the agent campaign driver on a GPU node) passes its own.
    sandbox_args: list[str] | None = None

    @property
    def results_path(self) -> Path:
        return self.work_dir / "results.json"

    @property
    def progress_path(self) -> Path:
        return self.work_dir / "progress.jsonl"

    @property
    def log_path(self) -> Path:
        return self.work_dir / "evaluator.log"


@dataclass
class EvaluatorOutcome:
    returncode: int
    results: dict | None
    log_tail: str


def sandbox_paths() -> list[str]:
    """What the submission's code must not see: uploads, every run's files, the site's
    state folder, the SQLite database file, the settings and ``.env``. More paths can be
    listed in ``ATREX_SANDBOX_HIDE`` (os.pathsep-separated), which the evaluator reads."""
    from django.conf import settings

    paths = [
        settings.MEDIA_ROOT,
        settings.ATREX["RUNS_DIR"],
        settings.VAR_DIR,
        settings.BASE_DIR / "atrex_site" / "settings",
        settings.BASE_DIR / ".env",
    ]
    database = settings.DATABASES["default"]
    if database.get("ENGINE", "").endswith("sqlite3") and str(database.get("NAME", "")):
        name = Path(database["NAME"])
        paths += [name, name.with_name(name.name + "-wal"), name.with_name(name.name + "-shm")]
    return [str(path) for path in dict.fromkeys(Path(p) for p in paths) if Path(path).exists()]


def sandbox_options() -> list[str]:
    """``--sandbox MODE --hide PATH ...`` for ``python -m evaluator run``."""
    from django.conf import settings

    options = ["--sandbox", settings.ATREX.get("SANDBOX", "best-effort")]
    for path in sandbox_paths():
        options += ["--hide", path]
    return options


class ProgressReader:
    """Reads the JSON lines that the evaluator appends, tolerating a partial last line."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0

    def read_new(self) -> list[dict]:
        if not self.path.exists():
            return []
        with self.path.open("rb") as handle:
            handle.seek(self.offset)
            chunk = handle.read()
        complete, _, _ = chunk.rpartition(b"\n")
        if not complete:
            return []
        self.offset += len(complete) + 1
        events = []
        for line in complete.splitlines():
            try:
                events.append(json.loads(line))
            except json.JSONDecodeError:
                continue
        return events


def _tail(path: Path, limit: int = LOG_TAIL_BYTES) -> str:
    if not path.exists():
        return ""
    with path.open("rb") as handle:
        handle.seek(max(0, path.stat().st_size - limit))
        return handle.read().decode("utf-8", errors="replace")


def run_evaluator(
    job: EvaluatorJob,
    *,
    on_progress: Callable[[dict], None] | None = None,
    poll_s: float = 0.5,
) -> EvaluatorOutcome:
    """Run ``python -m evaluator run`` for one job and wait for it.

    ``on_progress`` gets every progress event as it appears (and is also called with
    ``{"event": "heartbeat"}`` at each poll so the caller can record liveness).
    """
    job.work_dir.mkdir(parents=True, exist_ok=True)
    suite_path = job.work_dir / "suite.json"
    suite_path.write_text(json.dumps(job.suite_definition))
    for stale in (job.results_path, job.progress_path):
        stale.unlink(missing_ok=True)
    arguments = [
        str(job.bundle_path),
        "--suite",
        str(suite_path),
        "--hardware",
        job.hardware_slug,
        "--device",
        job.device,
        "--out",
        str(job.results_path),
        "--progress",
        str(job.progress_path),
        *(sandbox_options() if job.sandbox_args is None else job.sandbox_args),
        *job.extra_args,
    ]
    reader = ProgressReader(job.progress_path)

    def follow_progress() -> None:
        if on_progress is None:
            return
        for event in reader.read_new():
            on_progress(event)
        # The caller's heartbeat; it raises to stop a run that is no longer its.
        on_progress({"event": "heartbeat"})

    # The run directory is the child's scratch folder (kept: the log and results live there).
    try:
        finished = run_evaluator_command(
            "run",
            arguments,
            scratch=job.work_dir,
            timeout_s=job.timeout_s,
            python=job.python,
            log_path=job.log_path,
            on_poll=follow_progress,
            poll_s=poll_s,
        )
    except LaunchTimeout as timeout:
        raise EvaluatorTimeout(
            f"The evaluation did not finish within {job.timeout_s:.0f} s and was stopped."
        ) from timeout
    return _outcome(job, finished.returncode, reader, on_progress, job.log_path)


def _outcome(
    job: EvaluatorJob,
    returncode: int,
    reader: ProgressReader,
    on_progress: Callable[[dict], None] | None,
    log_path: Path,
) -> EvaluatorOutcome:
    """The outcome of a finished evaluation: its last progress events passed on, its
    results file read (EvaluatorCrashed when there is none, or it is unreadable)."""
    if on_progress is not None:
        for event in reader.read_new():
            on_progress(event)
    results = None
    if job.results_path.exists():
        try:
            results = json.loads(job.results_path.read_text())
        except json.JSONDecodeError as error:
            raise EvaluatorCrashed(
                f"The evaluator wrote an unreadable results file: {error}"
            ) from error
    log_tail = _tail(log_path)
    if results is None:
        raise EvaluatorCrashed(
            f"The evaluator exited with code {returncode} without writing results. "
            f"Last lines of its log:\n{log_tail[-2000:]}"
        )
    return EvaluatorOutcome(returncode=returncode, results=results, log_tail=log_tail)


class EvaluatorSession:
    """An agent campaign's evaluator: one ``python -m evaluator serve`` (through
    ``evaluator.launch.EvaluatorServer``) that evaluates round after round without paying
    the evaluator's and the sandboxed child's start-up each time (``evaluator.serve``).

    The options every round shares are given here; ``run`` takes one round's job (its
    bundle, folder and time limit) and returns what ``run_evaluator`` would. The server is
    started at the first round, and again at the next round after it died or was stopped
    (a timeout). Use as a context manager, or ``close`` it: it must not outlive the campaign.
    """

    def __init__(
        self,
        *,
        suite_definition: dict,
        hardware_slug: str,
        device: str,
        work_dir: Path,
        python: str = "",
        sandbox_args: list[str] | None = None,
        extra_args: list[str] | None = None,
    ) -> None:
        self.suite_definition = suite_definition
        self.hardware_slug = hardware_slug
        self.device = device
        self.work_dir = Path(work_dir)
        self.python = python
        self.sandbox_args = sandbox_args
        self.extra_args = list(extra_args or [])
        self.server: EvaluatorServer | None = None
        self.servers_started = 0

    @property
    def log_path(self) -> Path:
        return self.work_dir / "server.log"

    def _server(self) -> EvaluatorServer:
        if self.server is not None and self.server.alive:
            return self.server
        self.close()
        self.work_dir.mkdir(parents=True, exist_ok=True)
        suite_path = self.work_dir / "suite.json"
        suite_path.write_text(json.dumps(self.suite_definition))
        arguments = [
            "--suite",
            str(suite_path),
            "--hardware",
            self.hardware_slug,
            "--device",
            self.device,
            *(sandbox_options() if self.sandbox_args is None else self.sandbox_args),
            *self.extra_args,
        ]
        self.server = EvaluatorServer(
            "serve", arguments, scratch=self.work_dir, log_path=self.log_path, python=self.python
        )
        self.servers_started += 1
        return self.server

    def run(
        self,
        job: EvaluatorJob,
        *,
        operators: list[str],
        on_progress: Callable[[dict], None] | None = None,
        poll_s: float = 0.5,
    ) -> EvaluatorOutcome:
        """Evaluate ``job.bundle_path`` on ``operators`` (one, a campaign's round) with the
        session's options; ``job``'s suite, device and arguments are not used. Raises
        EvaluatorTimeout after ``job.timeout_s`` (the server is stopped) and
        EvaluatorCrashed when the server died without answering."""
        job.work_dir.mkdir(parents=True, exist_ok=True)
        for stale in (job.results_path, job.progress_path):
            stale.unlink(missing_ok=True)
        reader = ProgressReader(job.progress_path)

        def follow_progress() -> None:
            if on_progress is None:
                return
            for event in reader.read_new():
                on_progress(event)
            on_progress({"event": "heartbeat"})

        request = {
            "bundle": str(job.bundle_path),
            "operators": ",".join(operators),
            "out": str(job.results_path),
            "progress": str(job.progress_path),
            "log_dir": str(job.work_dir / "results.json.logs"),
        }
        server = self._server()
        try:
            answer = server.request(
                request, timeout_s=job.timeout_s, on_poll=follow_progress, poll_s=poll_s
            )
        except LaunchTimeout as timeout:
            raise EvaluatorTimeout(
                f"The evaluation did not finish within {job.timeout_s:.0f} s and was stopped."
            ) from timeout
        except ServerGone as gone:
            raise EvaluatorCrashed(
                f"{gone.message}. Last lines of its log:\n{_tail(self.log_path)[-2000:]}"
            ) from gone
        return _outcome(job, int(answer.get("exit", 1)), reader, on_progress, self.log_path)

    def close(self) -> None:
        """Stop the server (and the child it keeps warm), if one runs."""
        if self.server is not None:
            self.server.close()
            self.server = None

    def __enter__(self) -> EvaluatorSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
