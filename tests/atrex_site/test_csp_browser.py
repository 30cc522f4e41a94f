"""The Content-Security-Policy in a real browser: the pages, the charts (plotly) and the
API docs (Swagger UI, Redoc) work under it, and the browser reports no violation."""

from __future__ import annotations

import os
import shutil

import pytest

from tests.leaderboard.results_factory import publish_row

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip


@pytest.fixture
def browser_page():
    """A chromium page and the CSP violations it reports (console and events)."""
    playwright_api = pytest.importorskip("playwright.sync_api")
    if not os.path.exists(CHROMIUM):
        pytest.fail("Debian's chromium is missing: `make test` installs it")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    with playwright_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
        )
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        page = context.new_page()
        page.set_default_timeout(20_000)
        violations: list[str] = []
        page.on(
            "console",
            lambda message: (
                violations.append(message.text)
                if "Content Security Policy" in message.text
                else None
            ),
        )
        yield page, violations
        context.close()
        browser.close()


def test_pages_charts_and_api_docs_work_under_the_policy(
    close_other_db_sessions_at_the_end, browser_page, live_server, catalogue, user
):
    page, violations = browser_page
    row = publish_row(
        owner=user,
        suite=catalogue,
        title="csp kernels",
        fraction={"rms_norm": 0.5, "silu_and_mul": 0.4, "fused_add_rms_norm": 0.3},
    )
    page.goto(f"{live_server.url}/?suite=atrex-bench-v0.1&hardware=cpu-dev")
    assert page.locator("#ranked").inner_text().count("csp kernels") == 1
    page.goto(f"{live_server.url}/submissions/{row.pk}/")
    page.wait_for_selector("#roofline-chart .main-svg")
    page.goto(f"{live_server.url}/history/?suite=atrex-bench-v0.1&hardware=cpu-dev")
    page.goto(f"{live_server.url}/api/docs/")
    page.wait_for_selector(".swagger-ui .opblock")
    assert page.locator(".swagger-ui .opblock").count() >= 10
    page.goto(f"{live_server.url}/api/redoc/")
    page.wait_for_selector("text=Atrex-Bench Portal API")
    # The admin, as staff, through its own log-in form.
    user.is_staff = user.is_superuser = True
    user.save()
    page.goto(f"{live_server.url}/admin/login/")
    page.fill("#id_username", user.username)
    page.fill("#id_password", "correct horse battery staple")
    page.click("input[type=submit]")
    page.goto(f"{live_server.url}/admin/submissions/submission/{row.pk}/change/")
    page.wait_for_selector("#submission_form")
    page.goto(f"{live_server.url}/accounts/login/")
    # Redoc's footer logo comes from Redocly's CDN: blocked, as every third-party load is.
    violations = [text for text in violations if "cdn.redoc.ly" not in text]
    assert not violations, violations
