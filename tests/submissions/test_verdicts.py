"""The site honours the harness's verdicts (docs/decisions.md 12): a sign of deception on
any shape holds the whole submission until staff release it, a wrong answer on any shape
zeroes its operator, and nothing on the site reads a message's words to decide."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from django.urls import reverse

from catalogue.models import HardwareProfile
from evaluator.measure import unwatched_path_error
from submissions import curation
from submissions.models import OperatorResult, Score, ShapeResult, Submission
from submissions.result_import import submission_import_results
from tests.factories import UserFactory
from tests.leaderboard.results_factory import smoke_results

pytestmark = pytest.mark.django_db

REPO = Path(__file__).resolve().parents[2]
WEB_APPS = ("atrex_site", "accounts", "agents", "catalogue", "leaderboard", "submissions",
            "traces", "fleet", "atrex_cli")  # fmt: skip


@pytest.fixture
def admin_user(db):
    return UserFactory(is_staff=True, is_superuser=True)


def _import(suite, report, owner):
    return submission_import_results(
        owner=owner,
        report=report,
        suite_version=suite,
        hardware=HardwareProfile.objects.get(slug="cpu-dev"),
        title="verdicts",
        provenance_note="made by the tests",
        is_baseline=False,
    )


def _coded(suite, **options):
    """smoke_results written by harness 0.3.0: every shape carries its codes."""
    report = smoke_results(suite, **options)
    report["harness_version"] = "0.3.0"
    for operator in report["operators"]:
        for shape in operator["shapes"]:
            shape["codes"] = [] if shape["status"] == "pass" else ["fallback"]
    return report


def _caught_on_one_shape(suite):
    """Honest everywhere but one rms_norm shape, where its timed calls took another path."""
    report = _coded(suite)
    rms = next(op for op in report["operators"] if op["operator"] == "rms_norm")
    shape = rms["shapes"][0]
    shape.update(
        status="fallback",
        codes=["unwatched_path"],
        watched_time_ms=201.7 * shape["time_ms"],
        error=unwatched_path_error(
            shape["shape_id"], "cuda", timed_s=shape["time_ms"] / 1e3,
            watched_s=201.7 * shape["time_ms"] / 1e3,
        ),
    )  # fmt: skip
    return report


def test_one_sign_of_deception_holds_the_whole_submission_until_staff_release_it(
    catalogue, user, admin_user, client
):
    held = _import(catalogue, _caught_on_one_shape(catalogue), user)
    assert held.status == Submission.Status.HELD_FOR_REVIEW
    assert "unwatched_path" in held.history.last().note
    # Nothing of it is published: no board row, no figures for the public.
    assert not Score.objects.filter(submission=held).exists()
    board = client.get(reverse("api:leaderboard"), {"suite": catalogue.slug, "hardware": "cpu-dev"})
    assert board.json()["results"] == []
    detail = client.get(reverse("api:submission", args=[held.pk])).json()
    assert detail["status"] == "held_for_review"
    assert detail["scores"] is None and detail["operators"] == []
    shapes = client.get(reverse("api:submission-shapes", args=[held.pk])).json()
    assert shapes["results"] == []
    # Its owner sees the figures, and the verdicts.
    client.force_login(user)
    detail = client.get(reverse("api:submission", args=[held.pk])).json()
    rms = next(op for op in detail["operators"] if op["operator"] == "rms_norm")
    assert rms["verdict"] == "held" and rms["hold_codes"] == ["unwatched_path"]
    # The review page shows the sign with its evidence and figures.
    client.force_login(admin_user)
    page = client.get(reverse("admin:submissions_submission_change", args=[held.pk]))
    text = page.content.decode()
    assert "Signs of deception" in text and "<code>unwatched_path</code>" in text
    assert "The timed calls ran far faster than the watched calls" in text
    assert "the candidate takes another path when it is not watched" in text
    assert "201.7x faster" in text
    # The release form shows them too.
    form = client.post(
        reverse("admin:submissions_submission_changelist"),
        {"action": "curate_release", "_selected_action": [held.pk]},
    )
    assert "<code>unwatched_path</code>" in form.content.decode()

    curation.submission_release(submission=held, actor=admin_user, reason="reviewed: benign")
    held.refresh_from_db()
    assert held.status == Submission.Status.PUBLISHED
    assert held.score.operator_verdicts["rms_norm"] == "held"
    assert held.score.operator_verdicts["silu_and_mul"] == "pass"


def test_a_wrong_answer_on_one_shape_publishes_the_operator_at_zero_with_both_counts(
    catalogue, user, client
):
    report = _coded(catalogue)
    rms = next(op for op in report["operators"] if op["operator"] == "rms_norm")
    assert len(rms["shapes"]) >= 2
    for shape in rms["shapes"][1:]:
        shape.update(status="incorrect", codes=["wrong_result"], error="max abs error 3.2")
    submission = _import(catalogue, report, user)
    assert submission.status == Submission.Status.PUBLISHED
    score = submission.score
    assert score.operator_scores["rms_norm"] == 0.0
    assert score.operator_scores["silu_and_mul"] == pytest.approx(0.5)
    assert score.operator_verdicts["rms_norm"] == "incorrect"
    total = ShapeResult.objects.filter(run=score.run).count()
    wrong = len(rms["shapes"]) - 1
    assert score.shapes_total == total
    assert score.shapes_passed_apparent == total - wrong
    assert score.shapes_passed_real == total - len(rms["shapes"])
    row = OperatorResult.objects.get(run=score.run, operator="rms_norm")
    assert (row.verdict, row.score, row.apparent_passes, row.real_passes) == (
        "incorrect", 0.0, 1, 0,
    )  # fmt: skip
    assert row.wrong_shapes == [s["shape_id"] for s in rms["shapes"][1:]]
    second = rms["shapes"][1]["shape_id"]
    stored = ShapeResult.objects.get(run=score.run, operator="rms_norm", shape_id=second)
    assert stored.codes == ["wrong_result"]
    # The board's API shows the verdict and the two counts side by side.
    board = client.get(reverse("api:leaderboard"), {"suite": catalogue.slug, "hardware": "cpu-dev"})
    (api_row,) = board.json()["results"]
    assert api_row["operator_verdicts"]["rms_norm"] == "incorrect"
    assert (api_row["shapes_passed_apparent"], api_row["shapes_passed_real"]) == (
        total - wrong, total - len(rms["shapes"]),
    )  # fmt: skip


def test_results_written_before_codes_still_import(catalogue, user):
    report = smoke_results(catalogue, status={"rms_norm": "incorrect"})
    report["harness_version"] = "0.2.4"
    submission = _import(catalogue, report, user)
    assert submission.status == Submission.Status.PUBLISHED
    rows = ShapeResult.objects.filter(run=submission.score.run, operator="rms_norm")
    assert {tuple(row.codes) for row in rows} == {("wrong_result",)}
    assert submission.score.operator_verdicts["rms_norm"] == "incorrect"


# --------------------------------------------------------------------------- no words read

TEXT_WORDS = ("error", "message", "note", "reason", "log_tail", "detail")


def _texty(node: ast.AST) -> bool:
    source = ast.unparse(node).lower()
    return any(word in source for word in TEXT_WORDS) and "code" not in source


def message_matching(source: str) -> list[str]:
    """Places in Python ``source`` that decide by a message's words: ``"..." in error``,
    ``message.startswith(...)``, ``re.search(..., error)`` and their kin (error *codes* are
    fine)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare) and any(
            isinstance(op, ast.In | ast.NotIn) for op in node.ops
        ):
            if isinstance(node.left, ast.Constant) and isinstance(node.left.value, str):
                if any(_texty(c) for c in node.comparators):
                    found.append(ast.unparse(node))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in ("startswith", "endswith", "find", "index", "count"):
                if _texty(node.func.value):
                    found.append(ast.unparse(node))
            if node.func.attr in ("search", "match", "fullmatch", "findall"):
                if any(_texty(arg) for arg in node.args[1:]):
                    found.append(ast.unparse(node))
    return found


TEMPLATE_MATCH = re.compile(r"\{%[^%]*\bin\s+[\w.]*(error|message|note)\b[^%]*%\}")


def test_the_site_never_decides_by_a_messages_words():
    # The check catches the forms it must (and lets codes through).
    assert len(message_matching(
        "if 'held for review' in shape.get('error'): pass\n"
        "if run.error_message.startswith('tampering'): pass\n"
        "if re.search('another path', shape['error']): pass\n"
        "if 'eval:' in submission.error_code: pass\n"
    )) == 3  # fmt: skip
    assert TEMPLATE_MATCH.search('{% if "held" in shape.error %}')
    found = []
    for app in WEB_APPS:
        for path in sorted((REPO / app).rglob("*.py")):
            if "migrations" not in path.parts:
                found += [
                    f"{path.relative_to(REPO)}: {m}" for m in message_matching(path.read_text())
                ]
    for path in sorted((REPO / "templates").rglob("*.html")):
        found += [f"{path.relative_to(REPO)}: {m.group(0)}"
                  for m in TEMPLATE_MATCH.finditer(path.read_text())]  # fmt: skip
    assert found == []
