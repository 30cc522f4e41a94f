"""An admin publishes a draft suite version in the admin, in a real browser, while a worker
and the reaper keep writing, on each supported database: the embedded SQLite default and
PostgreSQL. A site of its own per database (``manage.py runserver`` in a child, migrated and
seeded there), a writer process doing read-then-write transactions as heartbeats do, and
chromium clicking "Publish". Publishing once answered 500 "database is locked" on SQLite."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
import uuid

import pytest
from django.conf import settings

from tests.release import REPO_ROOT

pytestmark = [pytest.mark.browser, pytest.mark.slow]

PASSWORD = "an admin pass phrase 42"  # noqa: S105 - a throwaway test account

# The site's database, made in one process (each manage.py process pays Django's and the
# project's imports): migrated, the suite seeded, an admin and a draft to publish.
SETUP = """
from django.core.management import call_command
call_command("migrate", interactive=False, verbosity=0)
call_command("seed_suite", "atrex-bench-v0.1")
from django.contrib.auth import get_user_model
from catalogue.models import SuiteVersion
from catalogue.services import suite_version_draft_create
get_user_model().objects.create_superuser("curator", "curator@example.org", {password!r})
base = SuiteVersion.objects.get(name="atrex-bench", version="v0.1")
draft = suite_version_draft_create(from_version=base, version_label="v0.2-browser")
print(draft.pk)
"""

# A worker's and the reaper's kind of write: read, then write, in one transaction, as
# often as it can until told to stop; every failure is counted.
WRITER = """
import json, os, sys, time
import django
django.setup()
from django.db import OperationalError, transaction
from django.utils import timezone
from fleet.models import WorkerNode
stop, out = sys.argv[1], sys.argv[2]
now = timezone.now()
node = WorkerNode.objects.create(name="writer@tests", hostname="tests", hardware_profile="cpu-dev",
                                 queues=["eval.cpu-dev"], status="online", started_at=now,
                                 last_heartbeat_at=now)
writes, errors, stamps = 0, [], []
while not os.path.exists(stop):
    try:
        with transaction.atomic():
            WorkerNode.objects.filter(status="online").count()
            WorkerNode.objects.filter(pk=node.pk).update(last_heartbeat_at=timezone.now())
        writes += 1
        stamps.append(time.time())
    except OperationalError as error:
        errors.append(str(error))
    time.sleep(0.02)
json.dump({"writes": writes, "errors": errors, "stamps": stamps}, open(out, "w"))
"""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request, tmp_path):
    """A fresh database of each supported kind for a site of its own."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'site.sqlite3'}"
        return
    if not settings.POSTGRES_AVAILABLE:
        if settings.REQUIRE_SERVICES:
            pytest.fail("PostgreSQL does not answer on 127.0.0.1:5432")
        pytest.skip("PostgreSQL does not answer on 127.0.0.1:5432")
    import psycopg

    name = f"atrex_publish_{uuid.uuid4().hex[:12]}"
    admin = "host=127.0.0.1 port=5432 user=postgres dbname=postgres"
    with psycopg.connect(admin, autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{name}"')
    yield f"postgres://postgres@127.0.0.1:5432/{name}"
    with psycopg.connect(admin, autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _site_env(database_url: str, tmp_path) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("DJANGO_", "DATABASE_", "CELERY_", "ATREX_"))
    }
    env.update(
        DJANGO_SETTINGS_MODULE="atrex_site.settings.local",
        DATABASE_URL=database_url,
        ATREX_VAR_DIR=str(tmp_path / "var"),
        DJANGO_DEBUG="false",
        DJANGO_ALLOWED_HOSTS="127.0.0.1",
    )
    return env


def _manage(env, *args: str, stdin: str | None = None) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=REPO_ROOT, env=env, input=stdin, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return done.stdout


def test_an_admin_publishes_a_draft_while_a_worker_writes(page, tmp_path, database_url):
    env = _site_env(database_url, tmp_path)
    draft_pk = int(_manage(env, "shell", stdin=SETUP.format(password=PASSWORD)).split()[-1])
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"],
        cwd=REPO_ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    stop, out = tmp_path / "stop", tmp_path / "writer.json"
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(stop), str(out)], cwd=REPO_ROOT, env=env
    )
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(120):
            try:
                urllib.request.urlopen(f"{base}/admin/login/", timeout=2)  # noqa: S310
                break
            except OSError:
                time.sleep(0.5)
        page.goto(f"{base}/admin/login/")
        page.locator("#id_username").fill("curator")
        page.locator("#id_password").fill(PASSWORD)
        page.locator("input[type=submit]").click()
        page.goto(f"{base}/admin/catalogue/suiteversion/{draft_pk}/diff/")
        clicked = time.time()
        # The click waits for the navigation, which ends when the publish (its check child)
        # does: as long as the message may take, not the page's 20 s default (under load
        # the publish took longer on both databases).
        page.get_by_role("button", name="Publish").click(timeout=120_000)
        page.wait_for_selector("ul.messagelist", timeout=120_000)
        published = time.time()
        messages = page.locator("ul.messagelist").inner_text()
        page.screenshot(path=str(tmp_path / "published.png"), full_page=True)
    finally:
        stop.touch()
        writer.wait(timeout=60)
        server.terminate()
        server.wait(timeout=30)
    assert messages.startswith("Published atrex-bench-v0.2-browser"), messages
    written = json.loads(out.read_text())
    assert written["errors"] == [], written["errors"][:3]
    # The writer went on while the publish ran: its check child takes seconds, and no
    # transaction may hold the database meanwhile (on SQLite that stalled every writer
    # for the whole check).
    during = [t for t in written["stamps"] if clicked <= t <= published]
    assert len(during) >= 5, (len(during), published - clicked)
    longest_wait = max(b - a for a, b in zip(during, during[1:], strict=False))
    assert longest_wait < 1.0, (longest_wait, published - clicked)
