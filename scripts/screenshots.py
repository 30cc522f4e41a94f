"""Screenshots of the site's pages at desktop and phone width, for reviewers.

    make screenshots                     # or: .venv/bin/python scripts/screenshots.py
    .venv/bin/python scripts/screenshots.py --only submission,board --keep

Builds a throwaway site in a temporary folder (SQLite, the filesystem broker), migrated and
seeded as ``make demo`` seeds it (``seed_suite``, then ``seed_demo``: the example bundles
evaluated on this CPU, the committed H200 results imported), serves it with ``manage.py
runserver``, and photographs every page of ``PAGES`` with Debian's chromium through
Playwright at 1280 and 390 px: ``docs/screenshots/<page>-desktop.png`` and
``<page>-phone.png``, the whole page down to ``MAX_HEIGHT_PX``. It writes
``docs/screenshots/README.md``, an index of them. A page that answers 404 (a page not built
yet) is skipped with a warning; any other failure stops the run. A page wider than the
window (one a phone would scroll sideways) is photographed, with a warning that names the
elements running off it.

``PAGES`` is the one list of pages: a page is one line there.
"""

from __future__ import annotations

import argparse
import datetime
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT_DIR = ROOT / "docs" / "screenshots"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip
WIDTHS = {"desktop": (1280, 900), "phone": (390, 844)}
MAX_HEIGHT_PX = 4000
"""A full-page shot is cut here: the top of a long page is what a reviewer reads, and the
files stay small."""

USER = "atrex-examples"
"""The demo's own account (it owns the example submissions): the signed-in pages show it."""
STAFF = "screenshots-staff"
PASSWORD = "screenshots only, never a real site"  # noqa: S105 (a throwaway database)


@dataclass(frozen=True)
class Page:
    name: str
    path: str
    """A path; ``{submission}`` and ``{other}`` are filled with demo submissions' ids."""
    login: str | None = None
    """``"user"`` or ``"staff"``: signed in as that account; None: anonymous."""
    title: str = ""
    optional: bool = False
    """A page not every checkout has yet: its path need not resolve (a 404 is skipped with
    a warning whatever this says)."""


PAGES: list[Page] = [
    Page("board", "/", title="The leaderboard (default suite and hardware)"),
    Page("board-h200", "/?suite=atrex-bench-v1&hardware=h200-sxm", title="The H200 board of v1"),
    Page("about", "/about/scores/", title="About the scores"),
    Page("history", "/history/", title="History of the best score"),
    Page("operator", "/operators/rms_norm/?suite=atrex-bench-v1&hardware=h200-sxm",
         title="An operator's page"),
    Page("submission", "/submissions/{submission}/", title="A submission (H200, v1)"),
    Page("submission-filtered", "/submissions/{submission}/?status=pass#shapes",
         title="A submission's shapes filtered by status"),
    Page("compare", "/compare/?submissions={submission},{other}", title="Two submissions compared"),
    Page("login", "/accounts/login/", title="Log in"),
    Page("submit", "/submissions/new/", login="user", title="The upload form"),
    Page("my-submissions", "/submissions/mine/", login="user", title="My submissions"),
    Page("agents", "/agents/", login="user", title="Agent endpoints"),
    Page("api-tokens", "/accounts/tokens/", login="user", title="API tokens"),
    Page("admin", "/admin/", login="staff", title="The admin's index"),
    Page("admin-submissions", "/admin/submissions/submission/", login="staff",
         title="Curation: submissions in the admin"),
    Page("fleet", "/staff/fleet/", login="staff", title="The worker fleet"),
]  # fmt: skip

# The demo rows the pages show: (title, suite, hardware) of seed_demo's imported results.
SUBMISSION = ("Triton baseline (14 memory-bound operators), H200", "atrex-bench-v1", "h200-sxm")
OTHER = ("PyTorch eager, idiomatic (evaluator/baselines), H200", "atrex-bench-v1", "h200-sxm")


def say(message: str) -> None:
    print(message, flush=True)


def site_environment(folder: Path) -> dict[str, str]:
    """The throwaway site's settings: everything under ``folder``, nothing shared."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("DJANGO_", "DATABASE_", "ATREX_", "CELERY_"))
    }
    env.update(
        DJANGO_SETTINGS_MODULE="atrex_site.settings.local",
        DJANGO_DEBUG="false",
        ATREX_VAR_DIR=str(folder),
        DATABASE_URL=f"sqlite:///{folder / 'site.sqlite3'}",
        CELERY_BROKER_URL="filesystem://",
        ATREX_PUBLIC_PAGE_CACHE_S="0",
        PYTHONUNBUFFERED="1",
    )
    return env


def manage(env: dict[str, str], *args: str) -> str:
    started = time.monotonic()
    finished = subprocess.run(  # noqa: S603
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if finished.returncode != 0:
        sys.exit(f"manage.py {' '.join(args)} failed:\n{finished.stdout}\n{finished.stderr}")
    say(f"manage.py {args[0]}: {time.monotonic() - started:.0f} s")
    return finished.stdout


ACCOUNTS_AND_IDS = f"""
from django.contrib.auth import get_user_model
from submissions.models import Submission
User = get_user_model()
user, _ = User.objects.get_or_create(username={USER!r})
user.set_password({PASSWORD!r}); user.save()
staff, _ = User.objects.get_or_create(username={STAFF!r})
staff.is_staff = staff.is_superuser = True
staff.set_password({PASSWORD!r}); staff.save()
def pick(title, suite, hardware):
    name, version = suite.rsplit("-", 1)
    row = (Submission.objects.filter(title=title, suite_version__name=name,
           suite_version__version=version, hardware__slug=hardware).order_by("-pk").first())
    row = row or Submission.objects.filter(status="published").order_by("-pk").first()
    return row.pk if row else 0
print("ids", pick(*{SUBMISSION!r}), pick(*{OTHER!r}))
"""


def build_site(folder: Path, *, seed: bool = True) -> tuple[dict[str, str], dict[str, int]]:
    """Migrate and seed the site in ``folder`` (``seed=False``: a site built before, kept
    with ``--keep``), then make its two accounts; returns its settings and the ids the
    paths name."""
    env = site_environment(folder)
    if seed:
        manage(env, "migrate", "--noinput")
        manage(env, "seed_suite")
        manage(env, "seed_demo")
    output = manage(env, "shell", "-c", ACCOUNTS_AND_IDS)
    line = next(line for line in output.splitlines() if line.startswith("ids "))
    submission, other = (int(value) for value in line.split()[1:])
    return env, {"submission": submission, "other": other}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def serve(env: dict[str, str], port: int) -> subprocess.Popen:
    server = subprocess.Popen(  # noqa: S603
        [sys.executable, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/accounts/login/", timeout=5)  # noqa: S310
            return server
        except (urllib.error.URLError, ConnectionError):
            time.sleep(0.5)
    server.terminate()
    sys.exit("the site did not answer within 60 s")


def fill(path: str, ids: dict[str, int]) -> str:
    return path.format(**ids)


def log_in(context, base: str, username: str) -> None:
    page = context.new_page()
    page.goto(f"{base}/accounts/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", PASSWORD)
    page.locator("form button[type=submit], form input[type=submit]").last.click()
    page.wait_for_load_state("networkidle")
    if "/accounts/login/" in page.url:
        sys.exit(f"could not sign in as {username}")
    page.close()


OFF_SCREEN = """() => {
  const width = document.documentElement.clientWidth;
  if (document.documentElement.scrollWidth <= width) return [];
  const out = [];
  for (const e of document.querySelectorAll("body *")) {
    const r = e.getBoundingClientRect();
    if (r.width === 0 || r.right <= width + 1) continue;
    if ([...e.children].some(c => c.getBoundingClientRect().right > width + 1)) continue;
    const name = e.tagName.toLowerCase() + (e.id ? "#" + e.id : "")
      + (e.classList.length ? "." + [...e.classList].join(".") : "");
    out.push(`${name} to ${Math.round(r.right)} px`);
    if (out.length === 5) break;
  }
  return out;
}"""
"""Where the page is wider than the window: up to five of the innermost elements that run off
its right edge (a page a phone would have to scroll sideways)."""


def photograph(context, url: str, out: Path) -> int | None:
    """Save ``url`` as ``out``; returns the HTTP status, or None when it answered 404."""
    page = context.new_page()
    response = page.goto(url, wait_until="networkidle")
    status = response.status if response else 0
    if status == 404:
        page.close()
        return None
    if status >= 400:
        sys.exit(f"{url} answered {status}")
    if page.locator(".chart").count():
        # Plotly draws after the load; give each chart its time.
        page.wait_for_selector(".chart .main-svg", timeout=15_000)
    height = page.evaluate("document.documentElement.scrollHeight")
    width = page.viewport_size["width"]
    wider = page.evaluate(OFF_SCREEN)
    if wider:
        say(f"warning: {url} at {width} px: runs off the screen: {'; '.join(wider)}")
    page.screenshot(
        path=str(out),
        full_page=True,
        clip={"x": 0, "y": 0, "width": width, "height": min(height, MAX_HEIGHT_PX)},
    )
    page.close()
    return status


def take(pages: list[Page], base: str, ids: dict[str, int]) -> list[tuple[Page, str]]:
    from playwright.sync_api import sync_playwright

    OUT_DIR.mkdir(parents=True, exist_ok=True)
    taken: list[tuple[Page, str]] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
        )
        for width_name, (width, height) in WIDTHS.items():
            contexts = {}
            for login in (None, "user", "staff"):
                context = browser.new_context(viewport={"width": width, "height": height})
                if login:
                    log_in(context, base, USER if login == "user" else STAFF)
                contexts[login] = context
            for page in pages:
                url = base + fill(page.path, ids)
                out = OUT_DIR / f"{page.name}-{width_name}.png"
                status = photograph(contexts[page.login], url, out)
                if status is None:
                    say(f"warning: {page.name}: {fill(page.path, ids)} answered 404, skipped")
                    continue
                say(f"{out.relative_to(ROOT)}: {out.stat().st_size // 1024} KiB")
                if width_name == "desktop":
                    taken.append((page, fill(page.path, ids)))
            for context in contexts.values():
                context.close()
        browser.close()
    return taken


def write_index(taken: list[tuple[Page, str]], out_dir: Path = OUT_DIR) -> None:
    lines = [
        "# Screenshots",
        "",
        f"Every page at 1280 px (desktop) and 390 px (phone), the top {MAX_HEIGHT_PX} px of",
        "each, taken by `make screenshots` (`scripts/screenshots.py`) from a site seeded as",
        "`make demo` seeds it. Signed-in pages are seen as the demo account"
        f" (`{USER}`); admin pages as a staff account.",
        f"Taken {datetime.date.today().isoformat()}. A page that answered 404 (not built on that",
        "checkout) is left out; `PAGES` in the script lists the pages.",
        "",
        "| Page | Path | Desktop | Phone |",
        "| --- | --- | --- | --- |",
    ]
    for page, path in taken:
        who = {"user": " (signed in)", "staff": " (staff)"}.get(page.login or "", "")
        lines.append(
            f"| {page.title or page.name}{who} | `{path}` | "
            f"[desktop]({page.name}-desktop.png) | [phone]({page.name}-phone.png) |"
        )
    (out_dir / "README.md").write_text("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default="", help="comma-separated page names (default: all)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary site's folder")
    parser.add_argument("--port", type=int, default=0, help="the site's port (default: any free)")
    parser.add_argument(
        "--site", type=Path, help="a site folder kept by an earlier --keep run: no seeding"
    )
    options = parser.parse_args(argv)
    pages = PAGES
    if options.only:
        wanted = set(options.only.split(","))
        unknown = wanted - {page.name for page in PAGES}
        if unknown:
            parser.error(f"no page named {', '.join(sorted(unknown))}: see PAGES")
        pages = [page for page in PAGES if page.name in wanted]
    if not os.path.exists(CHROMIUM):
        sys.exit("Debian's chromium is missing: `make browser` installs it")
    folder = options.site or Path(tempfile.mkdtemp(prefix="atrex-screenshots-"))
    server = None
    try:
        env, ids = build_site(folder, seed=options.site is None)
        port = options.port or free_port()
        server = serve(env, port)
        taken = take(pages, f"http://127.0.0.1:{port}", ids)
        if not options.only:
            write_index(taken)
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=20)
        if options.keep or options.site:
            say(f"the site's folder is kept: {folder}")
        else:
            shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
