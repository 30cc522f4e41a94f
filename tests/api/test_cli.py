"""``atrex`` against a live server (a real HTTP round trip through urllib)."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from accounts.services import api_token_create
from atrex_cli.client import Client
from atrex_cli.main import main, progress_line, wait_until_final
from submissions.models import Submission
from tests.release import REPO_ROOT

pytestmark = pytest.mark.django_db(transaction=True)

MODULE = (
    "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x\n"
)


def _bundle(tmp_path: Path, files: dict[str, str]) -> Path:
    path = tmp_path / "bundle.zip"
    with zipfile.ZipFile(path, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    return path


@pytest.fixture
def cli(live_server, user, monkeypatch, tmp_path):
    """``cli("board")`` -> (exit code, output), as ``user`` with a token."""
    monkeypatch.setenv("ATREX_URL", live_server.url)
    monkeypatch.setenv("ATREX_TOKEN", api_token_create(user=user).secret)
    monkeypatch.setenv("HOME", str(tmp_path))

    def run(*argv: str) -> tuple[int, str]:
        out = io.StringIO()
        return main(list(argv), out=out), out.getvalue()

    return run


def test_submit_a_rejected_bundle_exits_1_with_the_reason(cli, catalogue, tmp_path):
    code, output = cli("submit", str(_bundle(tmp_path, {"rms_norm.py": "def broken(:\n"})))
    assert code == 1
    assert "rejected" in output and "bundle:syntax-error" in output and "rms_norm.py" in output


def test_submit_a_good_bundle_is_queued(cli, catalogue, user, tmp_path, held_messages):
    bundle = _bundle(tmp_path, {"rms_norm.py": MODULE})
    code, output = cli("submit", str(bundle), "--title", "from cli", "--hardware", "cpu-dev")
    assert code == 0, output
    submission = Submission.objects.get(owner=user)
    assert [(name, args) for name, args, _ in held_messages] == [
        ("submissions.evaluate_run", [submission.runs.get().pk])
    ]
    assert submission.title == "from cli" and submission.status == "queued"
    assert f"submission #{submission.pk} queued on atrex-bench-v0.1 / cpu-dev" in output
    code, output = cli("status", str(submission.pk))
    assert code == 0 and f"#{submission.pk} queued" in output


def test_check_prints_the_verdict_and_exits_by_it(cli, catalogue, tmp_path):
    code, output = cli("check", str(_bundle(tmp_path, {"rms_norm.py": MODULE})))
    assert code == 0 and output.startswith("ok: 1 operator(s) would be evaluated")
    code, output = cli("check", str(_bundle(tmp_path, {"rms_norm.py": "def broken(:\n"})))
    assert code == 1 and "[bundle:syntax-error]" in output and "rms_norm.py, line 1" in output
    assert Submission.objects.count() == 0


def test_cancel_cancels_a_queued_submission(cli, catalogue, user, tmp_path, held_messages):
    cli("submit", str(_bundle(tmp_path, {"rms_norm.py": MODULE})), "--hardware", "cpu-dev")
    submission = Submission.objects.get(owner=user)
    code, output = cli("cancel", str(submission.pk))
    assert code == 0 and f"submission #{submission.pk} cancelled" in output
    code, output = cli("cancel", str(submission.pk))
    assert code == 1 and "submission:not-cancellable" in output


def test_compare_prints_scores_and_deltas(cli, publish):
    slow = publish(fraction=0.2, title="slow")
    fast = publish(fraction=0.3, title="fast")
    code, output = cli("compare", str(slow.pk), str(fast.pk))
    assert code == 0
    lines = output.splitlines()
    assert lines[0].startswith(f"#{slow.pk} slow vs #{fast.pk} fast")
    rms = next(line for line in lines if line.startswith("rms_norm"))
    assert rms.split()[1:] == ["20.0%", "30.0%", "+10.0", "pt", "1.00×"]  # same times
    assert lines[-1].startswith("0 of ")


def test_quota_prints_what_is_left_per_limit(cli, catalogue, settings, tmp_path):
    settings.ATREX = {**settings.ATREX, "QUOTA_PER_HOUR": 10, "QUOTA_PER_DAY": 0}
    cli("submit", str(_bundle(tmp_path, {"rms_norm.py": "def broken(:\n"})))  # not counted
    code, output = cli("quota")
    assert code == 0
    lines = output.splitlines()
    assert lines[0].split() == ["this", "hour", "10", "of", "10", "left"]
    assert lines[1].split() == ["today", "no", "limit"]
    assert "not counted" in lines[-1]


def test_submit_with_wait_on_a_rejected_bundle_does_not_poll(cli, catalogue, tmp_path):
    code, output = cli("submit", "--wait", str(_bundle(tmp_path, {"notes.txt": "hello"})))
    assert code == 1 and "bundle:no-operators" in output


def test_status_wait_on_a_published_submission_prints_scores(cli, publish):
    submission = publish(fraction=0.3, title="fast kernels")
    code, output = cli("status", str(submission.pk), "--wait")
    assert code == 0, output
    assert re.search(r"score \(% of roofline\)\s+30\.0%\n", output) and "rms_norm" in output
    total = submission.runs.get().shapes_total
    assert f"] {total}/{total} shapes  published" in output
    assert f"/submissions/{submission.pk}/" in output  # where to read it in a browser


def test_board_lists_published_rows(cli, publish):
    from tests.factories import UserFactory

    publish(fraction=0.3, title="slow", owner=UserFactory())
    publish(fraction=0.6, title="fast, an earlier try")
    publish(fraction=0.7, title="fast")
    code, output = cli("board", "--suite", "atrex-bench-v0.1", "--hardware", "cpu-dev")
    assert code == 0
    lines = output.splitlines()
    assert "2 rows (each submitter's best)" in lines[0]
    assert lines[1].split()[:6] == ["rank", "#", "%", "of", "roofline", "real"]
    assert lines[2].split()[0] == "1" and "fast" in lines[2] and " 70.0% " in lines[2]
    assert lines[3].split()[0] == "2" and "slow" in lines[3]
    # Aligned: every figure column ends where its header ends.
    header_end = lines[1].index("% of roofline") + len("% of roofline")
    assert all(line[header_end - 1] == "%" for line in lines[2:])
    code, output = cli("board", "--suite", "atrex-bench-v0.1", "--hardware", "cpu-dev", "--all")
    lines = output.splitlines()
    assert code == 0 and "3 rows (all submissions)" in lines[0]
    # 0.7 and 0.6 are within the CPU board's noise floor: a tie.
    assert [line.split()[0] for line in lines[2:]] == ["=1", "=1", "3"]
    code, output = cli("board", "--suite", "atrex-bench-v0.1", "--hardware", "cpu-dev", "--json")
    body = json.loads(output)
    assert code == 0 and [row["title"] for row in body["results"]] == ["fast", "slow"]


def test_status_of_an_unknown_submission_exits_1(cli, catalogue):
    code, output = cli("status", "999999")
    assert code == 1 and "Not found" in output


def test_no_token_is_a_usage_error(cli, catalogue, monkeypatch, tmp_path):
    monkeypatch.delenv("ATREX_TOKEN")
    code, output = cli("submit", str(_bundle(tmp_path, {"rms_norm.py": MODULE})))
    assert code == 2 and "ATREX_TOKEN" in output


def test_the_client_runs_on_the_standard_library_alone(live_server, publish):
    """``-I -S``: no site-packages at all, so only the standard library can be imported."""
    publish(fraction=0.5, title="via python -m")
    env = {**os.environ, "ATREX_URL": live_server.url}
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", "import sys; sys.path.insert(0, sys.argv[1]); "
         "sys.argv = ['atrex', 'board']; import runpy; runpy.run_module('atrex_cli', "
         "run_name='__main__')", str(REPO_ROOT)],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "via python -m" in done.stdout


class _FakeProgress(Client):
    def __init__(self, steps: list[dict]) -> None:
        super().__init__()
        self.steps = steps

    def progress(self, submission_id: int) -> dict:
        return self.steps.pop(0)


def test_wait_draws_one_bar_line_per_change_until_final():
    steps = [
        {"status": "queued", "shapes_done": 0, "shapes_total": 0, "final": False},
        {"status": "running", "shapes_done": 2, "shapes_total": 4, "final": False},
        {"status": "running", "shapes_done": 2, "shapes_total": 4, "final": False},
        {"status": "published", "shapes_done": 4, "shapes_total": 4, "final": True},
    ]
    out = io.StringIO()
    last = wait_until_final(_FakeProgress(steps), 1, out=out, sleep=lambda s: None)
    assert last["status"] == "published"
    assert out.getvalue().splitlines() == [
        progress_line({"status": "queued", "shapes_done": 0, "shapes_total": 0}),
        "[" + "#" * 15 + "." * 15 + "] 2/4 shapes  running",
        "[" + "#" * 30 + "] 4/4 shapes  published",
    ]


def test_tables_align_columns_and_right_align_figures():
    from atrex_cli.main import table

    text = table(["operator", "score"], [["rms_norm", "5.03%"], ["silu_and_mul", "0.00566%"]], [1])
    assert text.splitlines() == [
        "operator         score",
        "rms_norm         5.03%",
        "silu_and_mul  0.00566%",
    ]


def test_submit_prints_the_submission_url_and_json_for_scripts(cli, catalogue, user, tmp_path):
    bundle = _bundle(tmp_path, {"rms_norm.py": MODULE})
    code, output = cli("submit", str(bundle), "--hardware", "cpu-dev")
    submission = Submission.objects.get(owner=user)
    assert code == 0 and f"/submissions/{submission.pk}/" in output.splitlines()[1]
    code, output = cli("--json", "submit", str(_bundle(tmp_path, {"rms_norm.py": "x(:\n"})))
    body = json.loads(output)
    assert code == 1 and body["status"] == "rejected" and body["code"] == "bundle:syntax-error"


def test_help_documents_the_exit_codes():
    from atrex_cli.main import build_parser

    text = build_parser().format_help()
    assert "exit codes:" in text and "130" in text and "401/403" in text
