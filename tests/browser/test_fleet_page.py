"""The staff's fleet page in a real browser at phone width: each queue and each worker one
block, its figures named, nothing off the screen."""

from __future__ import annotations

import pytest
from django.test import Client
from django.utils import timezone

from fleet.models import WorkerNode
from tests.browser.layout import assert_within_width, before_labels
from tests.factories import UserFactory

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_the_fleet_page_reads_on_a_phone(
    close_other_db_sessions_at_the_end, page, live_server, catalogue
):
    now = timezone.now()
    WorkerNode.objects.create(
        name="celery@gpu-node-with-a-long-host-name-07",
        hostname="gpu-node-with-a-long-host-name-07",
        pid=4242, queues=["eval.h200-sxm"], hardware_profile="h200-sxm", device="cuda",
        cuda_visible_devices="3", gpu_name="NVIDIA H200", driver="580.159.04",
        clocks={"sm_mhz": 1980, "max_sm_mhz": 1980, "mem_mhz": 3201},
        torch_version="2.11.0+cu130", triton_version="3.6.0", python_version="3.12.3",
        harness_version="0.3.11", celery_version="5.5.3", ceilings_status="measured",
        copy_bytes_per_s=4.1e12, bf16_gemm_flops_per_s=7.2e14, status="online",
        started_at=now, last_heartbeat_at=now,
    )  # fmt: skip
    staff = UserFactory(is_staff=True)
    client = Client()
    client.force_login(staff)
    page.context.add_cookies(
        [{"name": "sessionid", "value": client.cookies["sessionid"].value, "url": live_server.url}]
    )
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(f"{live_server.url}/staff/fleet/")
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    worker = page.locator("table.fleet-workers tbody tr").first
    labels = before_labels(worker.locator("td"))
    assert labels[:3] == ['"status "', '"heartbeat "', '"queues "'], labels
    cells = page.locator("table.fleet-queues tbody tr > *, table.fleet-workers tbody tr > *")
    assert cells.count() > 10
    assert_within_width(cells, 390)
    assert "NVIDIA H200" in worker.inner_text()
