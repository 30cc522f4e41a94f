"""A new suite version proposed from trace weights (pure planning; no Django).

Starting from a base version's shapes and operators, and the trace weights of
``traces.aggregation.shape_weights``:

1. **Snap**: each traced shape (heaviest first) joins the nearest shape of its operator
   whose kwargs have the same keys, equal non-numbers and numbers within
   ``snap_tolerance`` (relative): first the base version's shapes, then the traced shapes
   already taken. A cluster's weight is the sum of its members'.
2. **Keep**: clusters by weight, heaviest first, until their summed weight reaches
   ``coverage`` of the total (an operator's heaviest cluster is always kept).
3. **Plan**: a base shape with a kept cluster is re-weighted; a kept cluster without one is
   a new shape (its W/Q computed later by the work models); the other base shapes of an
   operator the traces observed are disabled. Operators the traces did not observe keep
   their importance share (``unobserved="keep"``) or are disabled (``"drop"``); observed
   operators share the rest in proportion to their trace weight.

Weights are in card-hours (relative within each operator, as the suite defines them).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

UNOBSERVED = ("keep", "drop")


@dataclass(frozen=True)
class Parameters:
    coverage: float = 0.95
    snap_tolerance: float = 0.1
    unobserved: str = "keep"

    def problems(self) -> list[str]:
        found = []
        if not 0 < self.coverage <= 1:
            found.append(f"coverage {self.coverage} must be in (0, 1]")
        if not 0 <= self.snap_tolerance < 1:
            found.append(f"snap tolerance {self.snap_tolerance} must be in [0, 1)")
        if self.unobserved not in UNOBSERVED:
            found.append(f"unobserved must be one of {', '.join(UNOBSERVED)}")
        return found


@dataclass
class Cluster:
    operator: str
    init_kwargs: dict[str, Any]
    input_kwargs: dict[str, Any]
    base_shape_id: str | None
    weight: float = 0.0
    time_us: float = 0.0
    calls: int = 0
    members: list[str] = field(default_factory=list)
    applications: set[str] = field(default_factory=set)
    kept: bool = False


@dataclass
class Plan:
    """What the draft gets: shape re-weights, new shapes, disabled shapes, importance."""

    reweighted: list[Cluster]
    added: list[Cluster]
    dropped: list[Cluster]  # traced, outside the coverage: not in the draft
    disabled: list[tuple[str, str]]  # (operator, shape_id) of base shapes the traces missed
    importance: dict[str, float]  # operator -> importance in the draft
    disabled_operators: list[str]
    not_in_base: list[str]  # traced operators the base version lacks (left out)
    kept_share: float

    def summary(self) -> dict[str, Any]:
        def shapes(clusters: Sequence[Cluster]) -> list[dict[str, Any]]:
            return [
                {
                    "operator": c.operator,
                    "shape_id": c.base_shape_id,
                    "init_kwargs": c.init_kwargs,
                    "input_kwargs": c.input_kwargs,
                    "weight": c.weight,
                    "time_us": c.time_us,
                    "calls": c.calls,
                    "snapped": len(c.members),
                    "applications": sorted(c.applications),
                }
                for c in clusters
            ]

        return {
            "reweighted": shapes(self.reweighted),
            "added": shapes(self.added),
            "dropped": shapes(self.dropped),
            "disabled": [{"operator": op, "shape_id": sid} for op, sid in self.disabled],
            "importance": self.importance,
            "disabled_operators": self.disabled_operators,
            "not_in_base": self.not_in_base,
            "kept_share": self.kept_share,
        }


def _close(a: Any, b: Any, tolerance: float) -> float | None:
    """The largest relative difference between two kwargs values, None if not comparable."""
    if isinstance(a, bool) or isinstance(b, bool):
        return 0.0 if a == b else None
    if isinstance(a, int | float) and isinstance(b, int | float):
        scale = max(abs(a), abs(b))
        diff = abs(a - b) / scale if scale else 0.0
        return diff if diff <= tolerance else None
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return None
        worst = 0.0
        for x, y in zip(a, b, strict=True):
            d = _close(x, y, tolerance)
            if d is None:
                return None
            worst = max(worst, d)
        return worst
    return 0.0 if a == b else None


def distance(
    a: tuple[Mapping[str, Any], Mapping[str, Any]],
    b: tuple[Mapping[str, Any], Mapping[str, Any]],
    tolerance: float,
) -> float | None:
    """How far two shapes (init, input kwargs) are apart; None when not near-identical."""
    worst = 0.0
    for left, right in zip(a, b, strict=True):
        if set(left) != set(right):
            return None
        for key in left:
            d = _close(left[key], right[key], tolerance)
            if d is None:
                return None
            worst = max(worst, d)
    return worst


def plan_proposal(
    *,
    weights: Sequence[Mapping[str, Any]],
    base_shapes: Sequence[Mapping[str, Any]],
    base_importance: Mapping[str, float],
    parameters: Parameters,
) -> Plan:
    """The plan (see the module docstring). ``weights``: rows of shape_weights;
    ``base_shapes``: {operator, shape_id, init_kwargs, input_kwargs} of the base version's
    enabled shapes; ``base_importance``: its enabled operators' importance."""
    tolerance = parameters.snap_tolerance
    clusters: list[Cluster] = []
    by_operator: dict[str, list[Cluster]] = {}
    for shape in base_shapes:
        cluster = Cluster(
            operator=shape["operator"],
            init_kwargs=dict(shape.get("init_kwargs") or {}),
            input_kwargs=dict(shape["input_kwargs"]),
            base_shape_id=str(shape["shape_id"]),
        )
        by_operator.setdefault(cluster.operator, []).append(cluster)
    not_in_base: set[str] = set()
    for row in sorted(weights, key=lambda r: (-r["weight"], r["operator"], r["shape_key"])):
        operator = row["operator"]
        if operator not in base_importance:
            not_in_base.add(operator)
            continue
        point = (row["init_kwargs"] or {}, row["input_kwargs"])
        candidates = by_operator.setdefault(operator, [])
        best, best_distance = None, None
        for cluster in candidates:
            d = distance((cluster.init_kwargs, cluster.input_kwargs), point, tolerance)
            if d is not None and (best_distance is None or d < best_distance):
                best, best_distance = cluster, d
        if best is None:
            best = Cluster(
                operator=operator,
                init_kwargs=dict(point[0]),
                input_kwargs=dict(point[1]),
                base_shape_id=None,
            )
            candidates.append(best)
        best.weight += float(row["weight"])
        best.time_us += float(row["time_us"])
        best.calls += int(row["calls"])
        best.members.append(row["shape_key"])
        best.applications.update(row.get("applications") or [])
        if best not in clusters:
            clusters.append(best)
    total = math.fsum(c.weight for c in clusters)
    kept_weight = 0.0
    seen_operators: set[str] = set()
    for cluster in sorted(clusters, key=lambda c: -c.weight):
        if kept_weight < parameters.coverage * total or cluster.operator not in seen_operators:
            cluster.kept = True
            kept_weight += cluster.weight
            seen_operators.add(cluster.operator)
    observed = {c.operator for c in clusters}
    disabled = [
        (c.operator, c.base_shape_id)
        for op in sorted(observed)
        for c in by_operator.get(op, [])
        if c.base_shape_id is not None and not c.kept
    ]
    trace_weight = {
        op: math.fsum(c.weight for c in clusters if c.operator == op) for op in observed
    }
    trace_total = math.fsum(trace_weight.values())
    importance: dict[str, float] = {}
    disabled_operators: list[str] = []
    if parameters.unobserved == "keep":
        observed_share = math.fsum(base_importance[op] for op in observed)
        for op, value in base_importance.items():
            if op in observed:
                importance[op] = observed_share * trace_weight[op] / trace_total
            else:
                importance[op] = value
    else:
        for op in base_importance:
            if op in observed:
                importance[op] = trace_weight[op] / trace_total
            else:
                disabled_operators.append(op)
    kept = [c for c in clusters if c.kept]
    return Plan(
        reweighted=[c for c in kept if c.base_shape_id is not None],
        added=[c for c in kept if c.base_shape_id is None],
        dropped=[c for c in clusters if not c.kept],
        disabled=disabled,
        importance=importance,
        disabled_operators=sorted(disabled_operators),
        not_in_base=sorted(not_in_base),
        kept_share=kept_weight / total if total > 0 else 0.0,
    )
