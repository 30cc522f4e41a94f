"""Fault tests against the real stack: each holds one fault's row of bench/fault_drill.py.

The drill starts a PRIVATE PostgreSQL cluster and redis-server (own ports, under a
temporary folder; the shared services are never touched), real Celery worker processes
and beat (the reaper), pushes small submissions, breaks the stack, and reports from the
database what happened to each submission. These tests hold it to the rule: every
submission reaches a final state with its results, none twice.

The faults share one drill, and so one private stack, as the bench does by default (it
drills them one after another, each with its own number of submissions, and reports one
row per fault); only the faults of the tests selected in this session are drilled.
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


SUBMISSIONS = {"kill-worker": 2, "redis-restart": 2, "postgres-restart": 1, "child-crash": 1}
"""How many submissions each fault's drill pushes (in the bench's order of the faults)."""


def _drill(faults: list[str], tmp_path: Path) -> dict[str, dict]:
    """One run of the drill over ``faults`` (each with its SUBMISSIONS): fault -> its row,
    or ``{"missing": output}`` when the drill wrote none for it."""
    out = tmp_path / "drill.json"
    counts = ",".join(f"{fault}={SUBMISSIONS[fault]}" for fault in faults)
    try:
        done = subprocess.run(
            [sys.executable, "bench/fault_drill.py", "--faults", ",".join(faults),
             "-n", counts, "--timeout-s", "150", "--json", str(out)],
            cwd=REPO, capture_output=True, text=True, timeout=150 + 250 * len(faults),
        )  # fmt: skip
    except subprocess.TimeoutExpired as error:
        return {fault: {"missing": f"the drill timed out: {error}"} for fault in faults}
    rows = {row["fault"]: row for row in json.loads(out.read_text())} if out.exists() else {}
    missing = {"missing": done.stdout[-3000:] + done.stderr[-3000:]}
    return {
        fault: {**rows[fault], "output": done.stdout[-2000:]} if fault in rows else missing
        for fault in faults
    }


@pytest.fixture(scope="module")
def drilled() -> dict[str, dict]:
    """The rows drilled so far in this module, by fault."""
    return {}


@pytest.fixture
def row(request, drilled, tmp_path_factory) -> dict:
    """The row of the fault ``request.param``. The first test drills every fault selected in
    this session (in the bench's order), in one run of the drill."""
    fault = request.param
    if fault not in drilled:
        selected = {
            item.callspec.params["row"]
            for item in request.session.items
            if item.module is request.module
            and "row" in getattr(getattr(item, "callspec", None), "params", {})
        }
        faults = [other for other in SUBMISSIONS if other in selected | {fault}]
        drilled.update(_drill(faults, tmp_path_factory.mktemp("drill")))
    return drilled[fault]


def _assert_nothing_lost(row: dict, *, published: int) -> None:
    assert "missing" not in row, row["missing"]
    assert row["final"] == row["pushed"], row
    assert row["lost"] == 0 and row["duplicated"] == 0, row
    assert row["published"] == published, row
    assert row["results_ok"] == row["published"], row


@pytest.mark.parametrize("row", ["kill-worker"], indirect=True)
def test_worker_killed_mid_evaluation_a_new_worker_finishes_it(row):
    _assert_nothing_lost(row, published=2)
    # The killed run was declared lost and evaluated again: one more attempt than pushed.
    assert row["attempts"] == 3, row


@pytest.mark.parametrize("row", ["redis-restart"], indirect=True)
def test_redis_restart_loses_no_queued_submission(row):
    _assert_nothing_lost(row, published=2)
    # The queued message died with Redis; the reaper sent the run's id again.
    assert row["resent"] >= 1, row


@pytest.mark.parametrize("row", ["postgres-restart"], indirect=True)
def test_postgres_restart_during_a_run_loses_nothing(row):
    _assert_nothing_lost(row, published=1)
    # The worker rode out the outage (heartbeats skipped, the store retried): one attempt.
    assert row["attempts"] == 1, row


@pytest.mark.parametrize("row", ["child-crash"], indirect=True)
def test_candidate_crashing_its_child_still_completes_with_the_operator_marked(row):
    # results_ok checks rms_norm is runtime_error and silu_and_mul is ok on the board.
    _assert_nothing_lost(row, published=1)
    assert row["attempts"] == 1, row
