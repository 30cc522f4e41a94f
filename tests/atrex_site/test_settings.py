"""Settings come from the environment; production refuses to start without its secrets."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _check(settings_module: str, extra_env: dict[str, str]) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "DATABASE_URL"))}
    env.update({"DJANGO_SETTINGS_MODULE": settings_module, **extra_env})
    return subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=ROOT, env=env, capture_output=True, text=True
    )


def test_production_refuses_to_start_without_a_secret_key():
    result = _check("atrex_site.settings.production", {"DJANGO_ALLOWED_HOSTS": "example.org"})
    assert result.returncode != 0
    assert "DJANGO_SECRET_KEY" in result.stderr


def _production(tmp_path, *argv: str, **extra_env: str) -> subprocess.CompletedProcess:
    """``manage.py ARGV`` with the production settings and its environment set to test
    values (nothing is contacted: the check reads the settings only)."""
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "ATREX_"))},
        "DJANGO_SETTINGS_MODULE": "atrex_site.settings.production",
        "DJANGO_SECRET_KEY": "x" * 64 + "a-long-random-looking-production-key-123",
        "DJANGO_ALLOWED_HOSTS": "atrex.example.org",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "DJANGO_CACHE_URL": "redis://127.0.0.1:6379/1",
        **extra_env,
    }
    return subprocess.run(
        [sys.executable, *argv], cwd=ROOT, env=env, capture_output=True, text=True
    )


def test_production_starts_with_its_secrets_and_passes_the_deploy_check(tmp_path):
    result = _production(tmp_path, "manage.py", "check", "--deploy", "--fail-level", "WARNING")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_the_deploy_check_wants_a_shared_cache_for_the_rate_limits(tmp_path):
    result = _production(
        tmp_path, "manage.py", "check", "--deploy", "--fail-level", "WARNING",
        DJANGO_CACHE_URL="locmemcache://",
    )  # fmt: skip
    assert result.returncode != 0
    assert "atrex.W001" in result.stderr and "DJANGO_CACHE_URL" in result.stderr


def test_production_hardening_is_on(tmp_path):
    code = (
        "import django; django.setup(); from django.conf import settings as s; "
        "print(s.SESSION_COOKIE_SECURE, s.CSRF_COOKIE_SECURE, s.SECURE_HSTS_SECONDS > 0, "
        "s.SECURE_SSL_REDIRECT, s.X_FRAME_OPTIONS, s.SECURE_REFERRER_POLICY, "
        "s.SECURE_CONTENT_TYPE_NOSNIFF, "
        "'atrex_site.security.ContentSecurityPolicyMiddleware' in s.MIDDLEWARE, "
        "s.REST_FRAMEWORK['DEFAULT_RENDERER_CLASSES'], s.SESSION_ENGINE)"
    )
    result = _production(tmp_path, "-c", code)
    assert result.stdout.split() == [
        "True", "True", "True", "True", "DENY", "same-origin", "True", "True",
        "['rest_framework.renderers.JSONRenderer']",
        # Redis (DJANGO_CACHE_URL) is shared by every process: sessions read through it.
        "django.contrib.sessions.backends.cached_db",
    ], result.stderr  # fmt: skip


def test_sessions_stay_in_the_database_alone_with_a_cache_per_process(settings):
    """A per-process cache would go on accepting a session another process logged out."""
    if not settings.CACHES["default"]["BACKEND"].endswith("LocMemCache"):
        pytest.skip("DJANGO_CACHE_URL names a shared cache for this run")
    assert settings.SESSION_ENGINE == "django.contrib.sessions.backends.db"


def test_database_and_broker_come_from_the_environment(tmp_path):
    code = (
        "import django; django.setup(); from django.conf import settings as s; "
        "print(s.DATABASES['default']['ENGINE']); print(s.CELERY_BROKER_URL)"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("DJANGO_")}
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "atrex_site.settings.local",
            "DATABASE_URL": "postgres://u@127.0.0.1:5432/atrex",
            "CELERY_BROKER_URL": "redis://127.0.0.1:6379/3",
        }
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert out.stdout.split() == ["django.db.backends.postgresql", "redis://127.0.0.1:6379/3"], (
        out.stderr
    )
    env.pop("DATABASE_URL")
    env.pop("CELERY_BROKER_URL")
    env["ATREX_VAR_DIR"] = str(tmp_path)
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert out.stdout.split() == ["django.db.backends.sqlite3", "filesystem://"], out.stderr


def test_the_embedded_broker_carries_a_task_with_no_server(tmp_path):
    """The demo's default: kombu's filesystem transport, folders made by the settings."""
    code = (
        "import django; django.setup()\n"
        "from atrex_site.celery import app\n"
        "app.send_task('submissions.evaluate_run', args=[0], queue='eval.cpu-dev')\n"
        "with app.connection_for_write() as c:\n"
        "    print(c.default_channel.queue_declare('eval.cpu-dev', passive=True).message_count)\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "CELERY_"))}
    env.update(
        {"DJANGO_SETTINGS_MODULE": "atrex_site.settings.local", "ATREX_VAR_DIR": str(tmp_path)}
    )
    env.pop("DATABASE_URL", None)
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["1"]
    assert list((tmp_path / "broker" / "queue").iterdir())


def test_shards_per_run_is_a_number_or_auto_and_a_bad_value_says_which():
    from atrex_site.settings.base import _shards_per_run

    assert _shards_per_run("4") == 4
    assert _shards_per_run(" Auto ") == "auto"
    result = _check("atrex_site.settings.local", {"ATREX_SHARDS_PER_RUN": "many"})
    assert result.returncode != 0
    assert "ATREX_SHARDS_PER_RUN='many'" in result.stderr and "'auto'" in result.stderr
