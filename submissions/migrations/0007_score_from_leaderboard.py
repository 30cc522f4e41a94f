"""``Score`` moves here from ``leaderboard``, and submissions point at the catalogue's
models; the database is not touched (the table keeps its name, ``leaderboard_score``)."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("submissions", "0006_every_run_in_shards"),
        ("catalogue", "0001_initial"),
        ("leaderboard", "0004_score_speedup_compile"),
    ]

    state_operations = [
        migrations.AlterField(
            model_name="submission",
            name="hardware",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.PROTECT,
                related_name="submissions",
                to="catalogue.hardwareprofile",
            ),
        ),
        migrations.AlterField(
            model_name="submission",
            name="suite_version",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.PROTECT,
                related_name="submissions",
                to="catalogue.suiteversion",
            ),
        ),
        migrations.CreateModel(
            name="Score",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("aggregate", models.FloatField()),
                ("aggregate_ci_low", models.FloatField(null=True)),
                ("aggregate_ci_high", models.FloatField(null=True)),
                ("apparent_pass_rate", models.FloatField()),
                ("real_pass_rate", models.FloatField()),
                ("fallback_rate", models.FloatField()),
                ("geomean_speedup_eager", models.FloatField(null=True)),
                ("geomean_speedup_compile", models.FloatField(null=True)),
                ("operator_scores", models.JSONField(default=dict)),
                ("published_at", models.DateTimeField()),
                (
                    "hardware",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="scores",
                        to="catalogue.hardwareprofile",
                    ),
                ),
                (
                    "run",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="+",
                        to="submissions.evaluationrun",
                    ),
                ),
                (
                    "submission",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="score",
                        to="submissions.submission",
                    ),
                ),
                (
                    "suite_version",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="scores",
                        to="catalogue.suiteversion",
                    ),
                ),
            ],
            options={
                "db_table": "leaderboard_score",
                "indexes": [
                    models.Index(
                        fields=["suite_version", "hardware", "-aggregate"],
                        name="leaderboard_suite_v_35ea12_idx",
                    )
                ],
            },
        ),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=state_operations, database_operations=[]
        )
    ]
