"""The submit page as a new researcher meets it, in a real browser: the quota shown and
refunded, check only, the README's example bundle uploaded with the form's defaults (its
operators the suite lacks skipped), a submission on hardware no worker serves shown as
waiting and then cancelled, and a rejected bundle corrected with the same settings."""

from __future__ import annotations

import json
import zipfile

import pytest

from catalogue.models import HardwareProfile
from submissions.models import Submission
from tests.browser.layout import assert_within_width

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def _sign_up(page, live_server) -> None:
    page.goto(f"{live_server.url}/accounts/signup/")
    page.get_by_label("Username").fill("first-timer")
    page.locator("#id_password1").fill("a long pass phrase 42")
    page.get_by_label("Password confirmation").fill("a long pass phrase 42")
    page.get_by_role("button", name="Create account").click()
    page.wait_for_url("**/submissions/new/")


def _assert_the_page_fits_a_phone(page) -> None:
    """At 390 px nothing runs off the screen: not the hardware queues (one block per
    hardware there, what a submission would meet included), not the form's fields."""
    size = page.viewport_size
    page.set_viewport_size({"width": 390, "height": 844})
    page.reload()
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    cells = page.locator("#queues tbody td, #upload-form select, #upload-form input")
    assert cells.count() > 10
    assert_within_width(cells, 390, skip_unboxed=True)
    h100 = page.locator("#queues tbody tr", has_text="NVIDIA H100 SXM")
    assert "no worker for NVIDIA H100 SXM is online" in h100.locator("td.queue-wait").inner_text()
    assert h100.locator("td.queue-wait").is_visible()
    page.set_viewport_size(size)
    page.reload()


def test_check_submit_on_an_unserved_queue_cancel_and_correct_a_rejection(
    close_other_db_sessions_at_the_end,
    page,
    live_server,
    catalogue,
    tmp_path,
    example_zip,
    held_messages,
    settings,
):
    settings.ATREX = {**settings.ATREX, "QUOTA_PER_HOUR": 10, "QUOTA_PER_DAY": 30}
    whole_example = tmp_path / "triton-baseline.zip"  # every file, as the README says
    whole_example.write_bytes(example_zip("triton-baseline").read())
    _sign_up(page, live_server)
    assert "this hour: 10 of 10 left" in page.locator("#quota").inner_text()
    _assert_the_page_fits_a_phone(page)

    # Check only: nothing stored, the skipped files named, the quota untouched.
    page.get_by_label("Kernel bundle").set_input_files(str(whole_example))
    page.get_by_label("Title").fill("My first try")
    page.get_by_role("button", name="Check only").click()
    result = page.locator("#check-result").inner_text()
    assert "It can be submitted: 3 operators would be evaluated" in result
    assert "Skipped 11 kernel files for operators this suite does not have" in result
    assert page.get_by_label("Title").input_value() == "My first try"
    assert Submission.objects.count() == 0

    # Submit with the form's defaults but hardware no worker serves: it waits, and says so.
    h100 = HardwareProfile.objects.get(slug="h100-sxm")
    option = page.locator(f"#id_hardware option[value='{h100.pk}']").inner_text()
    assert option == "NVIDIA H100 SXM (no worker online: a submission waits)"
    page.get_by_label("Kernel bundle").set_input_files(str(whole_example))
    page.get_by_label("Hardware").select_option(str(h100.pk))
    page.get_by_role("button", name="Submit", exact=True).click()
    page.wait_for_url("**/submissions/*/")
    assert page.locator("#status").inner_text() == "Queued"
    assert "no worker for it is online" in page.locator("#queue-note").inner_text()
    assert [name for name, _, _ in held_messages] == ["submissions.evaluate_run"]
    page.goto(f"{live_server.url}/submissions/new/")
    assert "this hour: 9 of 10 left" in page.locator("#quota").inner_text()

    # Cancel: the run stops, the quota is refunded.
    page.go_back()
    page.get_by_role("button", name="Cancel this submission").click()
    page.wait_for_selector("text=Cancelled. It does not count against your quota.")
    assert page.locator("#status").inner_text() == "Cancelled"
    page.goto(f"{live_server.url}/submissions/new/")
    assert "this hour: 10 of 10 left" in page.locator("#quota").inner_text()

    # A bundle of operators the suite does not have is refused; the fix keeps the settings.
    wrong = tmp_path / "wrong.zip"
    with zipfile.ZipFile(wrong, "w") as archive:
        archive.writestr(
            "flash_decoding.py", "import torch\nclass Model(torch.nn.Module):\n    pass\n"
        )
    page.get_by_label("Kernel bundle").set_input_files(str(wrong))
    page.get_by_label("Title").fill("Second try")
    page.get_by_role("button", name="Submit", exact=True).click()
    page.wait_for_url("**/submissions/*/")
    assert page.locator("#error-code").inner_text() == "bundle:unknown-operator"
    page.goto(f"{live_server.url}/submissions/new/")
    assert "this hour: 10 of 10 left" in page.locator("#quota").inner_text()  # not counted
    page.go_back()
    page.locator("#resubmit").click()
    page.wait_for_url("**/submissions/new/?from=*")
    assert page.get_by_label("Title").input_value() == "Second try"
    page.screenshot(path=str(tmp_path / "resubmit.png"), full_page=True)


def test_a_progress_answer_on_its_way_does_not_reload_over_the_cancel(
    close_other_db_sessions_at_the_end, page, live_server, catalogue, held_messages
):
    """The page's progress poll may be answered while the Cancel form is being sent. Its
    answer (now final) must not reload the page: the reload would take the place of the
    form's own answer, and the owner would never see that the cancel was taken. Both
    requests are held here so that the poll's answer comes between them every time."""
    from django.contrib.auth import get_user_model

    from submissions import services
    from tests.submissions.test_checks import MODEL, _zip

    _sign_up(page, live_server)
    owner = get_user_model().objects.get(username="first-timer")
    submission = services.submission_create(owner=owner, upload=_zip({"rms_norm.py": MODEL}))
    assert submission.status == Submission.Status.QUEUED
    polls, posts = [], []
    page.route(f"**/submissions/{submission.pk}/progress.json", lambda r: polls.append(r))
    page.route(f"**/submissions/{submission.pk}/cancel/", lambda r: posts.append(r))
    page.goto(f"{live_server.url}/submissions/{submission.pk}/")
    while not polls:  # the page's first poll, held
        page.wait_for_timeout(50)
    page.get_by_role("button", name="Cancel this submission").click(no_wait_after=True)
    while not posts:  # the form is sent, held
        page.wait_for_timeout(50)
    polls[0].fulfill(
        status=200,
        content_type="application/json",
        body=json.dumps({
            "status": "cancelled", "status_display": "Cancelled", "final": True,
            "shapes_done": 0, "shapes_total": 0, "queue": None, "error_message": "",
        }),
    )  # fmt: skip
    page.wait_for_timeout(300)  # what the poll's answer makes the page do
    posts[0].continue_()
    page.wait_for_selector("text=Cancelled. It does not count against your quota.")
    assert page.locator("#status").inner_text() == "Cancelled"
    submission.refresh_from_db()
    assert submission.status == Submission.Status.CANCELLED
