"""The worker side of the registry: Celery signals in a worker process.

``celeryd_after_setup`` (queues known, nothing consumed yet): register as ``starting``,
start the heartbeat thread, measure the device's ceilings in a child process
(``python -m evaluator ceilings``: the site never imports torch) and store them, all
before the first task can run on the GPU. ``worker_ready``: online. ``worker_shutdown``:
stopped. The heartbeat is a thread, not a Celery timer, so that it keeps beating while a
``--pool solo`` worker is busy with an hours-long evaluation.
"""

from __future__ import annotations

import json
import logging
import os
import platform
import socket
import threading
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any

from celery import signals
from django.conf import settings
from django.db import close_old_connections, connection

from evaluator import HARNESS_VERSION
from evaluator.launch import LaunchTimeout, run_evaluator_command, scratch_folder

from . import services
from .models import WorkerNode

logger = logging.getLogger(__name__)

CEILINGS_TIMEOUT_S = 300


def _version(distribution: str) -> str:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return ""


def _release_connection() -> None:
    """Close this thread's database connection. The heartbeat thread holds none between
    beats, so a pool child forked meanwhile inherits no open session of it."""
    try:
        connection.close()
    except Exception:  # noqa: BLE001 - a broken connection is closed either way
        logger.debug("closing the database connection failed", exc_info=True)


@dataclass
class WorkerPresence:
    """This process's registration: its facts, its ceilings and its heartbeat thread."""

    facts: services.WorkerFacts
    interval_s: float
    ceilings_fields: dict[str, Any] = field(default_factory=dict)
    stop_event: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None

    def register(self, status: str = services.Status.STARTING) -> None:
        services.worker_node_register(
            facts=self.facts, ceilings=self.ceilings_fields or None, status=status
        )

    def beat(self) -> None:
        """One heartbeat; registers again if the row has gone."""
        close_old_connections()
        try:
            if not services.worker_node_heartbeat(name=self.facts.name):
                logger.info("worker %s was not registered: registering again", self.facts.name)
                self.register(status=services.Status.ONLINE)
        except Exception:  # noqa: BLE001 - the next beat tries again
            logger.exception("heartbeat of worker %s failed", self.facts.name)
        finally:
            _release_connection()

    def start_heartbeats(self) -> None:
        def loop() -> None:
            while not self.stop_event.wait(self.interval_s):
                self.beat()

        self.thread = threading.Thread(target=loop, name="atrex-fleet-heartbeat", daemon=True)
        self.thread.start()

    def stop_heartbeats(self) -> None:
        self.stop_event.set()
        if self.thread is not None:
            self.thread.join(timeout=10)

    def measure_ceilings(self) -> None:
        """Run the evaluator's ceilings command and keep what it says (or why it failed)."""
        if not self.facts.hardware_profile:
            self.ceilings_fields = {
                "ceilings_status": WorkerNode.CeilingsStatus.NOT_MEASURED,
                "ceilings_error": "this worker consumes no evaluation queue",
            }
        else:
            self.ceilings_fields = run_ceilings_command(device=self.facts.device)
        services.worker_node_record_ceilings(name=self.facts.name, fields=self.ceilings_fields)


def run_ceilings_command(*, device: str) -> dict[str, Any]:
    """``python -m evaluator ceilings --device DEVICE`` in a child process (the evaluator's
    interpreter, started by ``evaluator.launch``); model fields for the result or the
    failure."""
    with scratch_folder("ceilings") as scratch:
        out = scratch / "ceilings.json"
        try:
            completed = run_evaluator_command(
                "ceilings",
                ["--device", device, "--out", str(out)],
                scratch=scratch,
                timeout_s=CEILINGS_TIMEOUT_S,
                python=settings.ATREX["EVALUATOR_PYTHON"] or "",
            )
        except (OSError, LaunchTimeout) as exc:
            return _ceilings_failure(f"python -m evaluator ceilings --device {device}: {exc}")
        if completed.returncode != 0 or not out.exists():
            return _ceilings_failure(f"exit code {completed.returncode}: {completed.output_tail()}")
        try:
            document = json.loads(out.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            return _ceilings_failure(f"unreadable ceilings file: {exc}")
    logger.info(
        "ceilings on %s: copy %.3g B/s, bf16 GEMM %.3g FLOP/s",
        document.get("device_name"),
        document.get("copy_bytes_per_s") or 0,
        document.get("bf16_gemm_flops_per_s") or 0,
    )
    return services.ceilings_fields(document)


def _ceilings_failure(message: str) -> dict[str, Any]:
    logger.error("ceilings measurement failed: %s", message)
    return {"ceilings_status": WorkerNode.CeilingsStatus.FAILED, "ceilings_error": message}


def worker_facts(*, name: str, queues: list[str], concurrency: int | None) -> services.WorkerFacts:
    """What this process can say about itself without torch."""
    return services.WorkerFacts(
        name=name,
        hostname=socket.gethostname(),
        pid=os.getpid(),
        queues=sorted(queues),
        device=settings.ATREX["WORKER_DEVICE"],
        cuda_visible_devices=os.environ.get("CUDA_VISIBLE_DEVICES", ""),
        concurrency=concurrency,
        python_version=platform.python_version(),
        harness_version=HARNESS_VERSION,
        celery_version=_version("celery"),
        torch_version=_version("torch"),
        triton_version=_version("triton"),
    )


# The registration of this process, if it is a worker (one per process).
_presence: WorkerPresence | None = None


def on_after_setup(sender: str, instance, **kwargs: Any) -> None:
    """Register, start heartbeating, measure the ceilings; before any task is consumed."""
    global _presence
    queues = list(instance.app.amqp.queues.consume_from)
    facts = worker_facts(name=str(sender), queues=queues, concurrency=instance.concurrency)
    presence = WorkerPresence(facts=facts, interval_s=settings.ATREX["FLEET_HEARTBEAT_S"])
    try:
        presence.register()
        presence.start_heartbeats()
        if settings.ATREX["FLEET_MEASURE_CEILINGS"]:
            presence.measure_ceilings()
    except Exception:  # noqa: BLE001 - the registry must never keep a worker from working
        logger.exception("registering worker %s failed", facts.name)
    finally:
        _release_connection()
    _presence = presence


def on_worker_ready(**kwargs: Any) -> None:
    if _presence is None:
        return
    try:
        if not services.worker_node_mark_online(name=_presence.facts.name):
            _presence.register(status=services.Status.ONLINE)
    except Exception:  # noqa: BLE001
        logger.exception("marking worker %s online failed", _presence.facts.name)
    finally:
        _release_connection()


def on_worker_shutdown(**kwargs: Any) -> None:
    if _presence is None:
        return
    _presence.stop_heartbeats()
    try:
        services.worker_node_stop(name=_presence.facts.name)
    except Exception:  # noqa: BLE001
        logger.exception("marking worker %s stopped failed", _presence.facts.name)
    finally:
        _release_connection()


def connect_signals() -> None:
    """Connect the handlers (idempotent: Celery keys receivers by function)."""
    signals.celeryd_after_setup.connect(on_after_setup, weak=False)
    signals.worker_ready.connect(on_worker_ready, weak=False)
    signals.worker_shutdown.connect(on_worker_shutdown, weak=False)
