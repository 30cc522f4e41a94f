"""The catalogue's models now belong to ``catalogue`` and ``Score`` to ``submissions``.

No table is dropped or renamed: the models keep their ``leaderboard_*`` tables (see
``catalogue.0001_initial`` and ``submissions.0007_score_from_leaderboard``); this
migration removes them from ``leaderboard``'s migration state and moves their content
types, so that permissions (``catalogue.change_suiteversion``...) and admin log entries
follow the models.
"""

from django.db import migrations

# model -> the app that owns it now.
MOVED = {
    "hardwareprofile": "catalogue",
    "operator": "catalogue",
    "suiteversion": "catalogue",
    "suiteoperator": "catalogue",
    "shape": "catalogue",
    "score": "submissions",
}


def _move_content_types(apps, *, backwards: bool) -> None:
    ContentType = apps.get_model("contenttypes", "ContentType")
    for model, owner in MOVED.items():
        old, new = (owner, "leaderboard") if backwards else ("leaderboard", owner)
        # When the new label exists already (content types are created after a migrate), the
        # old row is left as it is rather than merged: renaming it would break uniqueness.
        if ContentType.objects.filter(app_label=new, model=model).exists():
            continue
        ContentType.objects.filter(app_label=old, model=model).update(app_label=new)


def content_types_forward(apps, schema_editor) -> None:
    _move_content_types(apps, backwards=False)


def content_types_backward(apps, schema_editor) -> None:
    _move_content_types(apps, backwards=True)


class Migration(migrations.Migration):
    dependencies = [
        ("leaderboard", "0004_score_speedup_compile"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("catalogue", "0001_initial"),
        ("submissions", "0007_score_from_leaderboard"),
        ("traces", "0002_suite_versions_in_catalogue"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.DeleteModel(name="Score"),
                migrations.DeleteModel(name="Shape"),
                migrations.DeleteModel(name="SuiteOperator"),
                migrations.DeleteModel(name="SuiteVersion"),
                migrations.DeleteModel(name="Operator"),
                migrations.DeleteModel(name="HardwareProfile"),
            ],
            database_operations=[],
        ),
        migrations.RunPython(content_types_forward, content_types_backward),
    ]
