"""A real Celery worker process registers itself, beats, and is shown with its queue's depth."""

from __future__ import annotations

import pytest
from celery import current_app

from evaluator import HARNESS_VERSION
from fleet.models import WorkerNode
from tests.factories import UserFactory

from .conftest import QUEUE, start_worker, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

# No worker consumes this queue in the tests: messages sent there stay and are counted.
IDLE_QUEUE = "eval.h200-sxm"


def registered(name: str, **conditions):
    def check():
        return WorkerNode.objects.filter(name=name, **conditions).first()

    return check


def test_worker_registers_its_queues_versions_and_ceilings(fleet_worker):
    node = wait_for(
        registered(fleet_worker.name, status="online", ceilings_status="measured"),
        what="the worker to register and measure its ceilings",
        log=fleet_worker.log,
    )
    assert node.queues == [QUEUE]
    assert node.hardware_profile == "cpu-dev"
    assert node.device == "cpu"
    assert node.pid == fleet_worker.process.pid
    assert node.harness_version == HARNESS_VERSION
    assert node.torch_version and node.triton_version and node.celery_version
    # Measured by `python -m evaluator ceilings --device cpu` in a child of the worker.
    assert node.ceilings["schema"] == "atrex-ceilings/1"
    assert node.copy_bytes_per_s > 1e8 and node.bf16_gemm_flops_per_s > 1e7
    assert node.gpu_name  # the CPU's model name on a CPU worker


def test_worker_heartbeats_while_idle(fleet_worker):
    node = wait_for(registered(fleet_worker.name, status="online"), log=fleet_worker.log)
    first = node.last_heartbeat_at
    later = wait_for(
        registered(fleet_worker.name, last_heartbeat_at__gt=first),
        timeout_s=15,
        what="a newer heartbeat",
        log=fleet_worker.log,
    )
    assert (later.last_heartbeat_at - first).total_seconds() < 10
    assert later.started_at == node.started_at  # a heartbeat is not a new registration


def test_a_deleted_row_comes_back_with_the_next_heartbeat(fleet_worker):
    wait_for(registered(fleet_worker.name, ceilings_status="measured"), log=fleet_worker.log)
    WorkerNode.objects.filter(name=fleet_worker.name).delete()
    node = wait_for(
        registered(fleet_worker.name), timeout_s=15, what="re-registration", log=fleet_worker.log
    )
    assert node.status == "online"
    # The worker keeps its ceilings in memory: no second measurement is needed.
    assert node.ceilings_status == "measured" and node.copy_bytes_per_s > 0


def test_status_page_and_json_show_the_worker_and_queue_depth(client, fleet_worker, catalogue):
    wait_for(registered(fleet_worker.name, status="online"), log=fleet_worker.log)
    with current_app.connection_for_write() as connection:
        connection.default_channel.queue_purge(IDLE_QUEUE)
    try:
        for run_id in (101, 102, 103):
            current_app.send_task("submissions.evaluate_run", args=[run_id], queue=IDLE_QUEUE)
        client.force_login(UserFactory(is_staff=True))
        data = client.get("/staff/fleet/status.json").json()
        page = client.get("/staff/fleet/")
    finally:
        with current_app.connection_for_write() as connection:
            connection.default_channel.queue_purge(IDLE_QUEUE)

    queues = {entry["queue"]: entry for entry in data["queues"]}
    assert queues[IDLE_QUEUE]["waiting"] == 3 and queues[IDLE_QUEUE]["workers_online"] == 0
    assert queues[QUEUE]["workers_online"] >= 1 and queues[QUEUE]["waiting"] == 0
    assert "site" in queues
    workers = {entry["name"]: entry for entry in data["workers"]}
    mine = workers[fleet_worker.name]
    assert mine["status"] == "online" and mine["heartbeat_age_s"] < 10
    assert mine["queues"] == [QUEUE] and mine["hardware_profile"] == "cpu-dev"

    assert page.status_code == 200
    html = page.content.decode()
    assert fleet_worker.name in html
    # The idle queue's row shows its 3 waiting messages and that nobody consumes it.
    row = html[html.index(f'id="queue-{IDLE_QUEUE}"') :].split("</tr>", 1)[0]
    assert ">3<" in row and "nobody consumes it" in row


def test_a_stopped_worker_is_shown_stopped(tmp_path, catalogue):
    worker = start_worker(label="short-lived", log_dir=tmp_path)
    try:
        wait_for(registered(worker.name, status="online"), what="the second worker", log=worker.log)
    finally:
        code = worker.stop()
    assert code == 0, worker.log()[-3000:]
    node = WorkerNode.objects.get(name=worker.name)
    assert node.status == "stopped" and node.stopped_at is not None
