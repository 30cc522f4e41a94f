"""Writes on the embedded SQLite database wait for each other instead of failing.

Two processes of the demo (the web process and the worker, or the reaper) each run a
transaction that reads and then writes. Under SQLite's default deferred transactions the
second writer's snapshot is stale by the time it writes, and SQLite answers "database is
locked" at once, whatever the busy timeout: an admin publish and a form upload failed so.
The settings' SQLITE_OPTIONS take the write lock when the transaction begins.
"""

from __future__ import annotations

import threading

import pytest
from django.db import OperationalError, connections, transaction

from atrex_site.settings.base import SQLITE_OPTIONS

ALIAS = "sqlite_write_race"


@pytest.fixture
def sqlite_alias(tmp_path, django_db_blocker):
    """A second database alias: a SQLite file under tmp_path with the given OPTIONS."""

    def configure(options: dict) -> str:
        database = {"ENGINE": "django.db.backends.sqlite3", "NAME": str(tmp_path / "race.db"),
                    "OPTIONS": dict(options)}  # fmt: skip
        connections.settings[ALIAS] = connections.configure_settings(
            {"default": connections.settings["default"], ALIAS: database}
        )[ALIAS]
        with connections[ALIAS].cursor() as cursor:
            cursor.execute("CREATE TABLE IF NOT EXISTS counter (value INTEGER NOT NULL)")
            cursor.execute("DELETE FROM counter")
            cursor.execute("INSERT INTO counter (value) VALUES (0)")
        connections[ALIAS].close()
        return ALIAS

    with django_db_blocker.unblock():
        yield configure
        connections[ALIAS].close()
        del connections[ALIAS]  # this thread's connection object, bound to this file
        del connections.settings[ALIAS]


def _read_then_write(alias: str, errors: list, *, after_read=None, before_write=None) -> None:
    try:
        with transaction.atomic(using=alias):
            with connections[alias].cursor() as cursor:
                cursor.execute("SELECT value FROM counter")
                (value,) = cursor.fetchone()
                if after_read:
                    after_read.set()
                if before_write:
                    before_write.wait(timeout=1.0)
                cursor.execute("UPDATE counter SET value = %s", [value + 1])
    except OperationalError as exc:
        errors.append(str(exc))
    finally:
        connections[alias].close()


def _race(alias: str) -> tuple[list[str], int]:
    """Transaction A reads, then B reads and writes, then A writes."""
    errors: list[str] = []
    a_read, b_done = threading.Event(), threading.Event()

    def second() -> None:
        a_read.wait(timeout=5)
        _read_then_write(alias, errors)
        b_done.set()

    first = threading.Thread(
        target=_read_then_write, args=(alias, errors),
        kwargs={"after_read": a_read, "before_write": b_done},
    )  # fmt: skip
    other = threading.Thread(target=second)
    first.start()
    other.start()
    first.join(timeout=60)
    other.join(timeout=60)
    with connections[alias].cursor() as cursor:
        cursor.execute("SELECT value FROM counter")
        (value,) = cursor.fetchone()
    return errors, value


def test_sqlite_writers_wait_for_each_other_with_the_site_options(sqlite_alias):
    errors, value = _race(sqlite_alias(SQLITE_OPTIONS))
    assert errors == []
    assert value == 2  # neither increment lost


def test_the_same_race_fails_under_deferred_transactions(sqlite_alias):
    """The scenario above is a real race: without IMMEDIATE one writer fails at once."""
    deferred = {key: value for key, value in SQLITE_OPTIONS.items() if key != "transaction_mode"}
    errors, value = _race(sqlite_alias(deferred))
    assert errors and "locked" in errors[0]
    assert value == 1
