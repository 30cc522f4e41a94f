"""Fault tests against the real stack: each runs bench/fault_drill.py for one fault.

The drill starts a PRIVATE PostgreSQL cluster and redis-server (own ports, under a
temporary folder; the shared services are never touched), real Celery worker processes
and beat (the reaper), pushes small submissions, breaks the stack, and reports from the
database what happened to each submission. These tests hold it to the rule: every
submission reaches a final state with its results, none twice.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not (shutil.which("redis-server") and list(Path("/usr/lib/postgresql").glob("*/bin"))),
        reason="needs redis-server and the PostgreSQL server binaries",
    ),
]


def _drill(fault: str, submissions: int, tmp_path: Path) -> dict:
    out = tmp_path / "drill.json"
    done = subprocess.run(
        [sys.executable, "bench/fault_drill.py", "--faults", fault,
         "-n", str(submissions), "--timeout-s", "150", "--json", str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=400,
    )  # fmt: skip
    assert out.exists(), done.stdout[-3000:] + done.stderr[-3000:]
    (row,) = json.loads(out.read_text())
    row["output"] = done.stdout[-2000:]
    return row


def _assert_nothing_lost(row: dict, *, published: int) -> None:
    assert row["final"] == row["pushed"], row
    assert row["lost"] == 0 and row["duplicated"] == 0, row
    assert row["published"] == published, row
    assert row["results_ok"] == row["published"], row


def test_worker_killed_mid_evaluation_a_new_worker_finishes_it(tmp_path):
    row = _drill("kill-worker", 2, tmp_path)
    _assert_nothing_lost(row, published=2)
    # The killed run was declared lost and evaluated again: one more attempt than pushed.
    assert row["attempts"] == 3, row


def test_redis_restart_loses_no_queued_submission(tmp_path):
    row = _drill("redis-restart", 2, tmp_path)
    _assert_nothing_lost(row, published=2)
    # The queued message died with Redis; the reaper sent the run's id again.
    assert row["resent"] >= 1, row


def test_postgres_restart_during_a_run_loses_nothing(tmp_path):
    row = _drill("postgres-restart", 1, tmp_path)
    _assert_nothing_lost(row, published=1)
    # The worker rode out the outage (heartbeats skipped, the store retried): one attempt.
    assert row["attempts"] == 1, row


def test_candidate_crashing_its_child_still_completes_with_the_operator_marked(tmp_path):
    row = _drill("child-crash", 1, tmp_path)
    # results_ok checks rms_norm is runtime_error and silu_and_mul is ok on the board.
    _assert_nothing_lost(row, published=1)
    assert row["attempts"] == 1, row
