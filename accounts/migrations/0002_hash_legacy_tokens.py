"""Tokens issued before hashing were DRF authtoken rows, in clear in ``authtoken_token``.
Each becomes an ``ApiToken`` holding only its SHA-256 digest (the token keeps working), and
the clear rows are deleted. Databases made after this change have no such table."""

import hashlib

from django.db import migrations


def hash_legacy_tokens(apps, schema_editor):
    connection = schema_editor.connection
    if "authtoken_token" not in connection.introspection.table_names():
        return
    ApiToken = apps.get_model("accounts", "ApiToken")
    with connection.cursor() as cursor:
        cursor.execute("SELECT key, user_id, created FROM authtoken_token")
        rows = cursor.fetchall()
    for key, user_id, created in rows:
        digest = hashlib.sha256(key.encode("utf-8")).hexdigest()
        if ApiToken.objects.filter(digest=digest).exists():
            continue
        token = ApiToken.objects.create(
            user_id=user_id, name="token from before hashing", prefix=key[:12], digest=digest
        )
        # created_at is auto_now_add: set the original time afterwards.
        ApiToken.objects.filter(pk=token.pk).update(created_at=created)
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM authtoken_token")


class Migration(migrations.Migration):
    dependencies = [("accounts", "0001_initial")]

    operations = [migrations.RunPython(hash_legacy_tokens, migrations.RunPython.noop)]
