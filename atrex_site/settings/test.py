"""Tests: PostgreSQL and Redis on localhost when they answer, SQLite and the filesystem
broker otherwise. ``tests/conftest.py`` prints which were used.

Set ATREX_TEST_REQUIRE_SERVICES=1 (CI does) to make a missing PostgreSQL or Redis an error
instead of a fallback.
"""

import os
import socket

from .base import *  # noqa: F403
from .base import SQLITE_OPTIONS, VAR_DIR, env


def _answers(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


# Several test runs at once on one machine (parallel developers' sessions) each set their
# own ATREX_TEST_SLOT (0-15): it picks the test database name, the Redis database and the
# folders, so that the runs do not drop each other's database or take each other's tasks.
TEST_SLOT = env.int("ATREX_TEST_SLOT", default=0)
if not 0 <= TEST_SLOT <= 15:
    raise RuntimeError("ATREX_TEST_SLOT must be between 0 and 15 (one Redis database each)")
_SUFFIX = f"-{TEST_SLOT}" if TEST_SLOT else ""

SECRET_KEY = "test-only-key"  # noqa: S105 - tests only
DEBUG = False
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # fast, tests only

REQUIRE_SERVICES = env.bool("ATREX_TEST_REQUIRE_SERVICES", default=False)
POSTGRES_AVAILABLE = _answers("127.0.0.1", 5432)
REDIS_AVAILABLE = _answers("127.0.0.1", 6379)
if REQUIRE_SERVICES and not (POSTGRES_AVAILABLE and REDIS_AVAILABLE):
    raise RuntimeError(
        "ATREX_TEST_REQUIRE_SERVICES is set but PostgreSQL (127.0.0.1:5432) or Redis "
        "(127.0.0.1:6379) does not answer; start them (see .ci/run)."
    )

if "DATABASE_URL" in os.environ:
    DATABASES = {"default": env.db_url("DATABASE_URL")}
elif POSTGRES_AVAILABLE:
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": "postgres",  # exists on every server; the tests use TEST.NAME
            "USER": "postgres",
            "HOST": "127.0.0.1",
            "PORT": "5432",
            "TEST": {"NAME": f"test_atrex{_SUFFIX.replace('-', '_')}"},
        }
    }
else:
    # A file, not ":memory:", so that worker processes started by tests see the same data.
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": str(VAR_DIR / f"test{_SUFFIX}.sqlite3"),
            "OPTIONS": SQLITE_OPTIONS,
            "TEST": {"NAME": str(VAR_DIR / f"test-db{_SUFFIX}.sqlite3")},
        }
    }

TEST_BROKER_URL = f"redis://127.0.0.1:6379/{15 - TEST_SLOT}" if REDIS_AVAILABLE else "filesystem://"
MEDIA_ROOT = VAR_DIR / f"test-media{_SUFFIX}"
# Short timing budgets: the tests check the flow and the statuses, not the figures.
# No page cache: tests see every change at once (tests/leaderboard/test_page_cache.py turns
# it on).
ATREX = {  # noqa: F405
    **ATREX,  # noqa: F405
    "RUNS_DIR": VAR_DIR / f"test-runs{_SUFFIX}",
    "TIME_BUDGET_S": 0.2,
    "PUBLIC_PAGE_CACHE_S": 0,
}
# Per-user submission limits are off in tests, except where a test turns them on
# (tests/submissions/test_quotas.py): other tests upload many bundles as one user.
ATREX.update(QUOTA_PER_HOUR=0, QUOTA_PER_DAY=0, QUOTA_ACTIVE=0)
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
CELERY_BROKER_URL = TEST_BROKER_URL
if TEST_BROKER_URL.startswith("filesystem://"):
    _BROKER = VAR_DIR / f"test-broker{_SUFFIX}"
    (_BROKER / "control").mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_BROKER),
        "data_folder_out": str(_BROKER),
        "control_folder": str(_BROKER / "control"),
        "store_processed": False,
    }
else:
    CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 3600}
# The API's rate limits stay out of the tests' way; tests/api/test_throttling.py sets low
# ones where it checks them.
REST_FRAMEWORK = {
    **REST_FRAMEWORK,  # noqa: F405
    "DEFAULT_THROTTLE_RATES": {"anon": "100000/min", "user": "100000/min"},
}
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = True
