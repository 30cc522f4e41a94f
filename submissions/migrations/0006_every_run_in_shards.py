"""Every evaluation run has one or more shards: a queued or running run of the earlier
unsharded path gets one shard of every suite operator (its state, worker, heartbeat and
sends carried over), then the run's own heartbeat and send fields, which only that path
used, are removed."""

import os

from django.db import migrations


def give_unsharded_runs_one_shard(apps, schema_editor):
    EvaluationRun = apps.get_model("submissions", "EvaluationRun")
    Shard = apps.get_model("submissions", "Shard")
    unsharded = EvaluationRun.objects.filter(
        status__in=("queued", "running"), shard_count=0
    ).select_related("submission__suite_version")
    for run in unsharded:
        definition = run.submission.suite_version.definition
        Shard.objects.create(
            run=run,
            index=0,
            attempt=1,
            operators=[op["slug"] for op in definition["operators"]],
            status=run.status,
            worker=run.worker,
            shapes_total=run.shapes_total,
            shapes_done=run.shapes_done,
            started_at=run.started_at,
            heartbeat_at=run.heartbeat_at,
            dispatched_at=run.dispatched_at,
            dispatch_count=run.dispatch_count,
        )
        run.shard_count = 1
        run.seed = int.from_bytes(os.urandom(8), "big") >> 1
        run.save(update_fields=["shard_count", "seed"])


class Migration(migrations.Migration):
    dependencies = [
        ("submissions", "0005_operator_wall_time"),
    ]

    operations = [
        migrations.RunPython(give_unsharded_runs_one_shard, migrations.RunPython.noop),
        migrations.RemoveField(model_name="evaluationrun", name="heartbeat_at"),
        migrations.RemoveField(model_name="evaluationrun", name="dispatched_at"),
        migrations.RemoveField(model_name="evaluationrun", name="dispatch_count"),
    ]
