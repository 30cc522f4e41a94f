"""Run the reaper once: re-queue runs whose worker died, re-send queued runs the broker lost."""

from __future__ import annotations

from django.core.management.base import BaseCommand

from submissions.reaper import runs_reap


class Command(BaseCommand):
    help = (
        "Declare lost the runs with a stale heartbeat and queue new attempts; send again the "
        "queued runs that no worker took; fail submissions past the attempt cap."
    )

    def handle(self, *args, **options) -> None:
        self.stdout.write(str(runs_reap()))
