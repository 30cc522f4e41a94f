"""Honest queues: whether a worker serves each hardware, where a queued submission stands
and when it should start, estimated from the measured wall time of the queue's runs."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from catalogue.models import HardwareProfile
from submissions import services
from submissions.models import EvaluationRun, Submission
from submissions.queues import queue_state, wait_in_words
from tests.factories import WorkerNodeFactory
from tests.submissions.test_checks import MODEL, _zip

pytestmark = pytest.mark.django_db


def _finished_run(owner, seconds: float) -> None:
    submission = services.submission_create(owner=owner, upload=_zip({"rms_norm.py": MODEL}))
    end = timezone.now()
    submission.runs.update(
        status=EvaluationRun.Status.SUCCEEDED,
        started_at=end - timedelta(seconds=seconds),
        finished_at=end,
    )
    Submission.objects.filter(pk=submission.pk).update(status=Submission.Status.PUBLISHED)


def test_a_queue_without_a_worker_says_so_and_gives_no_estimate(catalogue, user):
    services.submission_create(owner=user, upload=_zip({"rms_norm.py": MODEL}))
    state = queue_state(hardware=HardwareProfile.objects.get(slug="cpu-dev"))
    assert not state.serves and state.waiting == 1
    assert state.wait_s(ahead=0) is None
    assert wait_in_words(None, state).startswith("no worker for CPU")


def test_the_estimate_counts_runs_ahead_per_worker_at_the_median_run_time(catalogue, user):
    WorkerNodeFactory()
    _finished_run(user, 60)
    _finished_run(user, 120)
    _finished_run(user, 90)
    hardware = HardwareProfile.objects.get(slug="cpu-dev")
    state = queue_state(hardware=hardware)
    assert state.median_run_s == pytest.approx(90, abs=1) and state.runs_measured == 3
    assert state.wait_s(ahead=0) == 0.0  # the one worker is free
    busy = services.submission_create(owner=user, upload=_zip({"rms_norm.py": MODEL}))
    busy.runs.update(status=EvaluationRun.Status.RUNNING)
    waiting = services.submission_create(owner=user, upload=_zip({"rms_norm.py": MODEL}))
    state = queue_state(hardware=hardware)
    assert (state.running, state.waiting) == (1, 1)
    assert state.wait_s(ahead=0) == pytest.approx(90, abs=1)  # after the running one
    assert state.wait_s(ahead=1) == pytest.approx(180, abs=2)
    progress = client_progress(waiting)
    assert progress["queue"]["position"] == 1 and progress["queue"]["workers_online"] == 1
    assert "Number 1 in the queue for CPU" in progress["queue"]["note"]
    assert "about 2 min" in progress["queue"]["note"]


def client_progress(submission: Submission) -> dict:
    api = APIClient()
    api.force_authenticate(submission.owner)
    return api.get(f"/api/submissions/{submission.pk}/progress/").json()


def test_progress_has_no_queue_place_once_the_run_started(catalogue, user):
    submission = services.submission_create(owner=user, upload=_zip({"rms_norm.py": MODEL}))
    assert client_progress(submission)["queue"]["position"] == 1
    submission.runs.update(status=EvaluationRun.Status.RUNNING)
    Submission.objects.filter(pk=submission.pk).update(status=Submission.Status.RUNNING)
    assert client_progress(submission)["queue"] is None


def test_the_form_marks_hardware_without_a_worker_and_proposes_a_served_one(
    client, catalogue, user
):
    WorkerNodeFactory(hardware_profile="h100-sxm")
    client.force_login(user)
    page = client.get(reverse("submissions:new")).content.decode()
    assert "NVIDIA H100 SXM (1 worker online)" in page
    assert (
        "CPU development profile (nominal 2-core box) (no worker online: a submission waits)"
        in (page)
    )
    h100 = HardwareProfile.objects.get(slug="h100-sxm")
    assert f'<option value="{h100.pk}" selected>' in page  # the board's default has no worker
    assert 'id="queues"' in page and "no worker for NVIDIA H20 is online" in page


def test_the_queues_api_lists_every_enabled_hardware(catalogue, user):
    WorkerNodeFactory()
    body = APIClient().get("/api/queues/").json()
    by_slug = {row["hardware"]: row for row in body}
    assert by_slug["cpu-dev"]["serves"] is True and by_slug["cpu-dev"]["new_wait_s"] == 0.0
    assert by_slug["h20"]["serves"] is False and by_slug["h20"]["new_wait_s"] is None


def test_a_queued_submission_without_a_worker_says_it_waits_for_one(catalogue, user):
    submission = services.submission_create(owner=user, upload=_zip({"rms_norm.py": MODEL}))
    note = client_progress(submission)["queue"]["note"]
    assert note == (
        "Number 1 in the queue for CPU development profile (nominal 2-core box) · no worker "
        "for it is online: it waits until one starts"
    )
