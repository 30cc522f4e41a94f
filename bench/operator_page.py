"""Render time and SQL queries of the operator page, for every operator of a suite.

    ATREX_VAR_DIR=/tmp/x DJANGO_SETTINGS_MODULE=atrex_site.settings.local \\
        python bench/operator_page.py [--suite atrex-bench-v1] [--hardware h200-sxm] [--repeat 5]

Uses the database the settings name (e.g. the demo's SQLite after ``manage.py migrate`` and
``seed_suite``). Per operator: the first render (reads the module with ``ast`` and
highlights it with Pygments: once per operator, harness version and process), the median of
``--repeat`` later renders (the highlighted source cached), the page size and the number of
SQL queries. Calls the view directly (no anonymous page cache in front of it).

A bench, not a test: it is not collected by pytest. Figures are for the machine it runs on.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "atrex_site.settings.local")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--suite", default="atrex-bench-v1")
    parser.add_argument("--hardware", default="h200-sxm")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    import django

    django.setup()
    from django.contrib.auth.models import AnonymousUser
    from django.db import connection
    from django.test import RequestFactory
    from django.test.utils import CaptureQueriesContext

    from catalogue.selectors import suite_version_pick
    from leaderboard.views import operator_detail

    suite = suite_version_pick(slug=args.suite)
    if suite is None:
        print(f"No published suite {args.suite}: run manage.py seed_suite first.")
        return 2
    factory = RequestFactory()

    def render(slug: str) -> tuple[float, int, int]:
        request = factory.get("/", {"suite": args.suite, "hardware": args.hardware})
        request.user = AnonymousUser()
        with CaptureQueriesContext(connection) as queries:
            started = time.perf_counter()
            response = operator_detail(request, slug)
            elapsed = time.perf_counter() - started
        assert response.status_code == 200, slug
        return elapsed, len(queries), len(response.content)

    firsts, warms = [], []
    print(f"{'operator':<30} {'first ms':>9} {'warm ms':>8} {'queries':>7} {'KiB':>6}")
    for slug in sorted(op["slug"] for op in suite.definition["operators"]):
        first, _, _ = render(slug)
        times = []
        for _ in range(args.repeat):
            elapsed, count, size = render(slug)
            times.append(elapsed)
        warm = statistics.median(times)
        firsts.append(first)
        warms.append(warm)
        print(f"{slug:<30} {first * 1e3:9.1f} {warm * 1e3:8.1f} {count:7d} {size / 1024:6.0f}")
    print(
        f"{'median':<30} {statistics.median(firsts) * 1e3:9.1f} "
        f"{statistics.median(warms) * 1e3:8.1f}"
    )
    print(f"{'max':<30} {max(firsts) * 1e3:9.1f} {max(warms) * 1e3:8.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
