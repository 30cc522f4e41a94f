"""The ranking rule (``leaderboard.ranking``) and the operator families, as pure functions:
ties by overlapping intervals or by the board's run-to-run noise floor, baselines never
ranked, and a family for every operator the shipped suites hold."""

from __future__ import annotations

import json

import pytest

from catalogue.operator_groups import GROUPS, OTHER, operator_group
from evaluator.suite import SUITES_DIR
from leaderboard.ranking import RankKey, noise_floor, rank_keys, rank_label


def _keys(*aggregates: float, interval: float = 0.0, baselines: tuple[int, ...] = ()):
    """Rows 1..n with these aggregates (best first), each with a +-``interval`` 95% interval
    (none when 0); the positions in ``baselines`` are baselines."""
    return [
        RankKey(
            pk=index,
            aggregate=value,
            aggregate_ci_low=value - interval if interval else None,
            aggregate_ci_high=value + interval if interval else None,
            is_baseline=index in baselines,
            order=index,
        )
        for index, value in enumerate(aggregates, start=1)
    ]


def _labels(ranks: dict[int, tuple[int, bool]], count: int) -> list[str]:
    return [rank_label(*ranks[pk]) if pk in ranks else "base" for pk in range(1, count + 1)]


def test_rows_within_the_noise_floor_of_the_leader_tie_and_ranks_skip_after():
    # 0.60 and 0.55 are 8 % apart: a tie under a 10 % floor, not under 1 %.
    keys = _keys(0.60, 0.55, 0.30, 0.30)
    assert _labels(rank_keys(keys, floor=0.10), 4) == ["=1", "=1", "=3", "=3"]
    assert _labels(rank_keys(keys, floor=0.01), 4) == ["1", "2", "=3", "=3"]


def test_overlapping_intervals_tie_without_a_floor():
    assert _labels(rank_keys(_keys(0.50, 0.49, 0.40, interval=0.006)), 3) == ["=1", "=1", "3"]


def test_a_slope_of_small_steps_does_not_chain_into_one_tie():
    # Each step is 0.8 % of its neighbour (under the 1 % floor) but a row joins a group
    # only within the floor of the group's leader.
    keys = _keys(1.0, 0.992, 0.984, 0.976, 0.968)
    assert _labels(rank_keys(keys, floor=0.01), 5) == ["=1", "=1", "=3", "=3", "5"]


def test_baselines_are_listed_but_never_ranked_and_take_no_place():
    keys = _keys(0.9, 0.8, 0.5, 0.1, baselines=(2, 4))
    assert _labels(rank_keys(keys, floor=0.01), 4) == ["1", "base", "2", "base"]


def test_the_floor_is_the_profiles_or_the_widest_repeat_gap_on_the_board():
    assert noise_floor(device_kind="cuda").relative == pytest.approx(0.01)
    assert noise_floor(device_kind="cpu").relative == pytest.approx(0.5)
    # One bundle run twice on a GPU board, 0.040 and 0.044: 9.1 % apart widens the floor.
    floor = noise_floor(device_kind="cuda", repeat_ranges=[(0.040, 0.044), (0.3, 0.301)])
    assert floor.relative == pytest.approx(0.004 / 0.044) and floor.repeats == 2
    assert floor.profile == pytest.approx(0.01) and floor.measured == pytest.approx(0.004 / 0.044)
    # Repeats closer than the profile's floor do not narrow it; all-zero runs say nothing.
    assert noise_floor(device_kind="cuda", repeat_ranges=[(0.5, 0.5005), (0, 0)]).relative == (
        pytest.approx(0.01)
    )


def test_every_operator_of_the_shipped_suites_has_a_family():
    slugs = {
        op["slug"]
        for path in SUITES_DIR.glob("*.json")
        for op in json.loads(path.read_text())["operators"]
    }
    assert slugs and all(operator_group(slug) is not OTHER for slug in slugs)
    listed = [slug for group in GROUPS for slug in group.operators]
    assert len(listed) == len(set(listed)), "an operator is in two families"
    # An operator an admin uploads falls into a family by its slug.
    assert operator_group("fused_moe_w4a16").slug == "moe"
    assert operator_group("rmsnorm_fp4_quant").slug == "quantisation"
    assert operator_group("sparse_attention_prefill").slug == "attention"
    assert operator_group("argsort").slug == "other"
