"""Private stays private: every route of the site, asked by an anonymous visitor, another
researcher, the owner and staff, about a private submission.

The route list is read from the URL configuration, so a route added without a rule here
fails ``test_every_route_has_an_access_rule``; each rule says what each role may get, and
for everyone but the owner and staff no answer may contain anything of the private
submission (its title, its log, its upload)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from django.core.files.base import ContentFile
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, reverse

from accounts.services import api_token_create
from catalogue.models import HardwareProfile, Shape, SuiteOperator
from submissions.models import Submission
from submissions.result_import import submission_import_results
from tests.api.conftest import results_for
from tests.factories import UserFactory

SECRET_TITLE = "Secret-Kernels-7f3a"
SECRET_LOG = "secret-log-line-91c2"
SECRET_UPLOAD = b"secret-upload-bytes-0d4e"
PUBLIC_TITLE = "Open-Kernels-22b8"
ROLES = ("anon", "other", "owner", "staff")
OUTSIDERS = ("anon", "other")


@dataclass(frozen=True)
class Rule:
    """What each role gets from one route. ``status``: role -> allowed status codes (a role
    left out: any code below 500). ``shows_secret``: roles whose answer must contain the
    private submission (lists that include it for them)."""

    status: dict[str, set[int]] = field(default_factory=dict)
    shows_secret: frozenset[str] = frozenset()
    # Path arguments, from the test's objects (see ``_kwargs``).
    args: tuple[str, ...] = ()
    skip: str = ""


LOGIN = {302}
# A route about the private submission: outsiders must not learn it exists.
PRIVATE = Rule(
    status={"anon": {404}, "other": {404}, "owner": {200}, "staff": {200}}, args=("secret",)
)
# The same behind @login_required (anonymous visitors are sent to log in first).
PRIVATE_LOGIN = Rule(
    status={"anon": LOGIN, "other": {404}, "owner": {200}, "staff": {200}}, args=("secret",)
)
PUBLIC_LIST = Rule(status={role: {200} for role in ROLES})
STAFF_ONLY_API = {"anon": {401, 403}, "other": {403}}
STAFF_ONLY_PAGE = {"anon": LOGIN | {403}, "other": LOGIN | {403}}
LOGGED_IN = {"anon": LOGIN}

RULES: dict[str, Rule] = {
    # The board and what is computed from it: public rows only, whoever asks.
    "leaderboard:board": PUBLIC_LIST,
    "leaderboard:board-download": Rule(status={r: {200} for r in ROLES}, args=("fmt",)),
    "leaderboard:operator": Rule(status={r: {200} for r in ROLES}, args=("operator",)),
    "leaderboard:history": PUBLIC_LIST,
    # The compare form lists the default board's rows and, to its owner only, their own.
    "leaderboard:compare": Rule(
        status={r: {200} for r in ROLES}, shows_secret=frozenset({"owner"})
    ),
    "leaderboard:suite-definition": Rule(status={r: {200} for r in ROLES}, args=("suite",)),
    "leaderboard:plotly-js": Rule(skip="a static file of the plotly package (no user data)"),
    "leaderboard:about-scores": Rule(
        skip="a fixed page: the release's figures scored by the scoring code (no user data)"
    ),
    "favicon": Rule(skip="a redirect to the static icon (no user data)"),
    # The submission's own routes.
    "submissions:new": Rule(status=LOGGED_IN),
    "submissions:mine": Rule(status=LOGGED_IN, shows_secret=frozenset({"owner"})),
    "submissions:detail": PRIVATE,
    "submissions:progress": PRIVATE,
    # POST only (a GET is 405 for anyone logged in, so it reveals nothing).
    "submissions:cancel": Rule(
        status={"anon": LOGIN, "other": {405}, "owner": {405}, "staff": {405}}, args=("secret",)
    ),
    "submissions:download": PRIVATE_LOGIN,
    "submissions:results-download": Rule(status=PRIVATE.status, args=("secret", "fmt")),
    # The REST API.
    "api:leaderboard": PUBLIC_LIST,
    "api:compare": Rule(status={r: {400} for r in ROLES}),
    "api:suites": PUBLIC_LIST,
    "api:suite": Rule(args=("suite",)),
    "api:suite-shapes": Rule(args=("suite",)),
    "api:hardware-list": PUBLIC_LIST,
    "api:hardware": Rule(args=("hardware",)),
    "api:submissions": Rule(
        status={r: {200} for r in ROLES}, shows_secret=frozenset({"owner", "staff"})
    ),
    "api:submission": PRIVATE,
    "api:submission-progress": PRIVATE,
    "api:submission-shapes": PRIVATE,
    "api:tokens": Rule(status={"anon": {401}, "other": {200}, "owner": {200}, "staff": {200}}),
    "api:submissions-check": Rule(status={"anon": {401, 405}}),
    "api:queues": PUBLIC_LIST,
    "api:submission-cancel": Rule(
        status={"anon": {401}, "other": {405}, "owner": {405}, "staff": {405}}, args=("secret",)
    ),
    "api:quota": Rule(status={"anon": {401}, "other": {200}, "owner": {200}, "staff": {200}}),
    "api:token": Rule(status={"anon": {401}}, args=("token",)),
    "api:schema": PUBLIC_LIST,
    "api:docs": PUBLIC_LIST,
    "api:redoc": PUBLIC_LIST,
    # Staff curation API.
    **{
        f"catalogue:{name}": Rule(status=STAFF_ONLY_API, args=args)
        for name, args in [
            ("staff-suite-versions", ()),
            ("staff-suite-version", ("version",)),
            ("staff-suite-version-draft", ("version",)),
            ("staff-suite-version-diff", ("version",)),
            ("staff-suite-version-publish", ("version",)),
            ("staff-suite-version-shapes", ("version",)),
            ("staff-suite-version-upload", ("version",)),
            ("staff-shape", ("shape",)),
            ("staff-suite-operator", ("suite_operator",)),
            ("staff-hardware", ("hardware",)),
        ]
    },
    # Accounts.
    "signup": Rule(),
    "login": Rule(),
    "logout": Rule(),
    "accounts:tokens": Rule(status=LOGGED_IN),
    "accounts:token-revoke": Rule(status=LOGGED_IN, args=("token",)),
    "password_change": Rule(status=LOGGED_IN),
    "password_change_done": Rule(status=LOGGED_IN),
    "password_reset": Rule(),
    "password_reset_done": Rule(),
    "password_reset_confirm": Rule(args=("uidb64", "reset_token")),
    "password_reset_complete": Rule(),
    # Agent endpoints: their owner's pages (tests/agents cover the objects themselves).
    "agents:list": Rule(status=LOGGED_IN),
    "agents:new": Rule(status=LOGGED_IN),
    "agents:detail": Rule(status={"anon": LOGIN, "other": {404, 405}}, args=("secret",)),
    "agents:test": Rule(status={"anon": LOGIN, "other": {404, 405}}, args=("secret",)),
    "agents:rotate": Rule(status={"anon": LOGIN, "other": {404, 405}}, args=("secret",)),
    "agents:campaign": Rule(status={"anon": LOGIN, "other": {404, 405}}, args=("secret",)),
    # The worker fleet: staff only.
    "fleet:status": Rule(status=STAFF_ONLY_PAGE),
    "fleet:status-json": Rule(status=STAFF_ONLY_PAGE),
}


def _routes(patterns, namespace: str = "") -> Iterator[tuple[str, str]]:
    for entry in patterns:
        if isinstance(entry, URLResolver):
            if entry.app_name == "admin":
                continue  # Django's admin: test_the_admin_is_for_staff_only
            inner = f"{namespace}{entry.namespace}:" if entry.namespace else namespace
            yield from _routes(entry.url_patterns, inner)
        elif isinstance(entry, URLPattern):
            yield f"{namespace}{entry.name}", str(entry.pattern)


ROUTE_NAMES = sorted({name for name, _ in _routes(get_resolver().url_patterns)})


def test_every_route_has_an_access_rule():
    missing = [name for name in ROUTE_NAMES if name not in RULES]
    assert not missing, (
        f"routes without an access rule in tests/test_access.py: {missing}; say who may see "
        "them (and make sure private submissions stay out of them)"
    )


@pytest.fixture
def world(catalogue, django_user_model):
    """The owner's private, published submission (with an upload and a log) at the top of
    the default board if it leaked, a public one below it, and the four roles."""
    owner = UserFactory(username="owner")
    cpu = HardwareProfile.objects.get(slug="cpu-dev")

    def published(title: str, fraction: float, visibility: str) -> Submission:
        submission = submission_import_results(
            owner=owner,
            report=results_for(catalogue, fraction=fraction),
            suite_version=catalogue,
            hardware=cpu,
            title=title,
            provenance_note="test",
            is_baseline=False,
        )
        Submission.objects.filter(pk=submission.pk).update(visibility=visibility)
        submission.refresh_from_db()
        return submission

    secret = published(SECRET_TITLE, 0.9, Submission.Visibility.PRIVATE)
    secret.upload.save("secret.zip", ContentFile(SECRET_UPLOAD))
    secret.upload_name = "secret.zip"
    secret.save(update_fields=["upload", "upload_name"])
    secret.runs.update(log_tail=SECRET_LOG)
    published(PUBLIC_TITLE, 0.1, Submission.Visibility.PUBLIC)
    users = {
        "other": UserFactory(username="other"),
        "owner": owner,
        "staff": UserFactory(username="staffer", is_staff=True),
    }
    shape = Shape.objects.filter(suite_version=catalogue).first()
    return {
        "users": users,
        "kwargs": {
            "secret": {"pk": secret.pk},
            "fmt": {"fmt": "json"},
            "operator": {"slug": "rms_norm"},
            "suite": {"slug": catalogue.slug},
            "hardware": {"slug": "cpu-dev"},
            "version": {"pk": catalogue.pk},
            "shape": {"pk": shape.pk},
            "suite_operator": {"pk": SuiteOperator.objects.filter(suite_version=catalogue)[0].pk},
            "token": {"pk": api_token_create(user=owner, name="owner's").token.pk},
            "uidb64": {"uidb64": "MQ"},
            "reset_token": {"token": "set-password"},
        },
    }


def _client(world, role: str) -> Client:
    client = Client()
    if role != "anon":
        client.force_login(world["users"][role])
    return client


def _body(response) -> bytes:
    if getattr(response, "streaming", False):
        return b"".join(response.streaming_content)
    return response.content


@pytest.mark.django_db
@pytest.mark.parametrize("name", [n for n in ROUTE_NAMES if n in RULES and not RULES[n].skip])
def test_route_keeps_private_submissions_private(world, name):
    rule = RULES[name]
    kwargs: dict = {}
    for arg in rule.args:
        kwargs.update(world["kwargs"][arg])
    url = reverse(name, kwargs=kwargs)
    seen = {}
    for role in ROLES:
        response = _client(world, role).get(url)
        body = _body(response)
        allowed = rule.status.get(role)
        assert response.status_code < 500, f"{role} GET {url}: {response.status_code}"
        if allowed is not None:
            assert response.status_code in allowed, (
                f"{role} GET {url}: {response.status_code}, expected {sorted(allowed)}"
            )
        secret_shown = any(
            marker in body for marker in (SECRET_TITLE.encode(), SECRET_LOG.encode(), SECRET_UPLOAD)
        )
        if role in OUTSIDERS:
            assert not secret_shown, f"{role} GET {url} shows the private submission"
        if role in rule.shows_secret:
            assert secret_shown, f"{role} GET {url} should list the private submission"
        seen[role] = response.status_code
    # A public list that shows nothing at all would pass the checks above: make sure the
    # public submission is there where the rule lists the private one to its owner.
    if rule.shows_secret and seen["anon"] == 200 and name.startswith("api:"):
        assert PUBLIC_TITLE.encode() in _body(_client(world, "anon").get(url))


@pytest.mark.django_db
@pytest.mark.parametrize("name", ["leaderboard:board", "leaderboard:history", "api:leaderboard"])
def test_public_boards_do_show_public_rows(world, name):
    """The same pages do list a public submission (so the checks above can fail)."""
    response = Client().get(reverse(name))
    assert PUBLIC_TITLE.encode() in _body(response)


@pytest.mark.django_db
def test_private_files_and_logs_reach_owner_and_staff_only(world):
    pk = world["kwargs"]["secret"]["pk"]
    for role in ("owner", "staff"):
        client = _client(world, role)
        assert _body(client.get(reverse("submissions:download", args=[pk]))) == SECRET_UPLOAD
        assert SECRET_LOG.encode() in client.get(reverse("submissions:detail", args=[pk])).content


@pytest.mark.django_db
def test_a_token_sees_what_its_user_sees(world):
    pk = world["kwargs"]["secret"]["pk"]
    for role, expected in [("other", 404), ("owner", 200)]:
        secret = api_token_create(user=world["users"][role], name="access").secret
        client = Client(HTTP_AUTHORIZATION=f"Token {secret}")
        assert client.get(reverse("api:submission", args=[pk])).status_code == expected
        listed = client.get(reverse("api:submissions")).json()["results"]
        assert (pk in [row["id"] for row in listed]) == (expected == 200)


@pytest.mark.django_db
def test_a_hidden_public_submission_is_treated_like_a_private_one(world):
    public = Submission.objects.get(title=PUBLIC_TITLE)
    Submission.objects.filter(pk=public.pk).update(hidden=True)
    for name in ("leaderboard:board", "api:leaderboard", "api:submissions"):
        assert PUBLIC_TITLE.encode() not in _body(Client().get(reverse(name)))
    detail = reverse("submissions:detail", args=[public.pk])
    assert Client().get(detail).status_code == 404
    assert _client(world, "owner").get(detail).status_code == 200


@pytest.mark.django_db
def test_the_admin_is_for_staff_only(world):
    index = reverse("admin:index")
    changelist = reverse("admin:submissions_submission_changelist")
    for role in ("anon", "other", "owner"):
        response = _client(world, role).get(changelist)
        assert response.status_code == 302 and "/admin/login/" in response["Location"], role
    staff = _client(world, "staff")
    # Staff without model permissions get the index but not the submissions.
    assert staff.get(index).status_code == 200
    assert staff.get(changelist).status_code == 403
    world["users"]["staff"].is_superuser = True
    world["users"]["staff"].save()
    response = staff.get(changelist)
    assert response.status_code == 200 and SECRET_TITLE.encode() in response.content


@pytest.mark.django_db
def test_hidden_shapes_rows_are_shown_to_staff_only(world):
    """Hidden shapes are scored but never shown: their per-shape rows stay out of the page,
    the downloads and the API for everyone but staff (the owner included)."""
    public = Submission.objects.get(title=PUBLIC_TITLE)
    run = public.runs.get()
    hidden = run.shape_results.order_by("pk").first()
    Shape.objects.filter(
        suite_version=public.suite_version, operator__slug=hidden.operator, shape_id=hidden.shape_id
    ).update(visibility=Shape.Visibility.HIDDEN)
    total = run.shape_results.count()
    for role in ("anon", "other", "owner", "staff"):
        client = _client(world, role)
        csv_rows = _body(
            client.get(reverse("submissions:results-download", args=[public.pk, "csv"]))
        )
        json_rows = client.get(reverse("submissions:results-download", args=[public.pk, "json"]))
        api_rows = client.get(reverse("api:submission-shapes", args=[public.pk])).json()
        expected = total if role == "staff" else total - 1
        assert len(csv_rows.decode().strip().splitlines()) - 1 == expected, role
        assert len(json_rows.json()["shapes"]) == expected, role
        assert api_rows["count"] == expected, role
