"""Load figures for the public pages: a seeded PostgreSQL database, gunicorn, 50 concurrent
clients, for readers without credentials, signed-in readers and API-token clients, with and
without a new score published every few seconds.

    python bench/board_load.py [--submissions 10000] [--reseed] [--clients 50]
        [--duration-s 20] [--max-requests 30000] [--workers 4]
        [--endpoints board,api-board,submission,api-compare] [--viewers anonymous,session,token]
        [--publish-every-s 10] [--publish off|on|both]

1. Creates the database ``atrex_bench`` (``ATREX_BENCH_DB``) on 127.0.0.1:5432 (user
   postgres), migrates it and seeds it with atrex-bench-v1 on h200-sxm: N published public
   submissions, each with a run, 440 shape results (COPY), 30 operator results (COPY) and a
   Score row (bulk_create). An existing seeded database is reused unless ``--reseed``.
2. The site runs as in production: Redis as the shared cache (``ATREX_BENCH_CACHE_URL``,
   default ``redis://127.0.0.1:6379/0``, keys prefixed with the database's name), so that a
   score published by another process retires the shared copies at the next request.
3. A reader who owns nothing (``bench-reader``) signs in (a session cookie, and the CSRF
   cookie a browser holds after its log-in) and gets an API token; ``anonymous`` readers
   send neither.
4. Counts the SQL queries of each measured page per viewer in-process
   (CaptureQueriesContext): the request that builds the shared copy (after a generation
   bump) and the next one, which is served from it.
5. Starts gunicorn on 127.0.0.1 with the production settings (DEBUG off) and the command
   line of ``docker/entrypoint.sh web`` (sync workers, ``GUNICORN_WORKERS``'s default of 4
   unless ``--workers``, the access log written: here to nowhere), fresh per phase, and
   runs the load generator (``load`` sub-command) in a second process against each
   endpoint as each viewer; with ``--publish on`` a thread of this process publishes a new
   scored submission (440 shape results) every ``--publish-every-s`` seconds meanwhile, as
   a worker does. Prints p50/p95/p99 latency, requests/s and the load average per phase,
   and the CPU each request cost the load generator, gunicorn's workers and Redis (their
   CPU time over the phase: Redis's counts whatever else uses it meanwhile). Every phase is
   bounded in requests and seconds.

The load generator shares the machine's cores with the site, as a browser would not: it
is kept cheap so that it takes as little of them as it can. Each of its client threads
sends request bytes built once (the same headers as ``http.client`` sends, ``Connection:
close``) on a new socket, reads the answer into a buffer of its own until the server closes
the connection, and checks its status line and ``Content-Length`` (no header parsing beyond
that, no copy of the body), where ``http.client`` parses every header and copies the body.
A request's latency is from the connection's start to the answer's last byte.

A bench, not a test: it is not collected by pytest. Figures are for the machine it runs on.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

REPO = Path(__file__).resolve().parents[1]
DB_NAME = os.environ.get("ATREX_BENCH_DB", "atrex_bench")
DB_URL = f"postgres://postgres@127.0.0.1:5432/{DB_NAME}"
CACHE_URL = os.environ.get("ATREX_BENCH_CACHE_URL", "redis://127.0.0.1:6379/0")
READER = "bench-reader"
VIEWERS = ("anonymous", "session", "token")
SUITE, HARDWARE = "atrex-bench-v1", "h200-sxm"
GRACE_S = 30.0
GUNICORN_LOG = Path(os.environ.get("TMPDIR", "/tmp")) / "atrex-board-load-gunicorn.log"
STATUSES = ["pass"] * 6 + ["fallback", "incorrect", "compile_error", "runtime_error"]


def _environment() -> dict[str, str]:
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "atrex_site.settings.production",
        "DJANGO_SECRET_KEY": "bench-only-secret-key-not-for-production",  # noqa: S105
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost,testserver",
        "DJANGO_SECURE_SSL_REDIRECT": "false",
        "DATABASE_URL": DB_URL,
        # Shared by every process, as in production; keys apart from other bench databases.
        "DJANGO_CACHE_URL": f"{CACHE_URL}{'&' if '?' in CACHE_URL else '?'}key_prefix={DB_NAME}",
        "ATREX_DEFAULT_SUITE": SUITE,
        "ATREX_DEFAULT_HARDWARE": HARDWARE,
        "DJANGO_LOG_LEVEL": "WARNING",
        # The bench measures what a page costs, not the API's rate limits (their counting
        # still runs on every API request).
        "ATREX_API_RATE_ANON": "100000000/min",
        "ATREX_API_RATE_USER": "100000000/min",
    }


def _psql(sql: str) -> str:
    done = subprocess.run(
        ["psql", "-h", "127.0.0.1", "-U", "postgres", "-d", "postgres", "-tAc", sql],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def database_prepare(*, reseed: bool) -> bool:
    """Create (or recreate) the bench database; True when it must be seeded."""
    exists = _psql(f"SELECT 1 FROM pg_database WHERE datname = '{DB_NAME}'") == "1"
    if exists and reseed:
        _psql(f"DROP DATABASE {DB_NAME} WITH (FORCE)")
        exists = False
    if not exists:
        _psql(f"CREATE DATABASE {DB_NAME}")
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "-v", "0"],
        cwd=REPO,
        env=_environment(),
        check=True,
    )
    return not exists


def _copy(cursor, table: str, columns: list[str], rows: io.StringIO) -> None:
    rows.seek(0)
    with cursor.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy:  # noqa: S608
        while chunk := rows.read(1 << 20):
            copy.write(chunk)


class Seeder:
    """Writes published submissions like the publishing service leaves them (one run, its
    shape and operator results, a Score), in bulk."""

    def __init__(self, *, seed_value: int = 7, catalogue: bool = True) -> None:
        from django.contrib.auth import get_user_model
        from django.utils import timezone

        from catalogue.models import HardwareProfile
        from catalogue.selectors import suite_version_pick
        from catalogue.services import hardware_profiles_sync, suite_version_import
        from evaluator.suite import load_suite

        self.rng = random.Random(seed_value)
        if catalogue:  # store the suite and the profiles (each save bumps the generation)
            hardware_profiles_sync()
            self.suite = suite_version_import(suite=load_suite(SUITE))
        else:
            self.suite = suite_version_pick(slug=SUITE)
        self.hardware = HardwareProfile.objects.get(slug=HARDWARE)
        self.shapes = [s for s in self.suite.definition["shapes"] if not s.get("smoke")]
        self.operators = {op["slug"]: op["importance"] for op in self.suite.definition["operators"]}
        User = get_user_model()
        owners = list(User.objects.filter(username__startswith="bench").exclude(username=READER))
        if not owners:
            owners = User.objects.bulk_create(
                [User(username=f"bench{i}", email=f"bench{i}@example.org") for i in range(200)]
            )
        self.owners = owners
        self.now = timezone.now()

    def write(self, *, first: int, count: int) -> None:
        """``count`` published submissions titled from number ``first`` on."""
        from django.db import connection, transaction

        from submissions.models import EvaluationRun, OperatorResult, Score, ShapeResult, Submission

        rng, shapes, operators, hardware = self.rng, self.shapes, self.operators, self.hardware
        with transaction.atomic():
            subs = Submission.objects.bulk_create(
                [
                    Submission(
                        owner=self.owners[rng.randrange(len(self.owners))],
                        title=f"bench kernels {first + i}",
                        suite_version=self.suite,
                        hardware=hardware,
                        status=Submission.Status.PUBLISHED,
                        dsl=rng.choice(["triton", "cuda", "cutedsl"]),
                    )
                    for i in range(count)
                ]
            )
            runs = EvaluationRun.objects.bulk_create(
                [
                    EvaluationRun(
                        submission=sub,
                        status=EvaluationRun.Status.SUCCEEDED,
                        queue=hardware.queue,
                        shapes_total=len(shapes),
                        shapes_done=len(shapes),
                        environment={"device_name": "NVIDIA H200"},
                        started_at=self.now,
                        finished_at=self.now,
                    )
                    for sub in subs
                ]
            )
            shape_rows, operator_rows, scores = io.StringIO(), io.StringIO(), []
            for sub, run in zip(subs, runs, strict=True):
                skill = rng.betavariate(2, 8)
                per_op: dict[str, list[float]] = {}
                op_passes: dict[str, int] = {}
                passes = fallbacks = 0
                for shape in shapes:
                    status = rng.choice(STATUSES)
                    fraction = min(0.99, skill * rng.uniform(0.5, 1.5))
                    score = fraction if status == "pass" else 0.0
                    passes += status == "pass"
                    fallbacks += status == "fallback"
                    per_op.setdefault(shape["operator"], []).append(score)
                    op_passes[shape["operator"]] = op_passes.get(shape["operator"], 0) + (
                        status == "pass"
                    )
                    time_ms = rng.uniform(0.005, 5.0)
                    shape_rows.write(
                        f"{run.pk}\t{shape['operator']}\t{shape['shape_id']}\t{status}\t"
                        f"{shape['weight']}\t{time_ms}\t{time_ms * 0.01}\t10\t{time_ms * 2}\t"
                        f"{time_ms * fraction}\t{fraction}\t2.0\t"
                        f"{0.3 if status == 'fallback' else 0.95}\t0.0\t\t[]\n"
                    )
                operator_scores = {op: sum(v) / len(v) for op, v in per_op.items()}
                for op, value in operator_scores.items():
                    n, ok = len(per_op[op]), op_passes[op]
                    operator_rows.write(
                        f"{run.pk}\t{op}\tok\t{value}\t{operators[op]}\t\t[]\t"
                        f"{'pass' if ok == n else 'partial'}\t{n}\t{ok}\t{ok}\t[]\t[]\n"
                    )
                aggregate = sum(operators[op] * v for op, v in operator_scores.items())
                scores.append(
                    Score(
                        submission=sub,
                        run=run,
                        suite_version=self.suite,
                        hardware=hardware,
                        aggregate=aggregate,
                        aggregate_ci_low=aggregate * 0.99,
                        aggregate_ci_high=aggregate * 1.01,
                        apparent_pass_rate=(passes + fallbacks) / len(shapes),
                        real_pass_rate=passes / len(shapes),
                        fallback_rate=fallbacks / len(shapes),
                        geomean_speedup_eager=2.0,
                        operator_scores=operator_scores,
                        published_at=self.now,
                    )
                )
            with connection.cursor() as cursor:
                raw = cursor.cursor
                _copy(
                    raw,
                    ShapeResult._meta.db_table,
                    ["run_id", "operator", "shape_id", "status", "weight", "time_ms",
                     "time_spread_ms", "reps", "reference_time_ms", "t_sol_ms",
                     "roofline_fraction", "speedup", "own_kernel_share", "max_abs_error",
                     "error", "codes"],
                    shape_rows,
                )  # fmt: skip
                _copy(
                    raw,
                    OperatorResult._meta.db_table,
                    [
                        "run_id",
                        "operator",
                        "status",
                        "score",
                        "importance",
                        "error",
                        "warnings",
                        "verdict",
                        "shapes_total",
                        "apparent_passes",
                        "real_passes",
                        "wrong_shapes",
                        "hold_codes",
                    ],
                    operator_rows,
                )
            Score.objects.bulk_create(scores)


def seed(*, submissions: int, seed_value: int = 7) -> dict[str, float]:
    """Seed the database with ``submissions`` published rows; returns timings (s)."""
    from django.db import connection

    started = time.monotonic()
    seeder = Seeder(seed_value=seed_value)
    batch = 1000
    for first in range(0, submissions, batch):
        count = min(batch, submissions - first)
        seeder.write(first=first, count=count)
        done = first + count
        if done % 2000 == 0 or done == submissions:
            print(f"  seeded {done}/{submissions} ({time.monotonic() - started:.0f} s)", flush=True)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    return {"seed_s": time.monotonic() - started}


class Publisher:
    """A thread publishing one new scored submission every ``every_s`` seconds, the first
    after half of that (its rows written as the publishing service writes them, then the
    board's generation bumped, as the service's signals do), until stopped."""

    def __init__(self, *, every_s: float) -> None:
        self.every_s = every_s
        self.published = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        from django.db import connection

        from atrex_site.page_cache import board_changed
        from submissions.models import Submission

        seeder = Seeder(seed_value=int(time.time()), catalogue=False)
        wait_s = self.every_s / 2  # the first half-way into the period, then every period
        try:
            while not self._stop.wait(wait_s):
                wait_s = self.every_s
                seeder.write(first=Submission.objects.count(), count=1)
                board_changed()
                self.published += 1
        finally:
            connection.close()

    def __enter__(self) -> Publisher:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=60)


def endpoints() -> dict[str, str]:
    """The measured paths: main board, API board list, one submission's page, the
    comparison of two submissions (API, and the page where the site has one), and the
    submission's API entry (counted, not loaded)."""
    from django.urls import NoReverseMatch, reverse

    from submissions.models import Submission

    published = Submission.objects.filter(status=Submission.Status.PUBLISHED).order_by("pk")
    middle = published.count() // 2
    sample, other = published[middle : middle + 2]
    query = f"?suite={SUITE}&hardware={HARDWARE}"
    paths = {
        "board": f"/{query}",
        "api-board": f"/api/leaderboard/{query}",
        "submission": f"/submissions/{sample.pk}/",
        "api-compare": f"/api/compare/?submissions={sample.pk},{other.pk}",
    }
    try:
        paths["compare"] = reverse("leaderboard:compare") + f"?submissions={sample.pk},{other.pk}"
    except NoReverseMatch:
        pass  # no comparison page on this site yet
    paths["api-submission"] = f"/api/submissions/{sample.pk}/"
    return paths


def viewer_headers() -> dict[str, dict[str, str]]:
    """Request headers per viewer: none; the cookies of a signed-in reader who owns nothing,
    as their browser holds them (the session's, and the CSRF cookie that the log-in's answer
    set, as Django's ``login`` does: without it every page would draw them a new CSRF secret
    and send it, as a browser's first page only gets); an API token of that reader."""
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.middleware.csrf import CSRF_ALLOWED_CHARS, CSRF_SECRET_LENGTH
    from django.test import Client
    from django.utils.crypto import get_random_string

    from accounts.services import api_token_create

    reader, _ = get_user_model().objects.get_or_create(
        username=READER, defaults={"email": f"{READER}@example.org"}
    )
    client = Client()
    client.force_login(reader)
    session = client.cookies[settings.SESSION_COOKIE_NAME].value
    csrf = get_random_string(CSRF_SECRET_LENGTH, CSRF_ALLOWED_CHARS)
    token = api_token_create(user=reader, name=f"bench {time.time():.0f}").secret
    cookies = f"{settings.SESSION_COOKIE_NAME}={session}; {settings.CSRF_COOKIE_NAME}={csrf}"
    return {
        "anonymous": {},
        "session": {"Cookie": cookies},
        "token": {"Authorization": f"Token {token}"},
    }


def query_counts(
    paths: dict[str, str], headers: dict[str, str]
) -> dict[str, list[tuple[int, int, float, str]]]:
    """Per path, (status, SQL queries, seconds, how the copy was answered) of two in-process
    requests: the first after a generation bump (it builds the shared copy), then the next."""
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from atrex_site.page_cache import board_changed

    extra = {f"HTTP_{name.upper().replace('-', '_')}": value for name, value in headers.items()}
    client = Client(**extra)
    counts: dict[str, list[tuple[int, int, float, str]]] = {}
    for name, path in paths.items():
        board_changed()
        counts[name] = []
        for _ in range(2):
            started = time.monotonic()
            with CaptureQueriesContext(connection) as queries:
                response = client.get(path)
            counts[name].append(
                (
                    response.status_code,
                    len(queries),
                    time.monotonic() - started,
                    response.get("X-Atrex-Cache", "-"),
                )
            )
            if READER.encode() in response.content and "Cookie" not in headers:
                raise RuntimeError(f"{path}: the reader's name in a response without a session")
    return counts


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def gunicorn_start(*, port: int, workers: int) -> subprocess.Popen:
    """gunicorn as ``docker/entrypoint.sh web`` starts it (its access log to nowhere), with a
    longer timeout (a phase's queue may hold a request longer than its 60 s)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "atrex_site.wsgi", "-b", f"127.0.0.1:{port}",
         "-w", str(workers), "--timeout", "120", "--log-level", "warning",
         "--access-logfile", "-", "--forwarded-allow-ips", "127.0.0.1"],
        cwd=REPO, env=_environment(), start_new_session=True,
        # The quick shutdown between phases logs a traceback per abandoned request.
        stdout=subprocess.DEVNULL, stderr=open(GUNICORN_LOG, "ab"),  # noqa: SIM115
    )  # fmt: skip
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return process
        except OSError:
            time.sleep(0.2)
    os.killpg(process.pid, signal.SIGTERM)
    raise RuntimeError("gunicorn did not start")


def request_bytes(*, host: str, port: int, path: str, headers: dict[str, str]) -> bytes:
    """``GET path`` as ``http.client`` sends it (Host, Accept-Encoding: identity, the
    given headers), asking the server to close the connection after its answer."""
    lines = [f"GET {path} HTTP/1.1", f"Host: {host}:{port}", "Accept-Encoding: identity"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    lines += ["Connection: close", "", ""]
    return "\r\n".join(lines).encode("latin-1")


def answer_ok(answer: bytes | bytearray, size: int | None = None) -> str | None:
    """None for a whole ``200`` answer (status line, then as many body bytes as its
    ``Content-Length`` says) in the first ``size`` bytes of ``answer`` (default: all), else
    what is wrong with it. Only the header is copied."""
    size = len(answer) if size is None else size
    end = answer.find(b"\r\n\r\n", 0, size)
    if end < 0:
        return "no complete header"
    head = bytes(answer[:end])
    status = head.split(b"\r\n", 1)[0]
    if not status.startswith(b"HTTP/") or status.split(b" ", 2)[1:2] != [b"200"]:
        return status.decode("latin-1", "replace")
    at = head.lower().find(b"\r\ncontent-length:")
    if at >= 0:
        line_end = head.find(b"\r\n", at + 2)
        length = int(head[at + 17 : line_end if line_end >= 0 else len(head)])
        if size - end - 4 != length:
            return f"body of {size - end - 4} bytes, not {length}"
    return None


def load(
    *,
    url: str,
    clients: int,
    duration_s: float,
    max_requests: int,
    headers: dict[str, str] | None = None,
) -> dict[str, object]:
    """``clients`` threads GET ``url`` with ``headers`` (a new connection per request, like
    gunicorn's sync workers want) until ``duration_s`` or ``max_requests``; latency
    percentiles in ms and this process's CPU time (see the module on the client)."""
    parts = urlsplit(url)
    path = parts.path + (f"?{parts.query}" if parts.query else "")
    address = (parts.hostname, parts.port)
    request = request_bytes(host=parts.hostname, port=parts.port, path=path, headers=headers or {})
    latencies: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()
    issued = 0
    deadline = time.monotonic() + duration_s

    def client() -> None:
        nonlocal issued
        buffer = bytearray(1 << 20)  # answers are read into it, never copied whole
        view = memoryview(buffer)
        while time.monotonic() < deadline:
            with lock:
                if issued >= max_requests:
                    return
                issued += 1
            started = time.monotonic()
            # In-flight requests may finish up to GRACE_S after the deadline, then time out:
            # the phase is bounded even when the server queues.
            timeout = max(1.0, deadline + GRACE_S - started)
            try:
                with socket.create_connection(address, timeout=timeout) as connection:
                    connection.sendall(request)
                    size = 0
                    while received := connection.recv_into(view[size:]):
                        size += received
                        if size == len(buffer):  # a larger answer: room for more
                            view.release()
                            buffer.extend(bytes(len(buffer)))
                            view = memoryview(buffer)
                wrong = answer_ok(buffer, size)
            except OSError as failure:
                wrong = str(failure)
            elapsed = time.monotonic() - started
            with lock:
                if wrong is None:
                    latencies.append(elapsed)
                else:
                    errors.append(wrong)

    cpu_started = time.process_time()
    started = time.monotonic()
    threads = [threading.Thread(target=client) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.monotonic() - started
    cpu_s = time.process_time() - cpu_started
    if len(latencies) >= 2:
        cuts = statistics.quantiles(latencies, n=100, method="inclusive")
        p50, p95, p99 = cuts[49] * 1e3, cuts[94] * 1e3, cuts[98] * 1e3
    else:
        p50 = p95 = p99 = latencies[0] * 1e3 if latencies else float("nan")
    return {
        "ok": len(latencies),
        "errors": len(errors),
        "error_sample": errors[:3],
        "wall_s": round(wall, 2),
        "rps": round(len(latencies) / wall, 2),
        "p50_ms": round(p50, 1),
        "p95_ms": round(p95, 1),
        "p99_ms": round(p99, 1),
        "cpu_s": round(cpu_s, 3),
    }


def _cpu_s_of_children(parent: int) -> float:
    """The CPU time (user + system, s) of ``parent``'s child processes (gunicorn's workers)."""
    total = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile
        if int(fields[1]) == parent:  # ppid; utime, stime follow at 11, 12 (after the name)
            total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def _redis_cpu_s() -> float:
    import redis

    found = redis.Redis.from_url(CACHE_URL).info("cpu")
    return float(found["used_cpu_user"]) + float(found["used_cpu_sys"])


def _phase(
    *, path: str, headers: dict[str, str], args: argparse.Namespace, publish: bool
) -> tuple[dict[str, object], float, int]:
    """One load phase on a fresh gunicorn: the load generator's figures (with the CPU s of
    gunicorn's workers and Redis over it), the 1-minute load average when it started and
    the scores published meanwhile."""
    port = args.port  # one address for the run: the shared copies name the host
    server = gunicorn_start(port=port, workers=args.workers)
    # The master listens before its workers have imported the site: wait until each
    # worker has answered (their first requests load the views and templates), so that
    # the phase measures serving, not starting.
    warm = load(
        url=f"http://127.0.0.1:{port}{path}",
        clients=args.workers * 2,
        duration_s=120,
        max_requests=args.workers * 4,
        headers=headers,
    )
    if warm["errors"]:
        raise RuntimeError(f"{path}: the warm-up requests failed: {warm['error_sample']}")
    load_average = os.getloadavg()[0]
    publisher = Publisher(every_s=args.publish_every_s) if publish else None
    try:
        if publisher is not None:
            publisher.__enter__()
        workers_cpu_s, redis_cpu_s = _cpu_s_of_children(server.pid), _redis_cpu_s()
        done = subprocess.run(
            [sys.executable, __file__, "load", f"http://127.0.0.1:{port}{path}",
             "--clients", str(args.clients), "--duration-s", str(args.duration_s),
             "--max-requests", str(args.max_requests), "--headers", json.dumps(headers)],
            capture_output=True, text=True, check=True,
            timeout=args.duration_s + 180,
        )  # fmt: skip
        figures = json.loads(done.stdout)
        figures["server_cpu_s"] = round(_cpu_s_of_children(server.pid) - workers_cpu_s, 3)
        figures["redis_cpu_s"] = round(_redis_cpu_s() - redis_cpu_s, 3)
        return figures, load_average, publisher.published if publisher else 0
    finally:
        if publisher is not None:
            publisher.__exit__(None, None, None)
        os.killpg(server.pid, signal.SIGQUIT)  # quick shutdown: abandon queued requests
        server.wait(timeout=30)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command")
    loader = sub.add_parser("load", help="(internal) the load generator process")
    loader.add_argument("url")
    loader.add_argument("--clients", type=int, default=50)
    loader.add_argument("--duration-s", type=float, default=20)
    loader.add_argument("--max-requests", type=int, default=30000)
    loader.add_argument("--headers", default="{}", help="request headers as a JSON object")
    parser.add_argument("--submissions", type=int, default=10_000)
    parser.add_argument("--reseed", action="store_true")
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--duration-s", type=float, default=20)
    parser.add_argument("--max-requests", type=int, default=30000)
    parser.add_argument(
        "--workers", type=int, default=4, help="gunicorn's (docker/entrypoint.sh's default)"
    )
    parser.add_argument(
        "--endpoints",
        default="board,api-board,submission,compare,api-compare",
        help="which endpoints to load (comma-separated; compare only where the site has it)",
    )
    parser.add_argument("--viewers", default=",".join(VIEWERS), help="anonymous,session,token")
    parser.add_argument("--publish", choices=["off", "on", "both"], default="both")
    parser.add_argument("--publish-every-s", type=float, default=10.0)
    args = parser.parse_args()
    args.port = _free_port()
    if args.command == "load":
        print(json.dumps(load(url=args.url, clients=args.clients, duration_s=args.duration_s,
                              max_requests=args.max_requests,
                              headers=json.loads(args.headers))))  # fmt: skip
        return 0
    viewers = [v for v in args.viewers.split(",") if v]
    unknown = sorted(set(viewers) - set(VIEWERS))
    if unknown:
        parser.error(f"--viewers: unknown {', '.join(unknown)} (choose from {', '.join(VIEWERS)})")

    started = time.monotonic()
    fresh = database_prepare(reseed=args.reseed)
    os.environ.update(_environment())
    sys.path.insert(0, str(REPO))
    import django

    django.setup()
    print(f"database {DB_NAME} ready ({time.monotonic() - started:.1f} s, migrated)")
    if fresh:
        print(f"seeding {args.submissions} submissions x 440 shape results ...")
        timings = seed(submissions=args.submissions)
        print(f"seeded in {timings['seed_s']:.1f} s")
    from django.conf import settings

    print(f"cache: {settings.CACHES['default']['BACKEND'].rsplit('.', 1)[-1]} {CACHE_URL}")
    paths = endpoints()
    headers = viewer_headers()
    print("\nSQL queries per page (in-process; the request after a generation bump, which builds")
    print("the shared copy, then the next one; X-Atrex-Cache says how each was answered):")
    counted: dict[tuple[str, str], str] = {}
    for viewer in viewers:
        for name, answers in query_counts(paths, headers[viewer]).items():
            (status, cold, cold_s, cold_how), (_, warm, warm_s, warm_how) = answers
            counted[(name, viewer)] = f"{cold}/{warm}"
            print(f"  {name:<15}{viewer:<10} HTTP {status}  {cold:>3} queries "
                  f"{cold_s * 1e3:7.1f} ms ({cold_how}), then {warm:>2} queries "
                  f"{warm_s * 1e3:6.1f} ms ({warm_how})")  # fmt: skip
    from django.db import connections

    connections.close_all()
    wanted = [name for name in args.endpoints.split(",") if name in paths]
    publishing = {"off": [False], "on": [True], "both": [False, True]}[args.publish]
    # A fresh gunicorn per phase: sync workers go on serving connections that a timed-out
    # client abandoned, so a slow endpoint would otherwise spill into the next phase.
    print(f"\ngunicorn: {args.workers} sync workers on 127.0.0.1, DEBUG off, access log on, "
          "fresh per phase")  # fmt: skip
    print(f"load: {args.clients} concurrent clients, <= {args.duration_s} s and "
          f"<= {args.max_requests} requests per phase; publishing: a new score every "
          f"{args.publish_every_s:g} s where marked")  # fmt: skip
    print("CPU ms per request: the load generator / gunicorn's workers / Redis")
    print(f"  {'endpoint':<13}{'viewer':<10}{'publish':>8}{'queries':>9}{'ok':>6}{'err':>5}"
          f"{'req/s':>8}{'p50 ms':>8}{'p95 ms':>8}{'p99 ms':>9}{'load':>6}"
          f"  {'CPU ms/req':>18}")  # fmt: skip
    for name in wanted:
        for viewer in viewers:
            for publish in publishing:
                row, load_average, published = _phase(
                    path=paths[name], headers=headers[viewer], args=args, publish=publish
                )
                mark = f"{published}x" if publish else "-"
                served = max(1, row["ok"] + row["errors"])
                keys = ("cpu_s", "server_cpu_s", "redis_cpu_s")
                cpu = "/".join(f"{row[key] * 1e3 / served:.2f}" for key in keys)
                print(f"  {name:<13}{viewer:<10}{mark:>8}{counted[(name, viewer)]:>9}"
                      f"{row['ok']:>6}{row['errors']:>5}{row['rps']:>8}{row['p50_ms']:>8}"
                      f"{row['p95_ms']:>8}{row['p99_ms']:>9}{load_average:>6.1f}  {cpu:>18}"
                      + (f"  errors e.g. {row['error_sample']}" if row["errors"] else ""),
                      flush=True)  # fmt: skip
    print(f"\ntotal {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
