"""Run the development site, an evaluation worker and a site worker with the reaper's beat
together; Ctrl-C stops them all."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand

from catalogue.models import HardwareProfile


class Command(BaseCommand):
    help = "Serve the site on ADDRPORT with a worker for the CPU development profile."

    def add_arguments(self, parser) -> None:
        parser.add_argument("addrport", nargs="?", default="127.0.0.1:8000")
        parser.add_argument("--hardware", default="cpu-dev")

    def handle(self, *args, addrport: str, hardware: str, **options) -> None:
        queue = HardwareProfile(slug=hardware).queue
        celery = [sys.executable, "-m", "celery", "-A", "atrex_site", "worker",
                  "--concurrency", "1", "--loglevel", "INFO"]  # fmt: skip
        # The evaluation worker, and a site worker that also runs beat (the reaper's clock),
        # so the reaper runs while an evaluation is in progress, as in production.
        worker = subprocess.Popen([*celery, "-Q", queue, "-n", f"eval-{hardware}@%h"])  # noqa: S603
        schedule = Path(settings.VAR_DIR) / "celerybeat-schedule"
        site_worker = subprocess.Popen(  # noqa: S603
            [*celery, "-Q", "site", "-n", "site@%h", "--beat", "--schedule", str(schedule)]
        )
        server = subprocess.Popen(  # noqa: S603
            [sys.executable, "manage.py", "runserver", addrport, "--noreload"]
        )
        processes = (server, site_worker, worker)
        self.stdout.write(
            f"site on http://{addrport}/ with a worker on queue {queue} and the reaper "
            f"every {settings.ATREX['REAPER_INTERVAL_S']:.0f} s"
        )
        try:
            while all(process.poll() is None for process in processes):
                time.sleep(0.5)
        except KeyboardInterrupt:
            pass
        finally:
            for process in processes:
                if process.poll() is None:
                    process.send_signal(signal.SIGTERM)
            for process in processes:
                try:
                    process.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    process.kill()
