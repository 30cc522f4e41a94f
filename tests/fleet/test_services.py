"""The registry's writes and reads without a worker process: lost workers, re-registration,
the hardware profile of a queue, staff-only access."""

from __future__ import annotations

import socket
from datetime import timedelta

import pytest
from django.utils import timezone

from fleet import selectors, services
from fleet.models import WorkerNode
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


def facts(name: str = "gpu0@node1", queues=("eval.h200-sxm",)) -> services.WorkerFacts:
    return services.WorkerFacts(
        name=name, hostname="node1", pid=123, queues=list(queues), device="cuda",
        cuda_visible_devices="0",
    )  # fmt: skip


@pytest.mark.parametrize(
    ("queues", "profile"),
    [
        (["eval.h200-sxm"], "h200-sxm"),
        (["site"], ""),
        (["eval.h20", "site", "eval.h100-sxm"], "h100-sxm,h20"),
    ],
)
def test_hardware_profile_comes_from_the_evaluation_queue(queues, profile):
    assert services.hardware_profile_of_queues(queues) == profile


def test_silent_worker_is_marked_lost_and_comes_back_with_a_heartbeat():
    services.worker_node_register(facts=facts())
    services.worker_node_mark_online(name="gpu0@node1")
    old = timezone.now() - timedelta(seconds=600)
    WorkerNode.objects.filter(name="gpu0@node1").update(last_heartbeat_at=old)

    assert selectors.worker_views()[0].effective_status == "lost"  # before any sweep
    assert services.worker_nodes_mark_lost(lost_after_s=120) == 1
    assert WorkerNode.objects.get().status == "lost"

    assert services.worker_node_heartbeat(name="gpu0@node1")
    node = WorkerNode.objects.get()
    assert node.status == "online"
    assert (timezone.now() - node.last_heartbeat_at).total_seconds() < 5


def test_fresh_workers_are_not_marked_lost():
    services.worker_node_register(facts=facts())
    assert services.worker_nodes_mark_lost(lost_after_s=120) == 0
    assert WorkerNode.objects.get().status == "starting"


def test_heartbeat_neither_finishes_a_start_nor_revives_a_stopped_worker():
    services.worker_node_register(facts=facts())
    assert services.worker_node_heartbeat(name="gpu0@node1")
    assert WorkerNode.objects.get().status == "starting"
    services.worker_node_stop(name="gpu0@node1")
    assert not services.worker_node_heartbeat(name="gpu0@node1")
    assert WorkerNode.objects.get().status == "stopped"


def test_registering_again_replaces_the_previous_start():
    first = services.worker_node_register(facts=facts())
    services.worker_node_record_ceilings(
        name=first.name,
        fields=services.ceilings_fields(
            {"device_name": "NVIDIA H200", "copy_bytes_per_s": 4.27e12,
             "bf16_gemm_flops_per_s": 7.16e14, "harness_version": "0.1.0",
             "environment": {"driver": "580.159.04", "torch": "2.11.0", "triton": "3.6.0",
                             "clocks_start": {"sm_mhz": 1980.0}}}
        ),
    )  # fmt: skip
    node = WorkerNode.objects.get()
    assert (node.gpu_name, node.driver, node.torch_version) == (
        "NVIDIA H200",
        "580.159.04",
        "2.11.0",
    )
    assert node.ceilings_status == "measured" and node.bf16_gemm_flops_per_s == 7.16e14

    again = services.worker_node_register(facts=facts())
    assert WorkerNode.objects.count() == 1
    assert again.started_at > first.started_at
    assert again.ceilings_status == "pending" and again.copy_bytes_per_s is None


def test_status_page_is_for_staff_only(client):
    assert client.get("/staff/fleet/").status_code == 302  # to the admin log-in
    response = client.get("/staff/fleet/status.json")
    assert response.status_code == 403 and response.json()["code"] == "auth:staff-only"
    client.force_login(UserFactory())
    assert client.get("/staff/fleet/status.json").status_code == 403
    assert client.get("/staff/fleet/").status_code == 302


def test_status_page_says_when_no_worker_registered(client):
    client.force_login(UserFactory(is_staff=True))
    page = client.get("/staff/fleet/")
    assert page.status_code == 200
    assert "No worker has registered yet" in page.content.decode()


def test_the_admin_list_links_to_the_status_page(client):
    client.force_login(UserFactory(is_staff=True, is_superuser=True))
    page = client.get("/admin/fleet/workernode/")
    assert page.status_code == 200
    assert 'href="/staff/fleet/"' in page.content.decode()


def test_queue_depth_on_the_filesystem_broker_counts_message_files(tmp_path):
    from celery import Celery

    app = Celery("fleet-fs-test", broker="filesystem://", set_as_current=False)
    (tmp_path / "control").mkdir()
    app.conf.broker_transport_options = {
        "data_folder_in": str(tmp_path),
        "data_folder_out": str(tmp_path),
        "control_folder": str(tmp_path / "control"),
        "store_processed": False,
    }
    for run_id in (1, 2):
        app.send_task("submissions.evaluate_run", args=[run_id], queue="eval.h20")
    sizes, error = selectors.broker_queue_sizes(["eval.h20", "site"], app=app)
    assert (sizes, error) == ({"eval.h20": 2, "site": 0}, "")


def test_an_unreachable_broker_is_reported_not_raised():
    from celery import Celery

    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    app = Celery("fleet-down-test", broker=f"redis://127.0.0.1:{port}/0", set_as_current=False)
    sizes, error = selectors.broker_queue_sizes(["eval.h20"], app=app)
    assert sizes == {"eval.h20": None} and "Error" in error
