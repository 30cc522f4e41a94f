"""What one request costs the server, per endpoint and viewer, measured in-process so that
the figures do not depend on how busy the machine is.

    ATREX_BENCH_DB=atrex_bench_19 python bench/request_cost.py [--requests 200]
        [--warmup 20] [--profile 30] [--top 8]
        [--endpoints board,api-board,submission,compare,api-compare]
        [--viewers anonymous,session,token] [--json PATH]

The database is ``bench/board_load.py``'s (10,000 published submissions × 440 shape results
on atrex-bench-v1 / h200-sxm; that script builds it), and so are the site's settings
(production, DEBUG off, Redis as the shared cache), the measured paths and the viewers
(``anonymous``; ``session``: a signed-in reader who owns nothing; ``token``: that reader's
API token). Each request goes through the whole stack, as gunicorn hands it over: the WSGI
handler, every middleware, DRF's authentication, throttling and negotiation, the view,
the response's closing (``request_finished``). Only the HTTP parsing is left out.

Per endpoint × viewer, after ``--warmup`` requests (the shared copies built, the per-process
readers and headers kept), ``--requests`` more are timed one at a time, in ``--rounds``
rounds that take every endpoint × viewer in turn (so that they share the machine's moods):

* CPU ms: ``time.process_time`` of the request (this process's CPU, whatever else runs on
  the machine), median, 10th percentile (the least disturbed by other work on the cores,
  which still slows a request's CPU a little: caches, clock) and 90th;
* wall ms: median (includes the waits for PostgreSQL and Redis, which do depend on load);
* SQL queries and Redis round trips (one per command sent, one per pipeline) of a request,
  median;
* how the page was answered (``X-Atrex-Cache``);

then ``--profile`` more under cProfile timed by CPU: the share of tottime by package, the
functions with the most tottime, and the site's, DRF's and Django's request machinery by
cumulative time. Figures are for the machine they run on; CPU ms compare across runs
at different loads far better than latency under load does (the CPU's clock and caches
still vary a little).

A bench, not a test: it is not collected by pytest.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
ENDPOINTS = ("board", "api-board", "submission", "compare", "api-compare")
VIEWERS = ("anonymous", "session", "token")
HOST = "127.0.0.1:8000"


class Counters:
    """SQL queries (a database execute wrapper) and Redis round trips (every packed command
    sent on a connection: one per command, one per pipeline) since the last ``reset``."""

    def __init__(self) -> None:
        self.queries = 0
        self.trips = 0

    def reset(self) -> None:
        self.queries = self.trips = 0

    def install(self) -> None:
        from django.db import connection
        from redis.connection import AbstractConnection

        def count_query(execute, sql, params, many, context):
            self.queries += 1
            return execute(sql, params, many, context)

        connection.execute_wrappers.append(count_query)
        send = AbstractConnection.send_packed_command

        def counted_send(connection_, command, check_health=True):
            self.trips += 1
            return send(connection_, command, check_health)

        AbstractConnection.send_packed_command = counted_send


def wsgi_environ(path: str, headers: dict[str, str]) -> dict[str, Any]:
    """The WSGI environment gunicorn would hand over for ``GET path`` with ``headers``."""
    route, _, query = path.partition("?")
    host, port = HOST.split(":")
    environ = {
        "REQUEST_METHOD": "GET",
        "SCRIPT_NAME": "",
        "PATH_INFO": route,
        "QUERY_STRING": query,
        "SERVER_NAME": host,
        "SERVER_PORT": port,
        "SERVER_PROTOCOL": "HTTP/1.1",
        "REMOTE_ADDR": "127.0.0.1",
        "HTTP_HOST": HOST,
        "HTTP_ACCEPT": "text/html,application/json;q=0.9,*/*;q=0.8",
        "HTTP_CONNECTION": "close",
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": "http",
        "wsgi.input": io.BytesIO(),
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": False,
        "wsgi.multiprocess": True,
        "wsgi.run_once": False,
    }
    for name, value in headers.items():
        environ[f"HTTP_{name.upper().replace('-', '_')}"] = value
    return environ


def serve(handler: Any, path: str, headers: dict[str, str]) -> tuple[str, dict[str, str], bytes]:
    """One request through the WSGI handler, its body read and the response closed (which
    sends ``request_finished``, as gunicorn does)."""
    answer: dict[str, Any] = {}

    def start_response(status: str, response_headers: list, exc_info: Any = None) -> None:
        answer["status"] = status
        answer["headers"] = dict(response_headers)

    result = handler(wsgi_environ(path, headers), start_response)
    try:
        body = b"".join(result)
    finally:
        if hasattr(result, "close"):
            result.close()
    return answer["status"], answer["headers"], body


class Row:
    """The samples of one endpoint × viewer."""

    def __init__(self, name: str, viewer: str, path: str, headers: dict[str, str]) -> None:
        self.name, self.viewer, self.path, self.headers = name, viewer, path, headers
        self.cpu: list[float] = []
        self.wall: list[float] = []
        self.queries: list[int] = []
        self.trips: list[int] = []
        self.answered: dict[str, int] = {}
        self.body = b""

    def sample(self, handler: Any, counters: Counters) -> None:
        counters.reset()
        started_cpu, started_wall = time.process_time(), time.perf_counter()
        status, response_headers, self.body = serve(handler, self.path, self.headers)
        self.cpu.append((time.process_time() - started_cpu) * 1e3)
        self.wall.append((time.perf_counter() - started_wall) * 1e3)
        self.queries.append(counters.queries)
        self.trips.append(counters.trips)
        how = response_headers.get("X-Atrex-Cache", "-")
        self.answered[how] = self.answered.get(how, 0) + 1
        if not status.startswith("200"):
            raise RuntimeError(f"{self.path}: HTTP {status}")

    def figures(self) -> dict[str, Any]:
        deciles = statistics.quantiles(self.cpu, n=10, method="inclusive")
        return {
            "endpoint": self.name,
            "viewer": self.viewer,
            "cpu_ms": statistics.median(self.cpu),
            "cpu_p10_ms": deciles[0],
            "cpu_p90_ms": deciles[8],
            "wall_ms": statistics.median(self.wall),
            "queries": statistics.median(self.queries),
            "trips": statistics.median(self.trips),
            "answered": self.answered,
            "bytes": len(self.body),
        }


def measure(
    handler: Any, counters: Counters, rows: list[Row], *, warmup: int, n: int, rounds: int
) -> None:
    """``warmup`` untimed requests per row, then ``n`` timed ones per row in ``rounds``
    rounds that take every row in turn, so that the rows share the machine's moods (other
    work on its cores changes the CPU time of a request too, if far less than its wall
    time)."""
    for row in rows:
        for _ in range(warmup):
            status, _headers, _body = serve(handler, row.path, row.headers)
            if not status.startswith("200"):
                raise RuntimeError(f"{row.path}: HTTP {status}")
    per_round = max(1, n // rounds)
    for _ in range(rounds):
        for row in rows:
            for _ in range(per_round):
                row.sample(handler, counters)


def _package(filename: str) -> str:
    """The package a profiled function belongs to (site-packages' top level, the repo's
    app, or the standard library)."""
    if "site-packages/" in filename:
        return filename.split("site-packages/", 1)[1].split("/", 1)[0]
    if filename.startswith(str(REPO)):
        return filename[len(str(REPO)) + 1 :].split("/", 1)[0] + " (site)"
    if filename.startswith("~") or filename.startswith("<"):
        return "builtins"
    return "stdlib"


# Functions whose cumulative time the profile lists: the site's own, DRF's and Django's
# request machinery (sessions, authentication, middleware), where per-request work is;
# wrappers of the whole request (more than WRAPPER_SHARE of it) are left out.
CUMULATIVE_OF = ("rest_framework/", "django/contrib/", "django/middleware/")
WRAPPER_SHARE = 0.8


def profile(
    handler: Any, path: str, headers: dict[str, str], *, n: int, top: int
) -> tuple[list[tuple[str, float]], list[tuple[str, float, int]], list[tuple[str, float, int]]]:
    """Over ``n`` requests under cProfile: tottime per package (share of the whole), the
    ``top`` functions by tottime and the ``top`` of the site's, DRF's and Django's request
    machinery by cumulative time (ms per request, calls per request)."""
    profiler = cProfile.Profile(time.process_time)  # CPU, not time spent waiting
    profiler.enable()
    for _ in range(n):
        serve(handler, path, headers)
    profiler.disable()
    stats = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    total = sum(entry[2] for entry in stats.values()) or 1.0
    wrappers = WRAPPER_SHARE * total
    packages: dict[str, float] = {}
    functions, cumulative = [], []
    for (filename, line, name), (_cc, calls, tottime, cumtime, _callers) in stats.items():
        packages[_package(filename)] = packages.get(_package(filename), 0.0) + tottime
        where = filename.split("site-packages/", 1)[-1].replace(str(REPO) + "/", "")
        label = f"{where}:{line}({name})"
        functions.append((label, tottime * 1e3 / n, round(calls / n)))
        ours = filename.startswith(str(REPO)) and "/bench/" not in filename
        if (ours or any(part in filename for part in CUMULATIVE_OF)) and cumtime < wrappers:
            cumulative.append((label, cumtime * 1e3 / n, round(calls / n)))
    shares = sorted(((k, v / total) for k, v in packages.items()), key=lambda kv: -kv[1])
    functions.sort(key=lambda item: -item[1])
    cumulative.sort(key=lambda item: -item[1])
    return shares, functions[:top], cumulative[:top]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200, help="timed requests per row")
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=10, help="rounds over every row")
    parser.add_argument("--profile", type=int, default=30, help="profiled requests per row")
    parser.add_argument("--top", type=int, default=8, help="functions shown per profile")
    parser.add_argument("--endpoints", default=",".join(ENDPOINTS))
    parser.add_argument("--viewers", default=",".join(VIEWERS))
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()
    if args.requests < 2:
        parser.error("--requests: at least 2")
    viewers = [v for v in args.viewers.split(",") if v]
    unknown = sorted(set(viewers) - set(VIEWERS))
    if unknown:
        parser.error(f"--viewers: unknown {', '.join(unknown)} (choose from {', '.join(VIEWERS)})")

    sys.path.insert(0, str(REPO / "bench"))
    sys.path.insert(0, str(REPO))
    import board_load

    os.environ.update(board_load._environment())
    import django

    django.setup()
    from django.conf import settings
    from django.core.handlers.wsgi import WSGIHandler

    from submissions.models import Submission

    if not Submission.objects.filter(status=Submission.Status.PUBLISHED).exists():
        raise SystemExit(
            f"database {board_load.DB_NAME} has no published submissions: build it with "
            f"ATREX_BENCH_DB={board_load.DB_NAME} python bench/board_load.py first"
        )
    paths = board_load.endpoints()
    wanted = [name for name in args.endpoints.split(",") if name]
    missing = [name for name in wanted if name not in paths]
    if missing:
        parser.error(f"--endpoints: {', '.join(missing)} not on this site ({', '.join(paths)})")
    headers = board_load.viewer_headers()
    handler = WSGIHandler()
    counters = Counters()
    counters.install()
    print(f"database {board_load.DB_NAME}; cache {settings.CACHES['default']['BACKEND']}; "
          f"sessions {settings.SESSION_ENGINE}")  # fmt: skip
    print(f"{args.warmup} warm-up, {args.requests} timed (in {args.rounds} rounds over every "
          f"row) and {args.profile} profiled requests per row, one at a time, in-process (WSGI "
          f"handler); load average {os.getloadavg()[0]:.1f} at the start\n")  # fmt: skip
    rows = [
        Row(name, viewer, paths[name], headers[viewer]) for name in wanted for viewer in viewers
    ]
    measure(handler, counters, rows, warmup=args.warmup, n=args.requests, rounds=args.rounds)
    for row in rows:
        page = not row.path.startswith("/api/")
        if row.viewer == "session" and page and board_load.READER.encode() not in row.body:
            raise RuntimeError(f"{row.name}: the signed-in reader's name is not on the page")
        if row.viewer != "session" and board_load.READER.encode() in row.body:
            raise RuntimeError(f"{row.name}: the reader's name in a response without a session")
    figures = [row.figures() for row in rows]
    profiles = [
        (row.name, row.viewer, *profile(handler, row.path, row.headers, n=args.profile,
                                        top=args.top))
        for row in rows
    ]  # fmt: skip
    print("| endpoint | viewer | CPU ms median (p10 / p90) | wall ms | SQL queries "
          "| Redis trips | answered |\n|---|---|---|---|---|---|---|")  # fmt: skip
    for row in figures:
        answered = ", ".join(f"{k} {v}" for k, v in row["answered"].items())
        print(f"| {row['endpoint']} | {row['viewer']} | {row['cpu_ms']:.2f} "
              f"({row['cpu_p10_ms']:.2f} / {row['cpu_p90_ms']:.2f}) | {row['wall_ms']:.2f} | "
              f"{row['queries']:g} | {row['trips']:g} | {answered} |")  # fmt: skip
    print(f"\nCPU profiles ({args.profile} requests each, cProfile timed by process_time, "
          "which inflates them: compare shares, not sums): tottime shares by package, then "
          "the functions with the most tottime and the request machinery's cumulative time, "
          "ms and calls per request:")  # fmt: skip
    for name, viewer, shares, functions, cumulative in profiles:
        print(f"\n  {name} / {viewer}: "
              + ", ".join(f"{package} {share:.0%}" for package, share in shares[:6]))  # fmt: skip
        print("   tottime:")
        for function, ms, calls in functions:
            print(f"    {ms:6.3f} ms {calls:>5}x  {function}")
        print("   cumulative (site, DRF, Django's sessions/auth/middleware):")
        for function, ms, calls in cumulative:
            print(f"    {ms:6.3f} ms {calls:>5}x  {function}")
    print(f"\nload average {os.getloadavg()[0]:.1f} at the end")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
