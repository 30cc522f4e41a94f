"""How a new evaluation run is split into shards: how many, and which operators each.

Every run has one or more shards (``Shard``); a run that is not split is one shard of
every suite operator. With ``ATREX["SHARDS_PER_RUN"]`` above 1 a bundle's operators are
split into up to that many shards, balanced by each operator's expected seconds
(``operator_costs``, ``planning.shard_plan``), so that free workers of its hardware take
them in parallel; "auto" gives one shard per free worker (``free_workers``).

Below ``services`` (which creates runs) and ``shards`` (which runs them): it imports
neither.
"""

from __future__ import annotations

import os
import statistics

from django.conf import settings
from django.utils import timezone

from .models import EvaluationRun, OperatorResult, Shard, Submission
from .planning import shard_plan

HISTORY_RUNS = 20
"""How many recent evaluations of an operator (same queue, same suite version) its cost is
the median of."""


def _shape_counts(definition: dict, device: str) -> dict[str, int]:
    """Shapes per operator in the shape set the evaluator uses on ``device`` (smoke on
    cpu, all on cuda)."""
    counts: dict[str, int] = {}
    for shape in definition.get("shapes") or []:
        if device == "cpu" and not shape.get("smoke"):
            continue
        counts[shape["operator"]] = counts.get(shape["operator"], 0) + 1
    return counts


def operator_costs(
    *, queue: str, suite_version_id: int, shapes: dict[str, int]
) -> dict[str, float]:
    """Each operator's expected seconds on ``queue``: the median wall time of its last
    HISTORY_RUNS evaluations there on this suite version (child start-up included). An
    operator with no history costs its shape count times the median seconds per shape of
    the operators that have one; with no history at all, costs are shape counts (the units
    do not matter to the plan, only the ratios). Operators not in ``shapes`` cost nothing.

    On the H200 a shape count is a poor cost: an operator's child spends ~10 s starting
    (sandbox, imports, CUDA, the profiler) whatever its shape count, and a shape's checks
    and timing range from 0.1 s to over 2 s (``results/2026-12-01-h200``)."""
    if not shapes:
        return {}
    seen: dict[str, list[float]] = {}
    rows = (
        OperatorResult.objects.filter(
            run__queue=queue,
            run__submission__suite_version_id=suite_version_id,
            operator__in=list(shapes),
            wall_s__isnull=False,
        )
        .order_by("-pk")
        .values_list("operator", "wall_s")[: HISTORY_RUNS * len(shapes)]
    )
    for operator, wall_s in rows:
        kept = seen.setdefault(operator, [])
        if len(kept) < HISTORY_RUNS:
            kept.append(wall_s)
    known = {op: statistics.median(walls) for op, walls in seen.items() if walls}
    if not known:
        return {op: float(count) for op, count in shapes.items()}
    per_shape = (
        statistics.median(known[op] / shapes[op] for op in known if shapes.get(op))
        if any(shapes.get(op) for op in known)
        else 1.0
    )
    return {op: known.get(op, count * per_shape) for op, count in shapes.items()}


def free_workers(*, hardware_profile: str, queue: str, exclude_run: int | None = None) -> int:
    """The hardware's workers that nothing holds or waits for: those online (``fleet``)
    less the shards running or queued on its queue (``exclude_run``: the run being
    planned, whose shards are not counted)."""
    from fleet.services import worker_nodes_online

    online = worker_nodes_online(
        hardware_profile=hardware_profile, lost_after_s=settings.ATREX["FLEET_LOST_AFTER_S"]
    )
    pending = (
        Shard.objects.filter(
            run__queue=queue, status__in=(Shard.Status.QUEUED, Shard.Status.RUNNING)
        )
        .exclude(run_id=exclude_run)
        .count()
    )
    return max(0, online - pending)


def shards_wanted(submission: Submission, *, run: EvaluationRun | None = None) -> int:
    """How many shards a run of ``submission`` gets (1: one worker runs it all).

    ``SHARDS_PER_RUN`` "auto": one per free worker of its hardware (``free_workers``), so
    an idle fleet spreads a submission for the shortest wait and a busy one runs whole
    submissions, each paying one cold child start (bench/fleet_model.py)."""
    setting = settings.ATREX.get("SHARDS_PER_RUN") or 1
    if submission.kind != Submission.Kind.BUNDLE:
        return 1
    if setting == "auto":
        wanted = free_workers(
            hardware_profile=submission.hardware.slug,
            queue=submission.hardware.queue,
            exclude_run=run.pk if run is not None else None,
        )
    else:
        wanted = int(setting)
    if wanted <= 1:
        return 1
    known = {op["slug"] for op in submission.suite_version.definition["operators"]}
    implemented = known & set((submission.manifest or {}).get("operators") or {})
    return max(1, min(wanted, len(implemented)))


def shards_create(
    *, run: EvaluationRun, submission: Submission, count: int, dispatch: bool
) -> list[Shard]:
    """Split the run's operators into ``count`` shards (inside the caller's transaction),
    recorded as sent when ``dispatch`` (the caller sends them on commit). Every suite
    operator is in one shard (those the bundle lacks cost nothing), so the merged run
    lists the same operators whatever the split."""
    definition = submission.suite_version.definition
    operators = [op["slug"] for op in definition["operators"]]
    shapes = _shape_counts(definition, settings.ATREX["WORKER_DEVICE"])
    implemented = set((submission.manifest or {}).get("operators") or {})
    if count > 1:
        costs = operator_costs(
            queue=run.queue,
            suite_version_id=submission.suite_version_id,
            shapes={op: shapes.get(op, 0) for op in operators if op in implemented},
        )
        plan = shard_plan(operators=operators, costs=costs, count=count)
    else:
        plan = [operators]
    now = timezone.now()
    created = [
        Shard.objects.create(
            run=run,
            index=index,
            operators=members,
            shapes_total=sum(shapes.get(op, 0) for op in members),
            dispatched_at=now if dispatch else None,
            dispatch_count=1 if dispatch else 0,
        )
        for index, members in enumerate(plan)
    ]
    EvaluationRun.objects.filter(pk=run.pk).update(
        shard_count=len(created),
        seed=int.from_bytes(os.urandom(8), "big") >> 1,
        shapes_total=sum(shard.shapes_total for shard in created),
    )
    run.refresh_from_db()
    return created
