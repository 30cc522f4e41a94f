"""bench/fault_drill.py's ``-n``: one number of submissions for every fault, or one per
fault, so that faults drilled with different numbers share one private stack (the drill
itself runs in tests/submissions/test_faults.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))

from fault_drill import DEFAULT_SUBMISSIONS, submission_counts  # noqa: E402


def test_one_number_is_every_faults_and_pairs_are_each_faults_own():
    faults = ["kill-worker", "postgres-restart", "child-crash"]
    assert submission_counts("3", faults) == dict.fromkeys(faults, 3)
    assert submission_counts("kill-worker=2,child-crash=1", faults) == {
        "kill-worker": 2,
        "postgres-restart": DEFAULT_SUBMISSIONS,
        "child-crash": 1,
    }


@pytest.mark.parametrize("text", ["no-such-fault=2", "kill-worker=two", "many"])
def test_a_count_that_names_no_fault_or_number_is_refused(text):
    with pytest.raises(ValueError):
        submission_counts(text, ["kill-worker"])
