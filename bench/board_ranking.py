"""What the one ranking selector costs on a large board: SQL queries and time per request of
the board page, the API list and the CSV download, each submitter's best and every
submission, in-process (no HTTP server, no load: ``bench/board_load.py`` measures those).

    python bench/board_ranking.py [--submissions 10000] [--submitters 2000] [--reseed]
        [--repeats 5]

Creates (or reuses) the PostgreSQL database ``atrex_bench_board`` on 127.0.0.1:5432 (name:
``ATREX_BENCH_DB``), migrates it and seeds atrex-bench-v1 on h200-sxm with N published
public Score rows (no shape results: the board reads none) from M submitters, 5 baselines,
and 50 bundles run twice (same upload digest), so that every part of the selector runs: the
per-submitter window, the noise floor's repeat query, the operator columns' maxima and the
pickers' counts. The anonymous page cache is off, so every request does the work.

A bench, not a test: it is not collected by pytest. Figures are for the machine it runs on.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("ATREX_BENCH_DB", "atrex_bench_board")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from board_load import DB_NAME, HARDWARE, REPO, SUITE, _environment, database_prepare  # noqa: E402


def seed(*, submissions: int, submitters: int, seed_value: int = 11) -> float:
    """Seed the board; returns the seconds it took."""
    from django.contrib.auth import get_user_model
    from django.db import connection, transaction
    from django.utils import timezone

    from catalogue.models import HardwareProfile
    from catalogue.services import hardware_profiles_sync, suite_version_import
    from evaluator.suite import load_suite
    from submissions.models import EvaluationRun, Score, Submission

    rng = random.Random(seed_value)
    started = time.monotonic()
    hardware_profiles_sync()
    suite = suite_version_import(suite=load_suite(SUITE))
    hardware = HardwareProfile.objects.get(slug=HARDWARE)
    operators = {op["slug"]: op["importance"] for op in suite.definition["operators"]}
    User = get_user_model()
    owners = User.objects.bulk_create(
        [User(username=f"ranker{i}", email=f"ranker{i}@example.org") for i in range(submitters)]
    )
    examples = User.objects.create(username="ranker-examples")
    now = timezone.now()
    with transaction.atomic():
        subs = Submission.objects.bulk_create(
            [
                Submission(
                    owner=examples if index < 5 else owners[rng.randrange(submitters)],
                    is_baseline=index < 5,
                    title=f"ranked kernels {index}",
                    suite_version=suite,
                    hardware=hardware,
                    status=Submission.Status.PUBLISHED,
                    dsl=rng.choice(["triton", "cuda", "cutedsl"]),
                    # 50 bundles submitted twice (rows 5..104 in pairs).
                    upload_sha256=f"{(index - 5) // 2:064x}" if 5 <= index < 105 else "",
                )
                for index in range(submissions)
            ]
        )
        runs = EvaluationRun.objects.bulk_create(
            [
                EvaluationRun(
                    submission=sub,
                    status=EvaluationRun.Status.SUCCEEDED,
                    queue=hardware.queue,
                    started_at=now,
                    finished_at=now,
                )
                for sub in subs
            ]
        )
        scores = []
        for sub, run in zip(subs, runs, strict=True):
            skill = rng.betavariate(2, 8)
            # Most operators empty, as on the real v1 board: a third have results.
            operator_scores = {
                op: (min(0.99, skill * rng.uniform(0.5, 1.5)) if rng.random() < 0.33 else 0.0)
                for op in operators
            }
            aggregate = sum(operators[op] * value for op, value in operator_scores.items())
            scores.append(
                Score(
                    submission=sub,
                    run=run,
                    suite_version=suite,
                    hardware=hardware,
                    aggregate=aggregate,
                    aggregate_ci_low=aggregate * 0.998,
                    aggregate_ci_high=aggregate * 1.002,
                    apparent_pass_rate=0.8,
                    real_pass_rate=0.6,
                    fallback_rate=0.2,
                    geomean_speedup_eager=2.0,
                    operator_scores=operator_scores,
                    published_at=now,
                )
            )
        Score.objects.bulk_create(scores, batch_size=2000)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    return time.monotonic() - started


def measure(paths: dict[str, str], *, repeats: int) -> None:
    from django.conf import settings
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    settings.ATREX = {**settings.ATREX, "PUBLIC_PAGE_CACHE_S": 0}
    client = Client()
    print(f"  {'request':<34}{'HTTP':>5}{'queries':>9}{'median ms':>11}{'min ms':>9}{'rows':>7}")
    for name, path in paths.items():
        seconds = []
        for _ in range(repeats):
            started = time.monotonic()
            with CaptureQueriesContext(connection) as queries:
                response = client.get(path)
            seconds.append(time.monotonic() - started)
        body = response.content.decode()
        rows = (
            body.count("<tr data-submission=")
            or body.count('"submission":')
            or (body.count("\n") - 1)
        )
        print(
            f"  {name:<34}{response.status_code:>5}{len(queries):>9}"
            f"{statistics.median(seconds) * 1e3:>11.1f}{min(seconds) * 1e3:>9.1f}{rows:>7}",
            flush=True,
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--submissions", type=int, default=10_000)
    parser.add_argument("--submitters", type=int, default=2_000)
    parser.add_argument("--reseed", action="store_true")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    started = time.monotonic()
    fresh = database_prepare(reseed=args.reseed)
    os.environ.update(_environment())
    sys.path.insert(0, str(REPO))
    import django

    django.setup()
    print(f"database {DB_NAME} ready ({time.monotonic() - started:.1f} s, migrated)")
    if fresh:
        seconds = seed(submissions=args.submissions, submitters=args.submitters)
        print(f"seeded {args.submissions} rows, {args.submitters} submitters: {seconds:.1f} s")
    board = f"suite={SUITE}&hardware={HARDWARE}"
    measure(
        {
            "page, each submitter's best": f"/?{board}",
            "page, all submissions": f"/?{board}&view=all",
            "page, all, last page, by op": f"/?{board}&view=all&page=999&sort=-op:rms_norm",
            "page, best, grouped by family": f"/?{board}&ops=group",
            "API, best (50 a page)": f"/api/leaderboard/?{board}",
            "API, all (50 a page)": f"/api/leaderboard/?{board}&view=all",
            "CSV, best (every row)": f"/leaderboard.csv?{board}",
            "CSV, all (every row)": f"/leaderboard.csv?{board}&view=all",
        },
        repeats=args.repeats,
    )
    print(f"\ntotal {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
