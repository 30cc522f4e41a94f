"""Every periodic task in the beat schedule names a task the workers know, on the site queue."""

from __future__ import annotations

from django.conf import settings

from atrex_site.celery import app


def test_every_scheduled_task_exists_and_goes_to_the_site_queue():
    app.loader.import_default_modules()
    schedule = settings.CELERY_BEAT_SCHEDULE
    assert {"submissions.reap_runs", "fleet.mark_lost_workers"} <= {
        entry["task"] for entry in schedule.values()
    }
    for name, entry in schedule.items():
        assert entry["task"] in app.tasks, f"{name}: no task {entry['task']!r}"
        assert entry["options"]["queue"] == "site", name
