"""How closely a run measures: correctness trials per shape and the timing rule (stdlib
only: web-safe).

A submission's evaluation, whose figures go on the board, measures with the **full**
policy: each operator's own count of correctness trials (``CorrectnessPolicy.trials``)
and the timing rule of ``evaluator.timing`` (at least ``MIN_REPS`` timed calls, until the
median's standard error is under ``TARGET_REL_SE`` of it or the time budget is spent).

An agent campaign's rounds are feedback for a measure-revise loop, not published scores:
the kept kernels are evaluated again on the whole suite with the full policy. A round may
ask for fewer trials (``--trials``) and a lighter timing rule (``--min-reps``,
``--target-rel-se``); the campaign's options are ``agents.loop.ROUND_OPTIONS``. Any such
relaxation makes the run's **kind** ``round``, recorded in the results
(``environment.measurement``), and the board never publishes a result of that kind
(``measured_as_round``). The kind is derived from the figures, never given: a run cannot
be called full while it measured less.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

MIN_REPS = 10
TARGET_REL_SE = 0.005
"""The full policy's timing rule (``evaluator.timing``'s defaults)."""

FULL, ROUND = "full", "round"


@dataclass(frozen=True)
class MeasurementPolicy:
    """Correctness trials per shape (``trials``: at most that many, the operator's own
    count when lower; None: the operator's count) and the timing rule (``min_reps``,
    ``target_rel_se``)."""

    trials: int | None = None
    min_reps: int = MIN_REPS
    target_rel_se: float = TARGET_REL_SE

    def __post_init__(self) -> None:
        if self.trials is not None and self.trials < 1:
            raise ValueError("a run needs at least one correctness trial per shape (--trials)")
        if self.min_reps < 2:
            raise ValueError("the timing rule needs at least 2 timed calls (--min-reps)")
        if not 0.0 < self.target_rel_se < 1.0:
            raise ValueError("the timing rule's target standard error must be in (0, 1)")

    @property
    def kind(self) -> str:
        """``full`` when nothing is measured less closely than the full policy, else
        ``round``."""
        relaxed = (
            self.trials is not None
            or self.min_reps < MIN_REPS
            or self.target_rel_se > TARGET_REL_SE
        )
        return ROUND if relaxed else FULL

    def trials_for(self, operator_trials: int) -> int:
        """The correctness trials of a shape of an operator whose policy asks for
        ``operator_trials``."""
        return operator_trials if self.trials is None else min(self.trials, operator_trials)

    def timing_rule(self) -> dict[str, Any]:
        """The timing rule, as the timers take it (and as the reference timings' key
        holds it: figures timed under another rule are never read)."""
        return {"min_reps": self.min_reps, "target_rel_se": self.target_rel_se}

    def to_dict(self) -> dict[str, Any]:
        """The results' ``environment.measurement`` block (and the child's job's)."""
        return {"kind": self.kind, "trials": self.trials, **self.timing_rule()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> MeasurementPolicy:
        """The policy of a job's ``measurement`` block (the full policy without one)."""
        if not data:
            return cls()
        trials = data.get("trials")
        return cls(
            trials=int(trials) if trials is not None else None,
            min_reps=int(data.get("min_reps", MIN_REPS)),
            target_rel_se=float(data.get("target_rel_se", TARGET_REL_SE)),
        )


def measured_as_round(results: Mapping[str, Any]) -> bool:
    """Whether a results document (or any shard merged into it) was measured with a
    round's policy: such figures are feedback for an agent, never a board's."""
    environment = results.get("environment") or {}
    environments = [environment] + [
        (shard or {}).get("environment") or {} for shard in environment.get("shards") or []
    ]
    return any((env.get("measurement") or {}).get("kind") == ROUND for env in environments)
