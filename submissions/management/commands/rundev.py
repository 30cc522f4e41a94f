"""Run the development site and one Celery worker together; Ctrl-C stops both."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

from django.core.management.base import BaseCommand

from leaderboard.models import HardwareProfile


class Command(BaseCommand):
    help = "Serve the site on ADDRPORT with a worker for the CPU development profile."

    def add_arguments(self, parser) -> None:
        parser.add_argument("addrport", nargs="?", default="127.0.0.1:8000")
        parser.add_argument("--hardware", default="cpu-dev")

    def handle(self, *args, addrport: str, hardware: str, **options) -> None:
        queue = HardwareProfile(slug=hardware).queue
        worker = subprocess.Popen(  # noqa: S603
            [sys.executable, "-m", "celery", "-A", "atrex_site", "worker",
             "-Q", f"{queue},site", "--concurrency", "1", "--loglevel", "INFO"]
        )  # fmt: skip
        server = subprocess.Popen(  # noqa: S603
            [sys.executable, "manage.py", "runserver", addrport, "--noreload"]
        )
        self.stdout.write(f"site on http://{addrport}/ with a worker on queue {queue}")
        try:
            while worker.poll() is None and server.poll() is None:
                time.sleep(0.5)
        except KeyboardInterrupt:
            pass
        finally:
            for process in (server, worker):
                if process.poll() is None:
                    process.send_signal(signal.SIGTERM)
            for process in (server, worker):
                try:
                    process.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    process.kill()
