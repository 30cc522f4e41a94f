"""Admin curation: every action changes what it should, is logged with who and why, and
hidden or hacked submissions never rank (pages and API share the ranking query)."""

from __future__ import annotations

import pytest
from django.urls import reverse

from catalogue.models import HardwareProfile
from leaderboard.selectors import leaderboard_rows
from submissions import curation, services
from submissions.models import CurationLog, EvaluationRun, Score, Submission
from tests.factories import UserFactory
from tests.leaderboard.results_factory import publish_row

pytestmark = pytest.mark.django_db

Action = CurationLog.Action


@pytest.fixture
def admin_user(db):
    return UserFactory(is_staff=True, is_superuser=True)


def _board(catalogue) -> list[int]:
    cpu = HardwareProfile.objects.get(slug="cpu-dev")
    return [row.submission_id for row in leaderboard_rows(suite=catalogue, hardware=cpu)]


def test_hidden_and_hacked_submissions_never_rank(catalogue, user, admin_user, client):
    best = publish_row(owner=user, suite=catalogue, title="best", fraction=0.9)
    middle = publish_row(owner=user, suite=catalogue, title="middle", fraction=0.5)
    last = publish_row(owner=user, suite=catalogue, title="last", fraction=0.1)
    assert _board(catalogue) == [best.pk, middle.pk, last.pk]

    curation.submission_flag_set(
        submission=best, actor=admin_user, action=Action.MARK_HACKED, reason="timing exploit"
    )
    curation.submission_flag_set(
        submission=last, actor=admin_user, action=Action.HIDE, reason="duplicate upload"
    )
    assert _board(catalogue) == [middle.pk]
    api = client.get(reverse("api:leaderboard"), {"suite": catalogue.slug, "hardware": "cpu-dev"})
    assert [row["submission"] for row in api.json()["results"]] == [middle.pk]
    page = client.get(
        reverse("leaderboard:board"), {"suite": catalogue.slug, "hardware": "cpu-dev"}
    )
    assert "middle" in page.content.decode() and ">best<" not in page.content.decode()

    # A hidden submission's page is gone for the public, kept for its owner.
    assert client.get(reverse("submissions:detail", args=[last.pk])).status_code == 404
    client.force_login(user)
    assert client.get(reverse("submissions:detail", args=[last.pk])).status_code == 200

    curation.submission_flag_set(
        submission=last, actor=admin_user, action=Action.UNHIDE, reason="not a duplicate"
    )
    curation.submission_flag_set(
        submission=best, actor=admin_user, action=Action.CLEAR_HACKED, reason="false alarm"
    )
    assert _board(catalogue) == [best.pk, middle.pk, last.pk]


def test_each_action_is_logged_with_actor_and_reason(catalogue, user, admin_user):
    row = publish_row(owner=user, suite=catalogue, title="row")
    curation.submission_flag_set(
        submission=row, actor=admin_user, action=Action.VERIFY, reason="kernels read"
    )
    row.refresh_from_db()
    assert row.verified
    log = list(row.curation_log.values_list("actor__username", "action", "reason"))
    assert log == [(admin_user.username, "verify", "kernels read")]


def test_a_repeated_flag_or_a_missing_reason_is_refused(catalogue, user, admin_user):
    row = publish_row(owner=user, suite=catalogue)
    with pytest.raises(curation.CurationRefused, match="Say why"):
        curation.submission_flag_set(
            submission=row, actor=admin_user, action=Action.HIDE, reason="  "
        )
    curation.submission_flag_set(submission=row, actor=admin_user, action=Action.HIDE, reason="x")
    with pytest.raises(curation.CurationRefused, match="already hidden"):
        curation.submission_flag_set(
            submission=row, actor=admin_user, action=Action.HIDE, reason="y"
        )
    assert row.curation_log.count() == 1


def test_held_results_are_released_onto_the_board_with_their_stored_scores(
    catalogue, user, admin_user
):
    held = publish_row(owner=user, suite=catalogue, title="too fast", fraction=1.5)
    assert held.status == Submission.Status.HELD_FOR_REVIEW
    assert not Score.objects.filter(submission=held).exists()

    curation.submission_release(submission=held, actor=admin_user, reason="new GPU clocks")
    held.refresh_from_db()
    assert held.status == Submission.Status.PUBLISHED
    run = held.runs.get()
    assert held.score.run == run
    assert held.score.aggregate == pytest.approx(run.results["scores"]["aggregate"])
    assert held.score.operator_scores["rms_norm"] == pytest.approx(1.5)
    assert _board(catalogue) == [held.pk]
    assert held.history.last().note == "released by an admin: new GPU clocks"
    assert held.curation_log.get().action == Action.RELEASE
    with pytest.raises(curation.CurationRefused, match="not held"):
        curation.submission_release(submission=held, actor=admin_user, reason="again")


def test_held_results_can_be_rejected_and_the_owner_sees_why(catalogue, user, admin_user):
    held = publish_row(owner=user, suite=catalogue, fraction=2.0)
    curation.submission_reject_held(submission=held, actor=admin_user, reason="reads a cache")
    held.refresh_from_db()
    assert held.status == Submission.Status.REJECTED
    assert (held.error_code, held.error_message) == ("review:rejected", "reads a cache")
    assert not Score.objects.filter(submission=held).exists()
    assert held.curation_log.get().action == Action.REJECT


def test_rerun_queues_a_new_run_and_dispatches_it(
    catalogue, user, admin_user, example_zip, django_capture_on_commit_callbacks
):
    submission = services.submission_create(
        owner=user, upload=example_zip("triton-baseline", only=["rms_norm.py"])
    )
    assert submission.status == Submission.Status.QUEUED
    with pytest.raises(curation.CurationRefused, match="only published or failed"):
        curation.submission_rerun(submission=submission, actor=admin_user, reason="x")
    services.submission_transition(
        submission=submission, from_status="queued", to_status="failed", note="worker lost"
    )
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        run = curation.submission_rerun(
            submission=submission, actor=admin_user, reason="harness 0.3 fixes timing"
        )
    submission.refresh_from_db()
    assert submission.status == Submission.Status.QUEUED
    assert run.attempt == 2 and run.status == EvaluationRun.Status.QUEUED
    assert len(callbacks) == 1  # evaluation_run_dispatch, sent once the row is committed
    assert submission.curation_log.get().action == Action.RERUN


def test_imported_results_cannot_be_rerun(catalogue, user, admin_user):
    row = publish_row(owner=user, suite=catalogue)
    with pytest.raises(curation.CurationRefused, match="no upload"):
        curation.submission_rerun(submission=row, actor=admin_user, reason="x")
    assert row.runs.count() == 1


def test_admin_action_asks_for_a_reason_then_applies_and_logs_it(
    catalogue, user, admin_user, client
):
    row = publish_row(owner=user, suite=catalogue, title="row")
    client.force_login(admin_user)
    url = reverse("admin:submissions_submission_changelist")
    chosen = {"action": "curate_mark_hacked", "_selected_action": [row.pk]}
    ask = client.post(url, chosen)
    assert ask.status_code == 200 and "give a reason" in ask.content.decode()
    row.refresh_from_db()
    assert not row.hacked
    done = client.post(url, {**chosen, "apply": "1", "reason": "patched the timer"})
    assert done.status_code == 302
    row.refresh_from_db()
    assert row.hacked
    log = row.curation_log.get()
    assert (log.actor, log.reason) == (admin_user, "patched the timer")
    page = client.get(reverse("submissions:detail", args=[row.pk])).content.decode()
    assert "patched the timer" in page and "Marked hacked" in page


@pytest.mark.parametrize("action", list(curation.FLAG_ACTIONS))
def test_every_flag_action_sets_its_flag_and_is_logged(catalogue, user, admin_user, action):
    row = publish_row(owner=user, suite=catalogue)
    field, value = curation.FLAG_ACTIONS[action]
    if not value:  # the "undo" actions need the flag set first
        Submission.objects.filter(pk=row.pk).update(**{field: True})
        row.refresh_from_db()
    curation.curation_apply(submission=row, actor=admin_user, action=action, reason="because")
    row.refresh_from_db()
    assert getattr(row, field) is value
    assert list(row.curation_log.values_list("action", flat=True)) == [action]


def test_admin_action_without_a_reason_changes_nothing(catalogue, user, admin_user, client):
    row = publish_row(owner=user, suite=catalogue)
    client.force_login(admin_user)
    response = client.post(
        reverse("admin:submissions_submission_changelist"),
        {"action": "curate_hide", "_selected_action": [row.pk], "apply": "1", "reason": ""},
    )
    assert response.status_code == 200 and "This field is required" in response.content.decode()
    row.refresh_from_db()
    assert not row.hidden and not row.curation_log.exists()
