"""Fault drill: push submissions through the real stack while it breaks, and count the losses.

    python bench/fault_drill.py [--faults kill-worker,redis-restart,postgres-restart,child-crash]
        [-n 6 | -n kill-worker=2,child-crash=1] [--json drill.json] [--timeout-s 240]

Everything runs on a PRIVATE stack under a temporary folder, never the shared services: a
PostgreSQL cluster (initdb, run as the postgres user, its own port), a redis-server on its
own port without persistence (so a restart loses every queued message, as Redis does), one
Celery evaluation worker (concurrency 1) and a site worker that runs beat (the reaper),
with short heartbeat and grace settings. For each fault it pushes N small submissions (``-n``:
one N for every fault, or one per fault, a fault not named getting 6)
(examples/bundles/triton-baseline, one operator; a bundle whose kernel kills its own
process for child-crash), breaks the stack while they are queued or running:

* kill-worker: ``kill -9`` of the evaluation worker's whole process tree mid-evaluation,
  then a new worker starts;
* redis-restart: the broker is stopped and started again while jobs are queued;
* postgres-restart: the database is stopped and started again during a run;
* child-crash: the candidate kills its evaluation child (no platform fault);

then waits until every submission is final and prints one row per fault: pushed, final,
published, failed, lost (not final by the deadline), duplicated (more than one succeeded
run, published twice, or a result row twice), results ok (each published submission has
the expected operator statuses), evaluation attempts (shard tries), messages re-sent by the
reaper, seconds. ``--json`` writes the rows.

A bench, not a test; ``tests/submissions/test_faults.py`` runs it with small N.
"""

from __future__ import annotations

import argparse
import glob
import io
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FAULTS = ["kill-worker", "redis-restart", "postgres-restart", "child-crash"]
QUEUE = "eval.cpu-dev"
# The stack's timings: short enough that a drill takes seconds, with the same ratios as
# production (stale after 3 heartbeats).
STACK_SETTINGS = {
    "ATREX_HEARTBEAT_INTERVAL_S": "2",
    "ATREX_HEARTBEAT_STALE_S": "6",
    "ATREX_QUEUED_GRACE_S": "5",
    "ATREX_REAPER_INTERVAL_S": "2",
    "ATREX_MAX_ATTEMPTS": "3",
    "ATREX_DB_RETRY_S": "120",
    "ATREX_TIME_BUDGET_S": "0.2",
    "ATREX_QUOTA_PER_HOUR": "0",
    "ATREX_QUOTA_PER_DAY": "0",
    "ATREX_QUOTA_ACTIVE": "0",
    # The fleet registry measures a GPU's ceilings when a worker starts: nothing to measure
    # on this CPU stack, and it would only delay each worker's start.
    "ATREX_FLEET_MEASURE_CEILINGS": "false",
    "DJANGO_LOG_LEVEL": "WARNING",
    "DJANGO_DEBUG": "false",
}
# A kernel that kills the process evaluating it (the evaluator must mark only that operator).
CRASHING_KERNEL = '''"""Kills its own process when called: the evaluator must survive it."""
import os
import signal

import torch


class Model(torch.nn.Module):
    def __init__(self, **kwargs):
        super().__init__()

    def forward(self, *args, **kwargs):
        os.kill(os.getpid(), signal.SIGKILL)
'''


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until(check: Callable[[], bool], *, timeout_s: float, what: str, poll_s: float = 0.2):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(poll_s)
    raise RuntimeError(f"timed out after {timeout_s:.0f} s waiting for {what}")


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.3):
            return True
    except OSError:
        return False


class PrivatePostgres:
    """A throwaway PostgreSQL cluster owned by the postgres user, on its own port."""

    def __init__(self, root: Path) -> None:
        found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
        if not found:
            raise RuntimeError("no PostgreSQL server binaries under /usr/lib/postgresql")
        self.bin = Path(found[-1]).parent
        self.data = root / "pg"
        self.port = free_port()
        self.log = root / "pg.log"

    def _as_postgres(self, *argv: str, **kwargs) -> subprocess.CompletedProcess:
        runas = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        return subprocess.run([*runas, *argv], check=True, capture_output=True, **kwargs)  # noqa: S603

    def init(self) -> None:
        self.data.mkdir()
        if os.geteuid() == 0:
            shutil.chown(self.data, "postgres", "postgres")
            shutil.chown(self.log.parent, "postgres", "postgres")
        self._as_postgres(
            str(self.bin / "initdb"), "-D", str(self.data), "-U", "postgres",
            "--auth=trust", "-E", "UTF8", "--no-instructions",
        )  # fmt: skip
        self.start()

    def start(self) -> None:
        options = (
            f"-p {self.port} -k {self.data} -c listen_addresses=127.0.0.1 "
            "-c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        )
        self._as_postgres(
            str(self.bin / "pg_ctl"), "-D", str(self.data), "-o", options,
            "-l", str(self.log), "-w", "start",
        )  # fmt: skip

    def stop(self) -> None:
        self._as_postgres(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "fast", "stop")

    @property
    def url(self) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/postgres"


class PrivateRedis:
    """A redis-server on its own port without persistence: a restart empties it."""

    def __init__(self, root: Path) -> None:
        self.port = free_port()
        self.root = root
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(  # noqa: S603
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", str(self.root)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        wait_until(lambda: _answers(self.port), timeout_s=10, what="redis-server")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"


def process_tree(pid: int) -> list[int]:
    """``pid`` and all its descendants (from /proc), parents first."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    tree, todo = [], [pid]
    while todo:
        current = todo.pop()
        tree.append(current)
        todo.extend(children.get(current, []))
    return tree


class Worker:
    """A real Celery worker process (its own session, so it can be killed as a whole)."""

    def __init__(self, name: str, argv: list[str], env: dict[str, str], log: Path) -> None:
        self.name = name
        self.log = log
        with log.open("ab") as handle:
            self.process = subprocess.Popen(  # noqa: S603
                [sys.executable, "-m", "celery", "-A", "atrex_site", "worker", *argv,
                 "--concurrency", "1", "--loglevel", "INFO", "-n", f"{name}@%h",
                 "--without-gossip", "--without-mingle", "--without-heartbeat"],
                cwd=REPO, env=env, stdout=handle, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip

    def kill_tree(self) -> int:
        """``kill -9`` of the worker and every process under it, at once (a machine loss)."""
        victims = process_tree(self.process.pid)
        for pid in victims:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.process.wait()
        return len(victims)

    def wait_ready(self, timeout_s: float = 120) -> None:
        """Until the worker consumes (its log says ``<name>@host ready.``)."""

        def ready() -> bool:
            if self.process.poll() is not None:
                raise RuntimeError(f"worker {self.name} exited; see {self.log}")
            return " ready." in self.log.read_text(errors="replace")

        wait_until(ready, timeout_s=timeout_s, what=f"worker {self.name}")

    def stop(self) -> None:
        if self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.kill_tree()


@dataclass
class FaultRow:
    fault: str
    pushed: int
    final: int = 0
    published: int = 0
    failed: int = 0
    lost: int = 0
    duplicated: int = 0
    results_ok: int = 0
    attempts: int = 0
    resent: int = 0
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)


class Stack:
    """The private stack, with Django configured in this process against it."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.postgres = PrivatePostgres(root)
        self.redis = PrivateRedis(root)
        self.env: dict[str, str] = {}
        self.eval_worker: Worker | None = None
        self.site_worker: Worker | None = None
        self.worker_count = 0

    def start(self) -> None:
        self.postgres.init()
        self.redis.start()
        var = self.root / "var"
        var.mkdir()
        self.env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("ATREX_", "DJANGO_"))},
            **STACK_SETTINGS,
            "DJANGO_SETTINGS_MODULE": "atrex_site.settings.local",
            "DATABASE_URL": self.postgres.url,
            "CELERY_BROKER_URL": self.redis.url,
            "ATREX_VAR_DIR": str(var),
            "PYTHONPATH": str(REPO),
        }
        os.environ.clear()
        os.environ.update(self.env)
        sys.path.insert(0, str(REPO))
        import django

        django.setup()
        from django.core.management import call_command

        from catalogue.services import hardware_profiles_sync, suite_version_import
        from evaluator.suite import load_suite

        call_command("migrate", verbosity=0)
        hardware_profiles_sync()
        suite_version_import(suite=load_suite("atrex-bench-v0.1"))
        self.start_eval_worker()
        self.eval_worker.wait_ready()
        self.site_worker = Worker(
            "drill-site",
            ["-Q", "site", "--beat", "--schedule", str(self.root / "beat-schedule")],
            self.env,
            self.root / "worker-drill-site.log",
        )
        self.site_worker.wait_ready()

    def start_eval_worker(self) -> None:
        self.worker_count += 1
        name = f"drill-eval-{self.worker_count}"
        self.eval_worker = Worker(name, ["-Q", QUEUE], self.env, self.root / f"worker-{name}.log")

    def stop(self) -> None:
        for worker in (self.eval_worker, self.site_worker):
            if worker is not None:
                worker.stop()
        self.redis.stop()
        try:
            self.postgres.stop()
        except subprocess.CalledProcessError:
            pass


def _db_retry(read: Callable[[], object]) -> object:
    """Reads from the drill itself, surviving the database restart it causes."""
    from django.db import InterfaceError, OperationalError, connection

    deadline = time.monotonic() + 60
    while True:
        try:
            return read()
        except (OperationalError, InterfaceError):
            if time.monotonic() > deadline:
                raise
            connection.close()
            time.sleep(0.5)


def _bundle(fault: str, index: int):
    from django.core.files.uploadedfile import SimpleUploadedFile

    examples = REPO / "examples" / "bundles" / "triton-baseline"
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        if fault == "child-crash":
            archive.writestr("rms_norm.py", CRASHING_KERNEL)
            archive.write(examples / "silu_and_mul.py", "silu_and_mul.py")
        else:
            archive.write(examples / "rms_norm.py", "rms_norm.py")
    return SimpleUploadedFile(f"{fault}-{index}.zip", buffer.getvalue(), "application/zip")


EXPECTED = {
    "child-crash": {"rms_norm": "runtime_error", "silu_and_mul": "ok"},
}
EXPECTED_DEFAULT = {"rms_norm": "ok"}


def _push(fault: str, count: int) -> list[int]:
    from django.contrib.auth import get_user_model

    from submissions import services

    owner, _ = get_user_model().objects.get_or_create(username="fault-drill")
    ids = []
    for index in range(count):
        submission = services.submission_create(
            owner=owner, upload=_bundle(fault, index), title=f"drill {fault} #{index}"
        )
        if submission.status != "queued":
            raise RuntimeError(f"{fault}: submission {submission.pk} is {submission.status}")
        ids.append(submission.pk)
    return ids


def _some_run_running(ids: list[int], *, min_shapes: int = 0) -> bool:
    from submissions.models import EvaluationRun

    return EvaluationRun.objects.filter(
        submission_id__in=ids, status="running", shapes_done__gte=min_shapes
    ).exists()


def _all_final(ids: list[int]) -> bool:
    from submissions.models import Submission

    return (
        not Submission.objects.filter(pk__in=ids)
        .exclude(status__in=Submission.FINAL_STATUSES)
        .exists()
    )


def _inject(fault: str, stack: Stack, ids: list[int], row: FaultRow) -> None:
    if fault == "kill-worker":
        _wait_db(lambda: _some_run_running(ids, min_shapes=1), 120, "a run in progress")
        killed = stack.eval_worker.kill_tree()
        row.notes.append(f"kill -9 of {killed} worker processes mid-run")
        time.sleep(1.0)
        stack.start_eval_worker()
    elif fault == "redis-restart":
        _wait_db(lambda: _some_run_running(ids), 120, "a run in progress")
        stack.redis.stop()
        time.sleep(1.0)
        stack.redis.start()
        row.notes.append(f"redis restarted empty with {len(ids) - 1} jobs queued")
    elif fault == "postgres-restart":
        _wait_db(lambda: _some_run_running(ids, min_shapes=1), 120, "a run in progress")
        from django.db import connection

        connection.close()
        stack.postgres.stop()
        time.sleep(2.0)
        stack.postgres.start()
        row.notes.append("postgres down for 2 s during a run")


def _wait_db(check: Callable[[], bool], timeout_s: float, what: str) -> None:
    wait_until(lambda: bool(_db_retry(check)), timeout_s=timeout_s, what=what, poll_s=0.3)


def _count(fault: str, ids: list[int], row: FaultRow) -> None:
    from django.db.models import Count

    from submissions.models import OperatorResult, Score, Shard, StatusChange, Submission

    expected = EXPECTED.get(fault, EXPECTED_DEFAULT)
    submissions = list(Submission.objects.filter(pk__in=ids))
    row.final = sum(s.is_final for s in submissions)
    row.lost = row.pushed - row.final
    row.published = sum(s.status == "published" for s in submissions)
    row.failed = sum(s.status == "failed" for s in submissions)
    tries = Shard.objects.filter(run__submission_id__in=ids)
    row.attempts = tries.count()
    row.resent = sum(max(0, count - 1) for count in tries.values_list("dispatch_count", flat=True))
    for submission in submissions:
        succeeded = submission.runs.filter(status="succeeded").count()
        published = StatusChange.objects.filter(
            submission=submission, to_status="published"
        ).count()
        scores = Score.objects.filter(submission=submission).count()
        doubled = (
            OperatorResult.objects.filter(run__submission=submission)
            .values("run_id", "operator")
            .annotate(n=Count("id"))
            .filter(n__gt=1)
            .exists()
        )
        if succeeded > 1 or published > 1 or scores > 1 or doubled:
            row.duplicated += 1
        if submission.status == "failed":
            row.notes.append(f"#{submission.pk} failed: {submission.error_code}")
        if submission.status != "published":
            continue
        run = submission.runs.get(status="succeeded")
        statuses = dict(run.operator_results.values_list("operator", "status"))
        if all(statuses.get(op) == status for op, status in expected.items()) and scores == 1:
            row.results_ok += 1
        else:
            row.notes.append(f"#{submission.pk} results {statuses}")


def drill(fault: str, stack: Stack, count: int, timeout_s: float) -> FaultRow:
    row = FaultRow(fault=fault, pushed=count)
    started = time.monotonic()
    ids = _push(fault, count)
    _inject(fault, stack, ids, row)
    try:
        _wait_db(lambda: _all_final(ids), timeout_s, f"{fault}: every submission final")
    except RuntimeError as error:
        row.notes.append(str(error))
    row.seconds = round(time.monotonic() - started, 1)
    _db_retry(lambda: _count(fault, ids, row))
    return row


DEFAULT_SUBMISSIONS = 6


def submission_counts(text: str, faults: list[str]) -> dict[str, int]:
    """``-n``'s value, per fault: ``"3"`` (every fault) or ``"kill-worker=2,child-crash=1"``
    (a fault not named gets DEFAULT_SUBMISSIONS)."""
    if "=" not in text:
        return dict.fromkeys(faults, int(text))
    counts = dict.fromkeys(faults, DEFAULT_SUBMISSIONS)
    for pair in text.split(","):
        fault, _, count = pair.strip().partition("=")
        if fault not in FAULTS:
            raise ValueError(f"unknown fault {fault!r} in -n; choose from {FAULTS}")
        counts[fault] = int(count)
    return counts


def print_table(rows: list[FaultRow]) -> None:
    columns = ["fault", "pushed", "final", "published", "failed", "lost", "duplicated",
               "results_ok", "attempts", "resent", "seconds"]  # fmt: skip
    widths = [max(len(c), 16 if c == "fault" else 0) for c in columns]
    print("  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)))
    for row in rows:
        values = [str(getattr(row, c)) for c in columns]
        print("  ".join(v.ljust(w) for v, w in zip(values, widths, strict=True)))
    for row in rows:
        for note in row.notes:
            print(f"  {row.fault}: {note}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--faults", default=",".join(FAULTS))
    parser.add_argument(
        "-n",
        "--submissions",
        default=str(DEFAULT_SUBMISSIONS),
        help="submissions pushed per fault: N, or fault=N,... (one stack drills them all)",
    )
    parser.add_argument("--timeout-s", type=float, default=240.0)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--keep", action="store_true", help="keep the stack's folder (logs)")
    args = parser.parse_args()
    faults = [f.strip() for f in args.faults.split(",") if f.strip()]
    unknown = sorted(set(faults) - set(FAULTS))
    if unknown:
        parser.error(f"unknown faults {unknown}; choose from {FAULTS}")
    try:
        counts = submission_counts(args.submissions, faults)
    except ValueError as error:
        parser.error(f"-n {args.submissions}: {error}")
    root = Path(tempfile.mkdtemp(prefix="atrex-fault-drill-"))
    root.chmod(0o755)  # the postgres user runs the cluster below it
    stack = Stack(root)
    rows: list[FaultRow] = []
    try:
        setup_started = time.monotonic()
        stack.start()
        print(f"private stack up in {time.monotonic() - setup_started:.1f} s under {root}")
        for fault in faults:
            rows.append(drill(fault, stack, counts[fault], args.timeout_s))
            print_table(rows[-1:])
    finally:
        stack.stop()
        if args.keep:
            print(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    print()
    print_table(rows)
    if args.json:
        args.json.write_text(json.dumps([asdict(row) for row in rows], indent=2))
    bad = [r for r in rows if r.lost or r.duplicated or r.results_ok != r.published]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
