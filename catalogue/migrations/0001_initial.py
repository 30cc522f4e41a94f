"""The catalogue's models, moved from ``leaderboard`` without touching the database.

The tables stay where they are (``leaderboard_*``, named by each model's ``db_table``);
this migration only tells Django's migration state that ``catalogue`` now owns them.
``leaderboard.0005_catalogue_and_scores_moved`` removes them from ``leaderboard``'s state
and moves their content types.
"""

import django.core.validators
import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        # The tables exist, as ``leaderboard`` left them, before this app claims them.
        ("leaderboard", "0004_score_speedup_compile"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    state_operations = [
        migrations.CreateModel(
            name="HardwareProfile",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("slug", models.SlugField(unique=True)),
                ("name", models.CharField(max_length=120)),
                (
                    "device_kind",
                    models.CharField(
                        choices=[("cuda", "CUDA GPU"), ("cpu", "CPU (development)")], max_length=8
                    ),
                ),
                ("peak_flops", models.JSONField()),
                ("hbm_bytes_per_s", models.FloatField()),
                ("source", models.CharField(max_length=200)),
                ("notes", models.TextField(blank=True)),
                ("enabled", models.BooleanField(default=True)),
            ],
            options={"db_table": "leaderboard_hardwareprofile", "ordering": ["name"]},
        ),
        migrations.CreateModel(
            name="Operator",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("slug", models.SlugField(unique=True)),
                ("atrex_id", models.CharField(blank=True, max_length=20)),
                ("description", models.TextField(blank=True)),
                ("dtype", models.CharField(blank=True, max_length=20)),
                ("phase", models.CharField(blank=True, max_length=20)),
                ("enabled", models.BooleanField(default=True)),
            ],
            options={"db_table": "leaderboard_operator", "ordering": ["slug"]},
        ),
        migrations.CreateModel(
            name="SuiteVersion",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("name", models.CharField(max_length=80)),
                ("version", models.CharField(max_length=40)),
                ("description", models.TextField(blank=True)),
                (
                    "status",
                    models.CharField(
                        choices=[("draft", "Draft"), ("published", "Published")],
                        default="draft",
                        max_length=12,
                    ),
                ),
                ("content_hash", models.CharField(max_length=80, unique=True)),
                ("definition", models.JSONField()),
                ("threshold_own_share", models.FloatField(default=0.8)),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                ("published_at", models.DateTimeField(blank=True, null=True)),
                (
                    "parent",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="children",
                        to="catalogue.suiteversion",
                    ),
                ),
                (
                    "published_by",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={
                "db_table": "leaderboard_suiteversion",
                "ordering": ["name", "-published_at"],
                "constraints": [
                    models.UniqueConstraint(
                        fields=("name", "version"), name="suite_name_version_unique"
                    )
                ],
            },
        ),
        migrations.CreateModel(
            name="SuiteOperator",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                (
                    "importance",
                    models.FloatField(
                        help_text=(
                            "Relative weight of the operator; renormalised to sum to 1 on publish."
                        ),
                        validators=[django.core.validators.MinValueValidator(0.0)],
                    ),
                ),
                ("importance_raw", models.FloatField(default=0.0)),
                (
                    "enabled",
                    models.BooleanField(
                        default=True,
                        help_text="Disabled operators are left out of the published suite.",
                    ),
                ),
                ("description", models.TextField(blank=True)),
                ("sources", models.JSONField(blank=True, default=dict)),
                (
                    "operator",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="+",
                        to="catalogue.operator",
                    ),
                ),
                (
                    "suite_version",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="suite_operators",
                        to="catalogue.suiteversion",
                    ),
                ),
            ],
            options={
                "db_table": "leaderboard_suiteoperator",
                "ordering": ["-importance"],
                "constraints": [
                    models.UniqueConstraint(
                        fields=("suite_version", "operator"), name="suite_operator_unique"
                    )
                ],
            },
        ),
        migrations.CreateModel(
            name="Shape",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("shape_id", models.CharField(max_length=40)),
                ("init_kwargs", models.JSONField(default=dict)),
                ("input_kwargs", models.JSONField(default=dict)),
                (
                    "weight",
                    models.FloatField(
                        default=1.0, validators=[django.core.validators.MinValueValidator(0.0)]
                    ),
                ),
                ("w_flops", models.JSONField(default=dict)),
                ("q_read", models.BigIntegerField()),
                ("q_write", models.BigIntegerField()),
                (
                    "visibility",
                    models.CharField(
                        choices=[
                            ("public", "Public"),
                            ("hidden", "Hidden (scored, never shown to agents)"),
                        ],
                        default="public",
                        max_length=8,
                    ),
                ),
                ("smoke", models.BooleanField(default=False)),
                (
                    "enabled",
                    models.BooleanField(
                        default=True, help_text="Disabled shapes are left out of the published suite."
                    ),
                ),
                ("source", models.CharField(blank=True, max_length=200)),
                ("description", models.TextField(blank=True)),
                (
                    "operator",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="shapes",
                        to="catalogue.operator",
                    ),
                ),
                (
                    "suite_version",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="shapes",
                        to="catalogue.suiteversion",
                    ),
                ),
            ],
            options={
                "db_table": "leaderboard_shape",
                "ordering": ["operator__slug", "shape_id"],
                "constraints": [
                    models.UniqueConstraint(
                        fields=("suite_version", "operator", "shape_id"), name="shape_unique"
                    )
                ],
            },
        ),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(state_operations=state_operations, database_operations=[])
    ]
