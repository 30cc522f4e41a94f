"""Tests: PostgreSQL and Redis on localhost when they answer, SQLite and the filesystem
broker otherwise. ``tests/conftest.py`` prints which were used.

Set ATREX_TEST_REQUIRE_SERVICES=1 (CI does) to make a missing PostgreSQL or Redis an error
instead of a fallback.
"""

import os
import socket

from .base import *  # noqa: F403
from .base import VAR_DIR, env


def _answers(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


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
            "TEST": {"NAME": "test_atrex"},
        }
    }
else:
    # A file, not ":memory:", so that worker processes started by tests see the same data.
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": str(VAR_DIR / "test.sqlite3"),
            "OPTIONS": {"timeout": 30},
            "TEST": {"NAME": str(VAR_DIR / "test-db.sqlite3")},
        }
    }

TEST_BROKER_URL = "redis://127.0.0.1:6379/15" if REDIS_AVAILABLE else "filesystem://"
MEDIA_ROOT = VAR_DIR / "test-media"
# Short timing budgets: the tests check the flow and the statuses, not the figures.
ATREX = {**ATREX, "RUNS_DIR": VAR_DIR / "test-runs", "TIME_BUDGET_S": 0.2}  # noqa: F405
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
CELERY_BROKER_URL = TEST_BROKER_URL
if TEST_BROKER_URL.startswith("filesystem://"):
    (VAR_DIR / "test-broker").mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(VAR_DIR / "test-broker"),
        "data_folder_out": str(VAR_DIR / "test-broker"),
        "store_processed": False,
    }
else:
    CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 3600}
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = True
