"""Tokens stored in clear by DRF authtoken become digests, and keep working."""

from __future__ import annotations

import hashlib
import importlib
from datetime import UTC, datetime

import pytest
from django.apps import apps
from django.db import connection
from rest_framework.test import APIClient

from accounts.models import ApiToken

pytestmark = pytest.mark.django_db

migration = importlib.import_module("accounts.migrations.0002_hash_legacy_tokens")
LEGACY_KEY = "0123456789abcdef0123456789abcdef01234567"


def test_clear_tokens_are_hashed_deleted_and_still_accepted(user):
    with connection.cursor() as cursor:
        # The table as DRF authtoken made it (databases from before hashing have it).
        cursor.execute(
            "CREATE TABLE authtoken_token (key varchar(40) PRIMARY KEY, "
            "user_id bigint NOT NULL, created timestamp with time zone NOT NULL)"
            if connection.vendor == "postgresql"
            else "CREATE TABLE authtoken_token (key varchar(40) PRIMARY KEY, "
            "user_id integer NOT NULL, created datetime NOT NULL)"
        )
        cursor.execute(
            "INSERT INTO authtoken_token (key, user_id, created) VALUES (%s, %s, %s)",
            [LEGACY_KEY, user.pk, datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)],
        )
    with connection.schema_editor() as editor:
        migration.hash_legacy_tokens(apps, editor)
        # Run twice (a re-applied migration): no duplicate.
        migration.hash_legacy_tokens(apps, editor)
    token = ApiToken.objects.get(user=user)
    assert token.digest == hashlib.sha256(LEGACY_KEY.encode()).hexdigest()
    assert token.prefix == LEGACY_KEY[:12]
    assert token.created_at == datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM authtoken_token")
        assert cursor.fetchone()[0] == 0
        cursor.execute("DROP TABLE authtoken_token")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {LEGACY_KEY}")
    assert client.get("/api/tokens/").json()["results"][0]["prefix"] == LEGACY_KEY[:12]


def test_a_database_without_the_old_table_is_left_alone(user):
    with connection.schema_editor() as editor:
        migration.hash_legacy_tokens(apps, editor)
    assert not ApiToken.objects.exists()
