"""Shared fixtures. The report header says which database and broker the tests used."""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from pathlib import Path

import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile

# Triton code run in this process (the evaluator's and the examples' tests) runs in the
# interpreter; this must be set before triton is first imported here, whichever test
# module imports it first (torch._dynamo, say, imports triton).
os.environ.setdefault("TRITON_INTERPRET", "1")
# OpenMP threads that have nothing to do sleep rather than spin: the two test processes and
# the evaluators' children they start share two cores, and a spinning thread burns the CPU
# the other lane's work is waiting for. Read when torch is first loaded, so set here; the
# evaluator passes it on to every child it starts (evaluator.launch, evaluator.sandbox).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


# Tests that share an expensive session fixture run on one pytest-xdist worker, so that a
# parallel run (``make test``: ``-n 2 --dist loadgroup``, see README "Tests") starts it
# once, as a serial run does: the test files that use it, by group. Every other test file
# is a group of its own (its module-scoped fixtures are built once). pytest_itemcollected
# fails a run in which a test uses one of these fixtures from a file not listed here.
SHARED_FIXTURE_GROUPS = {
    "celery_worker_process": "celery-worker",
    "vllm_moe_trace": "recorded-traces",
    "plain_trace": "recorded-traces",
}
GROUP_FILES = {
    "celery-worker": {
        "tests/agents/test_campaign_worker.py",
        "tests/browser/test_upload_flow.py",
        "tests/submissions/test_sandbox_worker.py",
        "tests/submissions/test_worker.py",
    },
    "recorded-traces": {
        "tests/traces/test_admin.py",
        "tests/traces/test_mapping.py",
        "tests/traces/test_parsing.py",
        "tests/traces/test_proposal_v1.py",
        "tests/traces/test_services.py",
    },
}
_GROUP_OF_FILE = {path: group for group, paths in GROUP_FILES.items() for path in paths}
# Files whose every test is a work unit of its own: long files of independent tests (each
# evaluates its own inputs; no module, class or costly session fixture), which as one unit
# would run on one process for minutes while the other waits (test_baselines.py alone was
# a quarter of the suite's time). A file added here must keep that so.
SPLIT_FILES = {
    "tests/evaluator/exploits/test_corpus.py",
    "tests/evaluator/hostile/test_hostile.py",
    "tests/evaluator/test_baselines.py",
    "tests/evaluator/test_variants.py",
}


def xdist_unit(nodeid: str) -> str:
    """The xdist work unit of a test: its file's group, else the test itself in a
    SPLIT_FILES file, else its file."""
    path = nodeid.split("::", 1)[0]
    if path in SPLIT_FILES:
        return nodeid
    return _GROUP_OF_FILE.get(path, path)


def pytest_configure(config) -> None:
    """Under pytest-xdist, on the controller: each worker gets its own test slot (the test
    database, Redis database and folders of ``atrex_site/settings/test.py``), numbered
    from this run's ATREX_TEST_SLOT up (slot 1 and ``-n 3``: workers on slots 1, 2, 3).
    The slot must be in the worker's environment before Django's settings load there, so
    it travels in the worker's execnet spec (``popen//env:...``), set before pytest starts
    in that process. pytest-django then appends its own ``_gw<n>`` to the database name,
    which changes nothing else."""
    specs = getattr(config.option, "tx", None)
    if hasattr(config, "workerinput") or not getattr(config.option, "numprocesses", None):
        return
    if not specs:
        return
    first = int(os.environ.get("ATREX_TEST_SLOT") or 0)
    if first + len(specs) - 1 > 15:
        raise pytest.UsageError(
            f"ATREX_TEST_SLOT={first} and {len(specs)} xdist workers need slots "
            f"{first}-{first + len(specs) - 1}; there are only 0-15"
        )
    config.option.tx = [
        spec if "env:ATREX_TEST_SLOT=" in spec else f"{spec}//env:ATREX_TEST_SLOT={first + i}"
        for i, spec in enumerate(specs)
    ]


def pytest_itemcollected(item) -> None:
    """A test that uses a shared session fixture must be in a file of that fixture's group
    (GROUP_FILES), or a parallel run would start the fixture again on another worker."""
    for name in getattr(item, "fixturenames", ()):
        group = SHARED_FIXTURE_GROUPS.get(name)
        if group and xdist_unit(item.nodeid) != group:
            raise pytest.UsageError(
                f"{item.nodeid} uses {name}: add its file to GROUP_FILES[{group!r}] in "
                "tests/conftest.py"
            )


# How long each work unit (xdist_unit) took, in seconds, from a whole run: the scheduler
# sends the longest first (a long file started last would run alone at the end). Refresh
# it with ``make test-durations`` (docs/testing.md); a unit not in it is estimated from
# its number of tests. Only the order of the run depends on it, never its outcome.
DURATIONS_FILE = Path(__file__).with_name("durations.json")


def unit_durations() -> dict[str, float]:
    try:
        return {str(k): float(v) for k, v in json.loads(DURATIONS_FILE.read_text()).items()}
    except (OSError, ValueError, AttributeError):
        return {}


def pytest_addoption(parser) -> None:
    parser.addoption(
        "--test-costs",
        metavar="PATH",
        help="write each test's wall time and CPU time (this process's, its reaped "
        "children's and its running fork servers', set-up to teardown) to PATH as JSON "
        "(docs/testing.md)",
    )


CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _fork_servers_cpu() -> float:
    """CPU seconds so far of this process's running fork servers (``evaluator.forkserver``),
    with the children they forked and reaped (Linux ``/proc``; 0 elsewhere). A server is
    this process's child, reaped only when it stops (at exit, mostly), and the evaluation
    children it forks are its own: without this their CPU reached ``RUSAGE_CHILDREN`` all
    at once, in whatever test stopped the server, or never."""
    module = sys.modules.get("evaluator.forkserver")
    if module is None:
        return 0.0
    total = 0.0
    for server in list(getattr(module, "_servers", {}).values()):
        try:
            fields = Path(f"/proc/{server.process.pid}/stat").read_text().rsplit(")", 1)[1]
        except (OSError, AttributeError):
            continue  # stopped and reaped: its total is in RUSAGE_CHILDREN
        # utime, stime, cutime, cstime: fields 14-17 of stat(5), here counted from field 3.
        total += sum(int(value) for value in fields.split()[11:15]) / CLOCK_TICKS
    return total


def _cpu_seconds() -> tuple[float, float]:
    # A server running at both ends of a test counts what it used meanwhile; one reaped
    # during it, its whole total (RUSAGE_CHILDREN) less what earlier tests counted of it.
    live = _fork_servers_cpu()
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time(), children.ru_utime + children.ru_stime + live


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """With ``--test-costs``: time the test's whole protocol (set-up, call, teardown)."""
    costs = getattr(item.config, "_atrex_test_costs", None)
    if costs is None:
        yield
        return
    started, wall, (own, children) = time.time(), time.perf_counter(), _cpu_seconds()
    yield
    own_after, children_after = _cpu_seconds()
    costs[item.nodeid] = {
        # When it started (seconds since the epoch) and on which process: each process's
        # timeline, for where a run's processes wait or one ends long before the other.
        "start": round(started, 3),
        "worker": os.environ.get("PYTEST_XDIST_WORKER", "main"),
        "wall": round(time.perf_counter() - wall, 3),
        "cpu": round(own_after - own, 3),
        "children_cpu": round(children_after - children, 3),
        "unit": xdist_unit(item.nodeid),
    }


def pytest_sessionstart(session) -> None:
    if session.config.getoption("--test-costs", None):
        session.config._atrex_test_costs = {}


def pytest_sessionfinish(session) -> None:
    """Each xdist worker writes PATH.<worker>; the controller (or a serial run) merges
    them with its own into PATH."""
    config = session.config
    path = config.getoption("--test-costs", None)
    if not path:
        return
    costs = getattr(config, "_atrex_test_costs", {})
    worker = getattr(config, "workerinput", {}).get("workerid")
    if worker:
        Path(f"{path}.{worker}").write_text(json.dumps(costs))
        return
    for part in sorted(Path(path).parent.glob(Path(path).name + ".gw*")):
        costs.update(json.loads(part.read_text()))
        part.unlink()
    Path(path).write_text(json.dumps(costs, indent=1, sort_keys=True) + "\n")


def write_durations(costs_path: str, out: Path = DURATIONS_FILE) -> None:
    """DURATIONS_FILE from a ``--test-costs`` file of a whole run: each unit's wall seconds."""
    units: dict[str, float] = {}
    for cost in json.loads(Path(costs_path).read_text()).values():
        units[cost["unit"]] = units.get(cost["unit"], 0.0) + cost["wall"]
    ranked = dict(sorted(((k, round(v, 1)) for k, v in units.items()), key=lambda kv: -kv[1]))
    out.write_text(json.dumps(ranked, indent=1) + "\n")


@pytest.hookimpl(optionalhook=True)  # -p no:xdist: there is no such hook
def pytest_xdist_make_scheduler(config, log):
    """``--dist loadgroup``: whole files (or GROUP_FILES groups) to one worker each, the
    longest first (DURATIONS_FILE). (xdist's own grouping by ``xdist_group`` marks
    rewrites node ids in a way pytest 9.2 ignores.)"""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    durations = unit_durations()

    class FileGroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return xdist_unit(nodeid)

        def _expected_s(self, scope: str) -> float:
            if scope in durations:
                return durations[scope]
            return 0.5 * len(self.workqueue[scope])

        def _assign_work_unit(self, node) -> None:
            # As LoadScopeScheduling's, but the longest unit left goes first (longest
            # processing time first: the run ends when its last long unit does), and a node
            # id that several tests share (the 15 schemathesis cases of
            # tests/api/test_schemathesis.py have one) sends every one of them, not only
            # the first: xdist's own sent 1 of the 15. The node runs all it was sent
            # before it shuts down.
            scope = max(self.workqueue, key=self._expected_s)
            work_unit = self.workqueue.pop(scope)
            self.assigned_work.setdefault(node, {})[scope] = work_unit
            collection = self.registered_collections[node]
            wanted = {nodeid for nodeid, completed in work_unit.items() if not completed}
            node.send_runtest_some(
                [index for index, nodeid in enumerate(collection) if nodeid in wanted]
            )

    return FileGroupScheduling(config, log)


def pytest_report_header(config) -> list[str]:
    database = settings.DATABASES["default"]
    engine = database["ENGINE"].rsplit(".", 1)[-1]
    where = (
        f"{database.get('HOST') or ''}:{database.get('PORT') or ''}"
        if database.get("HOST")
        else database["NAME"]
    )
    from tests.release import DATA_DIR

    release = (
        f"atrex: release data = {DATA_DIR}"
        if DATA_DIR.is_dir()
        else f"atrex: release data NOT FOUND at {DATA_DIR}: the tests that compare with the "
        "public release will SKIP (put the release's shared/ beside the clone, or set "
        "ATREX_BENCH_DIR; CI fails instead)"
    )
    return [
        f"atrex: database = {engine} ({where})",
        f"atrex: celery broker = {settings.CELERY_BROKER_URL}",
        release,
    ]


def release_skips(reports) -> int:
    """How many of the skipped test reports were skipped for want of the release data."""
    from tests.release import MISSING_RELEASE

    return sum(1 for report in reports if MISSING_RELEASE in str(report.longrepr))


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    """Say loudly, at the end, that tests skipped because the release data is missing."""
    skipped = release_skips(terminalreporter.stats.get("skipped", []))
    if skipped:
        terminalreporter.write_sep(
            "!",
            f"{skipped} tests SKIPPED: the public Atrex-Bench release data is missing",
            red=True,
        )
        terminalreporter.write_line(
            "They compare the suite, the references and the work models with the release. "
            "Put the release's shared/ folder beside the clone (../shared/atrex-bench) or set "
            "ATREX_BENCH_DIR, and run them again; CI (ATREX_TEST_REQUIRE_RELEASE=1) fails instead."
        )


@pytest.fixture
def catalogue(db):
    """Hardware profiles and the foundation suite in the database."""
    from catalogue.services import hardware_profiles_sync, suite_version_import
    from evaluator.suite import load_suite

    hardware_profiles_sync()
    return suite_version_import(suite=load_suite("atrex-bench-v0.1"))


@pytest.fixture
def redis_cache(settings):
    """The default cache in Redis for this test, as in production (``DJANGO_CACHE_URL``), under
    a key prefix of its own (deleted afterwards) on the Redis database of the test slot's
    broker; skips where Redis does not answer (CI requires it)."""
    import uuid

    from django.core.cache import cache

    if not settings.REDIS_AVAILABLE:
        pytest.skip("Redis does not answer on 127.0.0.1:6379")
    prefix = f"test-cache-{uuid.uuid4().hex}"
    settings.CACHES = {
        "default": {
            "BACKEND": "atrex_site.redis_cache.RedisCache",
            "LOCATION": f"redis://127.0.0.1:6379/{15 - settings.TEST_SLOT}",
            "KEY_PREFIX": prefix,
        }
    }
    yield cache
    client = cache.redis_client()
    for key in client.scan_iter(f"{prefix}:*"):
        client.delete(key)


@pytest.fixture
def user(db):
    from tests.factories import UserFactory

    return UserFactory()


@pytest.fixture
def example_zip():
    """``example_zip("triton-baseline", only=["rms_norm.py"])`` -> an uploaded zip file."""
    import io
    import zipfile

    from submissions.demo import EXAMPLE_BUNDLES_DIR

    def build(folder: str, only: list[str] | None = None, name: str | None = None):
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w") as archive:
            for path in sorted((EXAMPLE_BUNDLES_DIR / folder).iterdir()):
                if path.is_file() and (only is None or path.name in only):
                    archive.write(path, path.name)
        return SimpleUploadedFile(name or f"{folder}.zip", buffer.getvalue(), "application/zip")

    return build


def _database_url() -> str:
    """The URL of the test database, for processes that the tests start."""
    from django.db import connection

    config = connection.settings_dict
    if config["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{config['NAME']}"
    return f"postgres://{config['USER']}@{config['HOST']}:{config['PORT']}/{config['NAME']}"


class _WorkerStack:
    """A real Celery worker process on the test broker (Redis when it answers), consuming the
    CPU profile's queue and writing to the test database: started by the first test that
    asks for it, stopped (its fleet registration deleted) when the tests that use it are
    done (``pytest_runtest_teardown``), so that the tests after it on the same process see
    no worker online; started again if a later test asks."""

    QUEUE = "eval.cpu-dev"

    def __init__(self, *, django_db_blocker, tmp_path_factory) -> None:
        self.blocker = django_db_blocker
        self.tmp_path_factory = tmp_path_factory
        self.process = None
        self.log_path = None

    def start(self):
        import os
        import subprocess
        import sys
        import time

        from atrex_site.celery import app

        if self.process is not None:
            return self.log_path
        with self.blocker.unblock():
            url = _database_url()
        with app.connection_for_write() as connection:
            try:
                connection.default_channel.queue_purge(self.QUEUE)
            except Exception:  # noqa: BLE001 - an absent queue has nothing to purge
                pass
        self.log_path = self.tmp_path_factory.mktemp("worker") / "worker.log"
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "atrex_site.settings.test",
            "DATABASE_URL": url,
            "ATREX_TEST_REQUIRE_SERVICES": "0",
        }
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "celery", "-A", "atrex_site", "worker", "-Q", self.QUEUE,
                 "--concurrency", "1", "--loglevel", "INFO", "-n", f"{self.name_prefix}%h",
                 "--without-gossip", "--without-mingle", "--without-heartbeat"],
                env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        time.sleep(1.0)
        if self.process.poll() is not None:
            output = self.log_path.read_text()
            self.process = None
            raise RuntimeError(f"the Celery worker exited at once:\n{output}")
        return self.log_path

    @property
    def name_prefix(self) -> str:
        import os

        return f"test-{os.getpid()}@"

    def stop(self) -> None:
        import os
        import signal
        import subprocess

        if self.process is None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        self.process = None
        from fleet.models import WorkerNode

        with self.blocker.unblock():
            WorkerNode.objects.filter(name__startswith=self.name_prefix).delete()


_WORKER_STACK = pytest.StashKey[_WorkerStack]()


@pytest.fixture(scope="session")
def _celery_worker_stack(
    request, django_db_setup, close_other_db_sessions_at_the_end, django_db_blocker,
    tmp_path_factory,
):  # fmt: skip
    stack = _WorkerStack(django_db_blocker=django_db_blocker, tmp_path_factory=tmp_path_factory)
    request.session.stash[_WORKER_STACK] = stack
    yield stack
    stack.stop()


@pytest.fixture
def celery_worker_process(_celery_worker_stack):
    """The real Celery worker (``_WorkerStack``), started if it is not running: its log path."""
    return _celery_worker_stack.start()


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item, nextitem) -> None:
    """Stop the real worker after the last test in a row that uses it (it is started again
    if a later test asks), so that no worker stays online under the tests that follow."""
    if "celery_worker_process" not in getattr(item, "fixturenames", ()):
        return
    if nextitem is not None and "celery_worker_process" in getattr(nextitem, "fixturenames", ()):
        return
    stack = item.session.stash.get(_WORKER_STACK, None)
    if stack is not None:
        stack.stop()


@pytest.fixture(scope="session")
def close_other_db_sessions_at_the_end(django_db_setup, django_db_blocker):
    """Torn down just before the test database is dropped: sessions of processes and threads
    that the tests started (worker, live server) may linger a moment after they end; wait
    for them, then end the stragglers, so that the database can be dropped. This process's
    own other sessions are ended at once: nothing else runs in it by then, and a connection
    Django opened in another context (the ORM inside Playwright's event loop gets a
    connection of its own) is never closed by Django; waiting for it cost every run 5 s."""
    yield
    import time

    from django.db import connection

    with django_db_blocker.unblock():
        if connection.vendor != "postgresql":
            return
        others = (
            "FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT pid, client_port {others}")  # noqa: S608 - constant text
            own = _own_tcp_ports()
            for pid, port in cursor.fetchall():
                if port in own:
                    cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
            deadline = time.monotonic() + 5.0
            while time.monotonic() < deadline:
                cursor.execute(f"SELECT count(*) {others}")  # noqa: S608 - constant text
                if cursor.fetchone()[0] == 0:
                    return
                time.sleep(0.2)
            cursor.execute(f"SELECT pg_terminate_backend(pid) {others}")  # noqa: S608


def _own_tcp_ports() -> set[int]:
    """The local ports of this process's TCP sockets (Linux /proc; empty elsewhere)."""
    inodes = set()
    try:
        for fd in os.listdir("/proc/self/fd"):
            try:
                target = os.readlink(f"/proc/self/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    except OSError:
        return set()
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 9 and fields[9] in inodes:
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def wait_for_status(submission, statuses: set[str], timeout_s: float = 240.0):
    """Poll the database until the submission reaches one of ``statuses``."""
    import time

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        submission.refresh_from_db()
        if submission.status in statuses:
            return submission
        time.sleep(0.1)
    raise AssertionError(
        f"submission #{submission.pk} still {submission.status} after {timeout_s} s"
    )


@pytest.fixture
def held_messages(monkeypatch):
    """Messages the code under test sends to Celery, kept here instead of reaching the
    broker: for tests that must see a submission stay ``queued`` while the session's real
    worker (``celery_worker_process``, started by other tests) consumes the same queue.
    Yields the list of (task name, args, queue) sent."""
    from atrex_site.celery import app

    sent: list[tuple[str, list, str | None]] = []

    def send_task(name, args=None, kwargs=None, queue=None, **options):
        sent.append((name, list(args or []), queue))

    monkeypatch.setattr(app, "send_task", send_task)
    return sent
