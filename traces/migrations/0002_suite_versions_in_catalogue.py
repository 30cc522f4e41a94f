"""Trace proposals point at ``catalogue.SuiteVersion`` (moved from ``leaderboard``); the
database is not touched (same table, same foreign keys)."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("traces", "0001_initial"),
        ("catalogue", "0001_initial"),
    ]

    state_operations = [
        migrations.AlterField(
            model_name="proposal",
            name="base",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.PROTECT,
                related_name="+",
                to="catalogue.suiteversion",
            ),
        ),
        migrations.AlterField(
            model_name="proposal",
            name="draft",
            field=models.OneToOneField(
                on_delete=django.db.models.deletion.CASCADE,
                related_name="trace_proposal",
                to="catalogue.suiteversion",
            ),
        ),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=state_operations, database_operations=[]
        )
    ]
