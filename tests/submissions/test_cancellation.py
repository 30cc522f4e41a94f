"""An owner cancels a submission that waits or runs: nothing is lost, the worker stops,
the quota is refunded; a finished one, or someone else's, cannot be cancelled."""

from __future__ import annotations

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from submissions import services, shards
from submissions.cancellation import NotCancellable, NotYours, submission_cancel
from submissions.models import EvaluationRun, Shard, Submission
from submissions.quotas import quota_status
from tests.factories import UserFactory
from tests.submissions.test_checks import MODEL, _zip

pytestmark = pytest.mark.django_db

Status = Submission.Status


def _queued(user, held_messages) -> Submission:
    submission = services.submission_create(owner=user, upload=_zip({"rms_norm.py": MODEL}))
    assert submission.status == Status.QUEUED
    return submission


def test_a_queued_submission_is_cancelled_with_its_run_and_never_taken(
    catalogue, user, held_messages, settings
):
    settings.ATREX = {**settings.ATREX, "QUOTA_PER_HOUR": 1}
    submission = _queued(user, held_messages)
    assert quota_status(owner=user)["windows"][0]["left"] == 0
    submission_cancel(submission=submission, actor=user)
    submission.refresh_from_db()
    assert submission.status == Status.CANCELLED and submission.upload  # the upload stays
    run = submission.runs.get()
    assert run.status == EvaluationRun.Status.CANCELLED
    assert set(run.shards.values_list("status", flat=True)) == {Shard.Status.CANCELLED}
    assert submission.history.last().note == f"cancelled by its owner ({user.username})"
    # The message still in the queue finds nothing to do.
    assert shards.shard_claim(run_id=run.pk) is None
    assert quota_status(owner=user)["windows"][0]["left"] == 1  # refunded


def test_a_running_submissions_worker_stops_at_its_next_heartbeat(catalogue, user, held_messages):
    submission = _queued(user, held_messages)
    run = submission.runs.get()
    shard = shards.shard_claim(run_id=run.pk)
    assert shard is not None
    submission.refresh_from_db()
    assert submission.status == Status.RUNNING
    beat = shards.ShardHeartbeat(shard)
    beat({"shapes_done": 1, "shapes_total": 3})  # still ours: written
    submission_cancel(submission=submission, actor=user)
    # The worker's next beat finds its run cancelled and raises, which makes the launcher
    # kill the evaluator child (tests/evaluator/test_launch.py: what on_poll raises stops it).
    with pytest.raises(services.RunTakenOver):
        beat({"shapes_done": 2})
    shard.refresh_from_db()
    assert shard.status == Shard.Status.CANCELLED and shard.shapes_done == 1


def test_only_the_owner_or_staff_may_cancel_and_only_before_scoring(catalogue, user, held_messages):
    submission = _queued(user, held_messages)
    with pytest.raises(NotYours):
        submission_cancel(submission=submission, actor=UserFactory())
    Submission.objects.filter(pk=submission.pk).update(status=Status.SCORING)
    with pytest.raises(NotCancellable) as refused:
        submission_cancel(submission=submission, actor=user)
    assert "only a received, queued or running submission" in refused.value.message
    Submission.objects.filter(pk=submission.pk).update(status=Status.QUEUED)
    submission_cancel(submission=submission, actor=UserFactory(is_staff=True))
    submission.refresh_from_db()
    assert submission.status == Status.CANCELLED
    assert submission.history.last().note.startswith("cancelled by an admin")


def test_cancel_in_the_api_answers_200_403_409(catalogue, user, held_messages):
    submission = _queued(user, held_messages)
    url = f"/api/submissions/{submission.pk}/cancel/"
    other = APIClient()
    other.force_authenticate(UserFactory())
    assert other.post(url).status_code == 403
    api = APIClient()
    api.force_authenticate(user)
    response = api.post(url)
    assert response.status_code == 200 and response.json()["status"] == "cancelled"
    again = api.post(url)
    assert again.status_code == 409 and again.json()["code"] == "submission:not-cancellable"


def test_the_page_offers_cancel_to_the_owner_and_a_rejected_upload_a_corrected_one(
    client, catalogue, user, held_messages
):
    submission = _queued(user, held_messages)
    page = reverse("submissions:detail", args=[submission.pk])
    client.force_login(UserFactory())
    assert 'id="cancel-form"' not in client.get(page).content.decode()
    client.force_login(user)
    assert 'id="cancel-form"' in client.get(page).content.decode()
    response = client.post(reverse("submissions:cancel", args=[submission.pk]), follow=True)
    html = response.content.decode()
    assert "Cancelled. It does not count against your quota." in html
    assert 'id="cancel-form"' not in html
    rejected = services.submission_create(
        owner=user, upload=_zip({"rms_norm.py": "def broken(:\n"}), title="try 1"
    )
    html = client.get(reverse("submissions:detail", args=[rejected.pk])).content.decode()
    assert f'href="/submissions/new/?from={rejected.pk}" id="resubmit"' in html
    assert 'id="progress"' not in html  # no "0 / 0 shapes" bar on a rejected upload
    form = client.get(f"/submissions/new/?from={rejected.pk}").content.decode()
    assert 'value="try 1"' in form
