"""The ranking rule of every board (page, API, downloads, ``atrex board``): ranks by aggregate,
baselines listed but never ranked, and ties where two rows cannot be told apart by the
measurement. Pure functions over narrow row keys; the queries are in ``selectors``.

When two rows are a tie (docs/scoring.md, "Ranks and ties"): rows are taken best first;
each tie group starts at its best row, its *leader*, and a later row joins the group when
it cannot be told apart from the leader, that is when

* their 95% intervals overlap (the timing noise within each run), or
* the leader's aggregate exceeds it by no more than the board's *noise floor*, a share of
  the leader's aggregate: the run-to-run noise of that hardware, which one run's interval
  does not cover (two runs of the same bundle on an H200 agree within 0.3-1 %; two on the
  CPU development profile were 40 % apart).

Tied rows share the group's rank, shown "=N"; the next group's rank counts every row above
it (=1, =1, 3). Comparing with the leader rather than the neighbour keeps a slope of small
steps from chaining a whole board into one tie.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

# The run-to-run noise floor of a device kind, as a share of the aggregate. CUDA: two
# back-to-back runs of the Triton baseline over v1 on an H200 were 0.5 % apart (harness
# 0.2.1, results/2026-12-01-h200-session6), over v0.1 0.55 % (docs/figures.md); 1 % covers
# them. CPU: the development profile times Triton's interpreter on a shared machine; two
# runs of the same bundle there were 40 % apart (issue 19), so half the score is noise.
DEVICE_NOISE_FLOOR: dict[str, float] = {"cuda": 0.01, "cpu": 0.5}
DEFAULT_NOISE_FLOOR = 0.01


@dataclass(frozen=True)
class NoiseFloor:
    """A board's noise floor: ``relative`` is what ranking uses, the larger of the hardware
    profile's (``profile``) and the widest relative gap between repeated runs of one bundle
    on that board (``measured``, from ``repeats`` bundles run more than once; None when
    no bundle was)."""

    relative: float
    profile: float
    measured: float | None = None
    repeats: int = 0


def noise_floor(
    *, device_kind: str, repeat_ranges: Iterable[tuple[float, float]] = ()
) -> NoiseFloor:
    """The noise floor of a board on a ``device_kind`` profile, given the (lowest, highest)
    aggregate of each bundle that was run there more than once."""
    profile = DEVICE_NOISE_FLOOR.get(device_kind, DEFAULT_NOISE_FLOOR)
    gaps = [(high - low) / high for low, high in repeat_ranges if high > 0]
    measured = max(gaps) if gaps else None
    return NoiseFloor(
        relative=max(profile, measured or 0.0),
        profile=profile,
        measured=measured,
        repeats=len(gaps),
    )


@dataclass(frozen=True)
class RankKey:
    """What ranking needs of a board row (no submission, owner or operator scores)."""

    pk: int
    aggregate: float
    aggregate_ci_low: float | None
    aggregate_ci_high: float | None
    is_baseline: bool
    # Position in the ranking order (aggregate high to low, then older first, then pk):
    # a row number computed by the database, or that tuple itself.
    order: Any


def _interval(key: RankKey) -> tuple[float, float]:
    low = key.aggregate if key.aggregate_ci_low is None else key.aggregate_ci_low
    high = key.aggregate if key.aggregate_ci_high is None else key.aggregate_ci_high
    return low, high


def indistinguishable(leader: RankKey, row: RankKey, *, floor: float) -> bool:
    """Whether ``row`` (ranked below ``leader``) ties with it: overlapping 95% intervals,
    or a gap within ``floor`` of the leader's aggregate."""
    leader_low, leader_high = _interval(leader)
    row_low, row_high = _interval(row)
    if leader_low <= row_high and row_low <= leader_high:
        return True
    return leader.aggregate - row.aggregate <= floor * max(leader.aggregate, row.aggregate)


def rank_keys(keys: Iterable[RankKey], *, floor: float = 0.0) -> dict[int, tuple[int, bool]]:
    """Score pk -> (rank, tied) for the non-baseline rows among ``keys`` (module docstring:
    the tie rule). Baselines get no entry: they are listed, never ranked."""
    ranked = sorted((key for key in keys if not key.is_baseline), key=lambda key: key.order)
    result: dict[int, tuple[int, bool]] = {}
    leader: RankKey | None = None
    rank = 0
    for position, key in enumerate(ranked, start=1):
        if leader is not None and indistinguishable(leader, key, floor=floor):
            result[leader.pk] = result[key.pk] = (rank, True)
            continue
        leader, rank = key, position
        result[key.pk] = (rank, False)
    return result


def rank_label(rank: int | None, tied: bool) -> str:
    """``"3"``, ``"=1"`` for a tie, ``""`` for an unranked row (a baseline)."""
    if rank is None:
        return ""
    return f"={rank}" if tied else str(rank)
