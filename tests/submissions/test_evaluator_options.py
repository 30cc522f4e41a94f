"""What a worker's settings add to the evaluator's command line (submissions/shards.py)."""

from __future__ import annotations

from submissions.shards import _evaluator_options


def test_a_worker_with_a_timings_folder_hands_it_to_the_evaluator(settings, tmp_path):
    settings.ATREX = {**settings.ATREX, "REFERENCE_TIMINGS_DIR": str(tmp_path / "timings")}
    options = _evaluator_options()
    assert options[options.index("--reference-timings") + 1] == str(tmp_path / "timings")


def test_the_timings_cache_is_off_by_default(settings):
    assert settings.ATREX["REFERENCE_TIMINGS_DIR"] == ""
    assert "--reference-timings" not in _evaluator_options()
