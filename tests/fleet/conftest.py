"""A real Celery worker process that beats every second, for the registry's tests."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import _database_url

QUEUE = "eval.cpu-dev"


@dataclass
class WorkerProcess:
    name: str
    process: subprocess.Popen
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self, timeout_s: float = 30.0) -> int:
        """SIGTERM (Celery's warm shutdown), then wait; SIGKILL if it hangs."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        return self.process.returncode


def start_worker(*, label: str, log_dir: Path, queues: str = QUEUE, **extra_env) -> WorkerProcess:
    """Start ``celery worker`` on the test broker and database, its heartbeat every second."""
    name = f"{label}-{os.getpid()}@fleet-test"
    log_path = log_dir / f"{label}.log"
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "atrex_site.settings.test",
        "DATABASE_URL": _database_url(),
        "ATREX_TEST_REQUIRE_SERVICES": "0",
        "ATREX_FLEET_HEARTBEAT_S": "1",
        "ATREX_WORKER_DEVICE": "cpu",
        **extra_env,
    }
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "atrex_site", "worker", "-Q", queues,
             "--concurrency", "1", "--loglevel", "INFO", "-n", name,
             "--without-gossip", "--without-mingle", "--without-heartbeat"],
            env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    time.sleep(0.5)
    if process.poll() is not None:
        raise RuntimeError(f"the Celery worker exited at once:\n{log_path.read_text()}")
    return WorkerProcess(name=name, process=process, log_path=log_path)


@pytest.fixture(scope="module")
def fleet_worker(
    django_db_setup, close_other_db_sessions_at_the_end, django_db_blocker, tmp_path_factory
):
    with django_db_blocker.unblock():
        worker = start_worker(label="fleet", log_dir=tmp_path_factory.mktemp("fleet-worker"))
    yield worker
    worker.stop()
    # Its row outlives the module (its last beat or its stop may come after the last
    # test's flush): delete it, so that the tests after it on this process find no
    # worker they did not register.
    from fleet.models import WorkerNode

    with django_db_blocker.unblock():
        WorkerNode.objects.filter(name=worker.name).delete()


def wait_for(predicate, *, timeout_s: float = 90.0, what: str = "condition", log=None):
    """Poll ``predicate`` until it returns something truthy; return that."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.25)
    tail = log()[-3000:] if log else ""
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}\n{tail}")
