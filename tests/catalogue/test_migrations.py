"""Moving the catalogue (and ``Score``) out of ``leaderboard`` keeps every row.

The database is built at the schema before the move, filled through the historical
models, then migrated forward; every row must still be there, with its foreign keys, and
the content types (so permissions and admin log entries) must follow the models.
"""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.contrib.contenttypes.models import ContentType
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

# The leaf migrations of the apps involved before the move (``catalogue`` did not exist).
BEFORE_MOVE = [
    ("leaderboard", "0004_score_speedup_compile"),
    ("submissions", "0006_every_run_in_shards"),
    ("traces", "0001_initial"),
    ("catalogue", None),
]
MOVED = {
    "hardwareprofile": "catalogue",
    "operator": "catalogue",
    "suiteversion": "catalogue",
    "suiteoperator": "catalogue",
    "shape": "catalogue",
    "score": "submissions",
}


def _migrate(targets):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    # (app, None) means "none of app's migrations": the state is that of the others.
    applied = [(app, name) for app, name in targets if name is not None]
    return MigrationExecutor(connection).loader.project_state(applied).apps


def _latest():
    return MigrationExecutor(connection).loader.graph.leaf_nodes()


def _populate(apps) -> dict[str, int]:
    """One row of each moved table (and what they point at), through the old models."""
    User = apps.get_model("auth", "User")
    HardwareProfile = apps.get_model("leaderboard", "HardwareProfile")
    Operator = apps.get_model("leaderboard", "Operator")
    SuiteVersion = apps.get_model("leaderboard", "SuiteVersion")
    SuiteOperator = apps.get_model("leaderboard", "SuiteOperator")
    Shape = apps.get_model("leaderboard", "Shape")
    Score = apps.get_model("leaderboard", "Score")
    Submission = apps.get_model("submissions", "Submission")
    EvaluationRun = apps.get_model("submissions", "EvaluationRun")

    owner = User.objects.create(username="before-the-move")
    hardware = HardwareProfile.objects.create(
        slug="h-move",
        name="Move GPU",
        device_kind="cuda",
        peak_flops={"bf16_tc": 1e15},
        hbm_bytes_per_s=4e12,
        source="datasheet",
    )
    operator = Operator.objects.create(slug="op_move", dtype="bf16", phase="decode")
    parent = SuiteVersion.objects.create(
        name="move",
        version="1",
        content_hash="sha256:parent",
        definition={"name": "move"},
        status="published",
        published_at=timezone.now(),
        published_by=owner,
    )
    version = SuiteVersion.objects.create(
        name="move", version="2", content_hash="draft:child", definition={}, parent=parent
    )
    suite_operator = SuiteOperator.objects.create(
        suite_version=parent, operator=operator, importance=1.0, sources={"reference.py": "x"}
    )
    shape = Shape.objects.create(
        suite_version=parent,
        operator=operator,
        shape_id="7",
        input_kwargs={"n": 7},
        w_flops={"bf16": 10},
        q_read=20,
        q_write=30,
        visibility="hidden",
    )
    submission = Submission.objects.create(
        owner=owner,
        title="moved row",
        suite_version=parent,
        hardware=hardware,
        status="published",
    )
    run = EvaluationRun.objects.create(submission=submission, queue="eval.h-move")
    score = Score.objects.create(
        submission=submission,
        run=run,
        suite_version=parent,
        hardware=hardware,
        aggregate=0.625,
        apparent_pass_rate=1.0,
        real_pass_rate=0.75,
        fallback_rate=0.0,
        geomean_speedup_compile=1.5,
        operator_scores={"op_move": 0.625},
        published_at=timezone.now(),
    )
    return {
        "owner": owner.pk,
        "hardware": hardware.pk,
        "operator": operator.pk,
        "parent": parent.pk,
        "version": version.pk,
        "suite_operator": suite_operator.pk,
        "shape": shape.pk,
        "submission": submission.pk,
        "run": run.pk,
        "score": score.pk,
    }


def _old_content_types(*, staff_id: int) -> dict[str, int]:
    """The content types as they were before the move (``leaderboard.<model>``), and a
    staff user granted ``leaderboard.change_suiteversion``."""
    ids = {}
    for model, app in MOVED.items():
        ContentType.objects.filter(app_label=app, model=model).delete()
        ids[model] = ContentType.objects.get_or_create(app_label="leaderboard", model=model)[0].pk
    ContentType.objects.clear_cache()
    permission, _ = Permission.objects.get_or_create(
        content_type_id=ids["suiteversion"],
        codename="change_suiteversion",
        defaults={"name": "Can change suite version"},
    )
    permission.user_set.add(staff_id)
    return ids


@pytest.mark.django_db(transaction=True)
def test_moving_the_catalogue_out_of_leaderboard_keeps_every_row():
    try:
        old_apps = _migrate(BEFORE_MOVE)
        ids = _populate(old_apps)
        type_ids = _old_content_types(staff_id=ids["owner"])

        new_apps = _migrate(_latest())

        get = new_apps.get_model
        hardware = get("catalogue", "HardwareProfile").objects.get(pk=ids["hardware"])
        assert (hardware.slug, hardware.peak_flops) == ("h-move", {"bf16_tc": 1e15})
        operator = get("catalogue", "Operator").objects.get(pk=ids["operator"])
        assert operator.slug == "op_move"
        SuiteVersion = get("catalogue", "SuiteVersion")
        parent = SuiteVersion.objects.get(pk=ids["parent"])
        assert (parent.name, parent.version, parent.published_by_id) == ("move", "1", ids["owner"])
        child = SuiteVersion.objects.get(pk=ids["version"])
        assert child.parent_id == parent.pk
        suite_operator = get("catalogue", "SuiteOperator").objects.get(pk=ids["suite_operator"])
        assert (suite_operator.suite_version_id, suite_operator.operator_id) == (
            parent.pk,
            operator.pk,
        )
        assert suite_operator.sources == {"reference.py": "x"}
        shape = get("catalogue", "Shape").objects.get(pk=ids["shape"])
        assert (shape.suite_version_id, shape.operator_id, shape.shape_id) == (
            parent.pk,
            operator.pk,
            "7",
        )
        assert (shape.q_read, shape.q_write, shape.visibility) == (20, 30, "hidden")
        submission = get("submissions", "Submission").objects.get(pk=ids["submission"])
        assert (submission.suite_version_id, submission.hardware_id) == (parent.pk, hardware.pk)
        score = (
            get("submissions", "Score")
            .objects.select_related("submission", "run", "suite_version", "hardware")
            .get(pk=ids["score"])
        )
        assert score.submission.title == "moved row"
        assert score.run.pk == ids["run"]
        assert (score.suite_version.version, score.hardware.slug) == ("1", "h-move")
        assert (score.aggregate, score.geomean_speedup_compile) == (0.625, 1.5)
        # The relations work from the other end too (the reverse accessors of the new state).
        assert list(parent.shapes.values_list("pk", flat=True)) == [ids["shape"]]
        assert list(hardware.scores.values_list("pk", flat=True)) == [ids["score"]]

        # Content types moved in place (same ids): permissions and log entries follow.
        for model, app in MOVED.items():
            row = ContentType.objects.get(pk=type_ids[model])
            assert (row.app_label, row.model) == (app, model)
        assert not ContentType.objects.filter(app_label="leaderboard", model__in=list(MOVED))
        staff = get_user_model().objects.get(pk=ids["owner"])
        assert staff.has_perm("catalogue.change_suiteversion")
        assert not staff.has_perm("leaderboard.change_suiteversion")
    finally:
        _migrate(_latest())
        ContentType.objects.clear_cache()
