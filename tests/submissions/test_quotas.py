"""Per-user submission limits: per hour, per day, at once; staff exempt; platform failures
refunded; 429 with a plain message on the web form and in the API."""

from __future__ import annotations

import io
import zipfile
from datetime import timedelta

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from submissions import services
from submissions.models import Submission
from submissions.quotas import QuotaExceeded, quota_status
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

MODULE = (
    "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x\n"
)


def _zip_of(files: dict[str, str]) -> SimpleUploadedFile:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    return SimpleUploadedFile("kernels.zip", buffer.getvalue(), "application/zip")


def _zip() -> SimpleUploadedFile:
    return _zip_of({"silu_and_mul.py": MODULE})


@pytest.fixture
def limits(settings):
    """Turn the limits on (tests run with them off): 2 an hour, 3 a day, 10 at once."""

    def set_limits(*, per_hour=2, per_day=3, active=10):
        settings.ATREX = {
            **settings.ATREX,
            "QUOTA_PER_HOUR": per_hour,
            "QUOTA_PER_DAY": per_day,
            "QUOTA_ACTIVE": active,
        }

    set_limits()
    return set_limits


def _submit(user) -> Submission:
    return services.submission_create(owner=user, upload=_zip())


def _age(submission: Submission, hours: float) -> None:
    Submission.objects.filter(pk=submission.pk).update(
        created_at=timezone.now() - timedelta(hours=hours)
    )


def test_hourly_limit_refuses_the_next_upload_and_stores_nothing(catalogue, user, limits):
    first = _submit(user)
    _submit(user)
    with pytest.raises(QuotaExceeded) as refused:
        _submit(user)
    assert refused.value.code == "quota:per-hour"
    assert "limit is 2 per hour" in refused.value.message
    # The slot frees an hour after the oldest of the two.
    expected = (first.created_at + timedelta(hours=1) - timezone.now()).total_seconds()
    assert abs(refused.value.retry_after_s - expected) < 5
    assert Submission.objects.filter(owner=user).count() == 2


def test_daily_limit_counts_older_submissions_of_the_day(catalogue, user, limits):
    for _ in range(3):
        _age(_submit(user), hours=2)  # outside the hour, inside the day
    with pytest.raises(QuotaExceeded) as refused:
        _submit(user)
    assert refused.value.code == "quota:per-day"
    assert 21 * 3600 < refused.value.retry_after_s <= 22 * 3600


def test_platform_failures_are_refunded(catalogue, user, limits):
    lost = _submit(user)
    _submit(user)
    # The reaper failed the first one after its workers died: our fault, not the user's.
    Submission.objects.filter(pk=lost.pk).update(
        status=Submission.Status.FAILED, error_code=services.WorkerLost.code
    )
    third = _submit(user)
    assert third.status == Submission.Status.QUEUED
    # An evaluation that failed on the user's side (its kernel crashed) is not refunded.
    Submission.objects.filter(pk=third.pk).update(
        status=Submission.Status.FAILED, error_code="eval:runtime-error"
    )
    with pytest.raises(QuotaExceeded):
        _submit(user)


def test_rejected_uploads_and_cancelled_submissions_are_not_counted(catalogue, user, limits):
    limits(per_hour=2, per_day=3, active=1)
    for _ in range(4):  # format mistakes: refused by the bundle check, nothing evaluated
        bad = services.submission_create(owner=user, upload=_zip_of({"silu_and_mul.py": "x(:"}))
        assert bad.status == Submission.Status.REJECTED
    cancelled = _submit(user)
    Submission.objects.filter(pk=cancelled.pk).update(status=Submission.Status.CANCELLED)
    assert _submit(user).status == Submission.Status.QUEUED  # active limit 1: not the cancelled
    status = quota_status(owner=user)
    windows = {w["name"]: w for w in status["windows"]}
    assert windows["per_hour"] == {
        "name": "per_hour", "limit": 2, "used": 1, "left": 1, "frees_at": None
    }  # fmt: skip
    assert windows["active"]["used"] == 1 and windows["active"]["left"] == 0


def test_quota_status_says_when_a_full_window_frees(catalogue, user, limits):
    first = _submit(user)
    _submit(user)
    windows = {w["name"]: w for w in quota_status(owner=user)["windows"]}
    assert windows["per_hour"]["left"] == 0
    assert windows["per_hour"]["frees_at"] == first.created_at + timedelta(hours=1)
    assert windows["per_day"]["left"] == 1 and windows["per_day"]["frees_at"] is None
    assert quota_status(owner=UserFactory(is_staff=True)) == {"exempt": True, "windows": []}


def test_the_submit_page_and_the_api_show_the_quota_left(client, catalogue, user, limits):
    _submit(user)
    client.force_login(user)
    page = client.get(reverse("submissions:new")).content.decode()
    assert "this hour: 1 of 2 left" in page and "today: 2 of 3 left" in page
    assert "Rejected uploads" in page
    api = APIClient()
    assert api.get("/api/quota/").status_code in (401, 403)
    api.force_authenticate(user)
    body = api.get("/api/quota/").json()
    assert body["exempt"] is False
    assert [(w["name"], w["left"]) for w in body["windows"]] == [
        ("per_hour", 1), ("per_day", 2), ("active", 9)
    ]  # fmt: skip


def test_submissions_waiting_at_once_are_limited(catalogue, user, limits):
    limits(per_hour=0, per_day=0, active=2)
    waiting = _submit(user)
    _submit(user)
    with pytest.raises(QuotaExceeded) as refused:
        _submit(user)
    assert refused.value.code == "quota:active"
    # Once one of them is final, there is room again.
    Submission.objects.filter(pk=waiting.pk).update(status=Submission.Status.PUBLISHED)
    assert _submit(user).status == Submission.Status.QUEUED


def test_staff_are_exempt(catalogue, limits):
    admin = UserFactory(is_staff=True)
    statuses = {_submit(admin).status for _ in range(4)}
    assert statuses == {Submission.Status.QUEUED}


def test_api_answers_429_with_the_reason_and_retry_after(catalogue, user, limits):
    limits(per_hour=1)
    api = APIClient()
    api.force_authenticate(user)
    assert api.post("/api/submissions/", {"bundle": _zip()}, format="multipart").status_code == 201
    response = api.post("/api/submissions/", {"bundle": _zip()}, format="multipart")
    assert response.status_code == 429
    body = response.json()
    assert body["code"] == "quota:per-hour"
    assert "limit is 1 per hour" in body["detail"] and "Try again in" in body["detail"]
    assert 3500 < int(response["Retry-After"]) <= 3600
    assert Submission.objects.filter(owner=user).count() == 1


def test_web_form_answers_429_and_shows_the_reason(client, catalogue, user, limits):
    limits(per_hour=1)
    client.force_login(user)
    url = reverse("submissions:new")
    first = client.post(url, {"bundle": _zip(), "visibility": "public"})
    assert first.status_code == 302
    response = client.post(url, {"bundle": _zip(), "visibility": "public"})
    assert response.status_code == 429
    assert "limit is 1 per hour" in response.content.decode()
    assert int(response["Retry-After"]) > 3500
    assert Submission.objects.filter(owner=user).count() == 1
