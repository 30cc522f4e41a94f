"""Load figures for the board: a seeded PostgreSQL database, gunicorn, 50 concurrent clients.

    python bench/board_load.py [--submissions 10000] [--reseed] [--clients 50]
        [--duration-s 20] [--max-requests 3000] [--workers 2]

1. Creates the database ``atrex_bench`` on 127.0.0.1:5432 (user postgres), migrates it and
   seeds it with atrex-bench-v1 on h200-sxm: N published public submissions, each with a run,
   440 shape results (COPY), 30 operator results (COPY) and a Score row (bulk_create).
   An existing seeded database is reused unless ``--reseed``.
2. Counts the SQL queries of each measured page in-process (CaptureQueriesContext).
3. Starts gunicorn on 127.0.0.1 with the production settings (DEBUG off) and runs the load
   generator (``load`` sub-command, standard library threads) in a second process against
   the main board, the API board list and a submission page; prints p50/p95/p99 latency and
   requests/s per endpoint. Every phase is bounded in requests and seconds.

A bench, not a test: it is not collected by pytest. Figures are for the machine it runs on.
"""

from __future__ import annotations

import argparse
import http.client
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
        "ATREX_DEFAULT_SUITE": SUITE,
        "ATREX_DEFAULT_HARDWARE": HARDWARE,
        "DJANGO_LOG_LEVEL": "WARNING",
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


def seed(*, submissions: int, seed_value: int = 7) -> dict[str, float]:
    """Seed the database with ``submissions`` published rows; returns timings (s)."""
    from django.contrib.auth import get_user_model
    from django.db import connection, transaction
    from django.utils import timezone

    from catalogue.models import HardwareProfile
    from catalogue.services import hardware_profiles_sync, suite_version_import
    from evaluator.suite import load_suite
    from submissions.models import EvaluationRun, OperatorResult, Score, ShapeResult, Submission

    rng = random.Random(seed_value)
    started = time.monotonic()
    hardware_profiles_sync()
    suite = suite_version_import(suite=load_suite(SUITE))
    hardware = HardwareProfile.objects.get(slug=HARDWARE)
    shapes = [s for s in suite.definition["shapes"] if not s.get("smoke")]
    operators = {op["slug"]: op["importance"] for op in suite.definition["operators"]}
    User = get_user_model()
    owners = User.objects.bulk_create(
        [User(username=f"bench{i}", email=f"bench{i}@example.org") for i in range(200)]
    )
    now = timezone.now()
    timings: dict[str, float] = {}
    batch = 1000
    for first in range(0, submissions, batch):
        count = min(batch, submissions - first)
        with transaction.atomic():
            subs = Submission.objects.bulk_create(
                [
                    Submission(
                        owner=owners[rng.randrange(len(owners))],
                        title=f"bench kernels {first + i}",
                        suite_version=suite,
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
                        started_at=now,
                        finished_at=now,
                    )
                    for sub in subs
                ]
            )
            shape_rows, operator_rows, scores = io.StringIO(), io.StringIO(), []
            for sub, run in zip(subs, runs, strict=True):
                skill = rng.betavariate(2, 8)
                per_op: dict[str, list[float]] = {}
                passes = fallbacks = 0
                for shape in shapes:
                    status = rng.choice(STATUSES)
                    fraction = min(0.99, skill * rng.uniform(0.5, 1.5))
                    score = fraction if status == "pass" else 0.0
                    passes += status == "pass"
                    fallbacks += status == "fallback"
                    per_op.setdefault(shape["operator"], []).append(score)
                    time_ms = rng.uniform(0.005, 5.0)
                    shape_rows.write(
                        f"{run.pk}\t{shape['operator']}\t{shape['shape_id']}\t{status}\t"
                        f"{shape['weight']}\t{time_ms}\t{time_ms * 0.01}\t10\t{time_ms * 2}\t"
                        f"{time_ms * fraction}\t{fraction}\t2.0\t"
                        f"{0.3 if status == 'fallback' else 0.95}\t0.0\t\n"
                    )
                operator_scores = {op: sum(v) / len(v) for op, v in per_op.items()}
                for op, value in operator_scores.items():
                    operator_rows.write(f"{run.pk}\t{op}\tok\t{value}\t{operators[op]}\t\t[]\n")
                aggregate = sum(operators[op] * v for op, v in operator_scores.items())
                scores.append(
                    Score(
                        submission=sub,
                        run=run,
                        suite_version=suite,
                        hardware=hardware,
                        aggregate=aggregate,
                        aggregate_ci_low=aggregate * 0.99,
                        aggregate_ci_high=aggregate * 1.01,
                        apparent_pass_rate=(passes + fallbacks) / len(shapes),
                        real_pass_rate=passes / len(shapes),
                        fallback_rate=fallbacks / len(shapes),
                        geomean_speedup_eager=2.0,
                        operator_scores=operator_scores,
                        published_at=now,
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
                     "error"],
                    shape_rows,
                )  # fmt: skip
                _copy(
                    raw,
                    OperatorResult._meta.db_table,
                    ["run_id", "operator", "status", "score", "importance", "error", "warnings"],
                    operator_rows,
                )
            Score.objects.bulk_create(scores)
        done = first + count
        if done % 2000 == 0 or done == submissions:
            print(f"  seeded {done}/{submissions} ({time.monotonic() - started:.0f} s)", flush=True)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    timings["seed_s"] = time.monotonic() - started
    return timings


def endpoints() -> dict[str, str]:
    """The measured paths: main board, API board list, one submission's page and API."""
    from submissions.models import Submission

    sample = Submission.objects.order_by("pk")[Submission.objects.count() // 2 :].first()
    query = f"?suite={SUITE}&hardware={HARDWARE}"
    return {
        "board page": f"/{query}",
        "API board list": f"/api/leaderboard/{query}",
        "submission page": f"/submissions/{sample.pk}/",
        "API submission": f"/api/submissions/{sample.pk}/",
    }


def query_counts(paths: dict[str, str]) -> dict[str, tuple[int, int, float]]:
    """(status, SQL queries, seconds) of one in-process request per path."""
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    client = Client()
    counts = {}
    for name, path in paths.items():
        started = time.monotonic()
        with CaptureQueriesContext(connection) as queries:
            response = client.get(path)
        counts[name] = (response.status_code, len(queries), time.monotonic() - started)
    return counts


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def gunicorn_start(*, port: int, workers: int) -> subprocess.Popen:
    process = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "atrex_site.wsgi", "-b", f"127.0.0.1:{port}",
         "-w", str(workers), "--timeout", "120", "--log-level", "warning"],
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


def load(*, url: str, clients: int, duration_s: float, max_requests: int) -> dict[str, object]:
    """``clients`` threads GET ``url`` (a new connection per request, like gunicorn's sync
    workers want) until ``duration_s`` or ``max_requests``; latency percentiles in ms."""
    parts = urlsplit(url)
    path = parts.path + (f"?{parts.query}" if parts.query else "")
    latencies: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()
    issued = 0
    deadline = time.monotonic() + duration_s

    def client() -> None:
        nonlocal issued
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
                connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
                connection.request("GET", path, headers={"Connection": "close"})
                response = connection.getresponse()
                response.read()
                connection.close()
                ok = response.status == 200
            except OSError as failure:
                ok, response = False, failure
            elapsed = time.monotonic() - started
            with lock:
                if ok:
                    latencies.append(elapsed)
                else:
                    errors.append(str(getattr(response, "status", response)))

    started = time.monotonic()
    threads = [threading.Thread(target=client) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.monotonic() - started
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
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command")
    loader = sub.add_parser("load", help="(internal) the load generator process")
    loader.add_argument("url")
    loader.add_argument("--clients", type=int, default=50)
    loader.add_argument("--duration-s", type=float, default=20)
    loader.add_argument("--max-requests", type=int, default=3000)
    parser.add_argument("--submissions", type=int, default=10_000)
    parser.add_argument("--reseed", action="store_true")
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--duration-s", type=float, default=20)
    parser.add_argument("--max-requests", type=int, default=3000)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    if args.command == "load":
        print(json.dumps(load(url=args.url, clients=args.clients, duration_s=args.duration_s,
                              max_requests=args.max_requests)))  # fmt: skip
        return 0

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
    paths = endpoints()
    print("\nSQL queries per page (in-process, one request each):")
    for name, (status, count, seconds) in query_counts(paths).items():
        print(f"  {name:<18} HTTP {status}  {count:>4} queries  {seconds * 1e3:8.1f} ms")
    from django.db import connections

    connections.close_all()
    # A fresh gunicorn per endpoint: sync workers go on serving connections that a timed-out
    # client abandoned, so a slow endpoint would otherwise spill into the next phase.
    print(f"\ngunicorn: {args.workers} sync workers on 127.0.0.1, DEBUG off, fresh per endpoint")
    print(f"load: {args.clients} concurrent clients, <= {args.duration_s} s and "
          f"<= {args.max_requests} requests per endpoint")  # fmt: skip
    print(f"  {'endpoint':<18}{'ok':>6}{'err':>5}{'req/s':>9}{'p50 ms':>9}{'p95 ms':>9}"
          f"{'p99 ms':>9}")  # fmt: skip
    for name, path in paths.items():
        if name == "API submission":
            continue
        port = _free_port()
        server = gunicorn_start(port=port, workers=args.workers)
        try:
            done = subprocess.run(
                [sys.executable, __file__, "load", f"http://127.0.0.1:{port}{path}",
                 "--clients", str(args.clients), "--duration-s", str(args.duration_s),
                 "--max-requests", str(args.max_requests)],
                capture_output=True, text=True, check=True,
                timeout=args.duration_s + 180,
            )  # fmt: skip
            row = json.loads(done.stdout)
            print(f"  {name:<18}{row['ok']:>6}{row['errors']:>5}{row['rps']:>9}"
                  f"{row['p50_ms']:>9}{row['p95_ms']:>9}{row['p99_ms']:>9}"
                  + (f"  errors e.g. {row['error_sample']}" if row["errors"] else ""),
                  flush=True)  # fmt: skip
        finally:
            os.killpg(server.pid, signal.SIGQUIT)  # quick shutdown: abandon queued requests
            server.wait(timeout=30)
    print(f"\ntotal {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
