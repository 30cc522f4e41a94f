"""How a run's operators are split into shards: pure Python, no Django, so that the fleet
model (``bench/fleet_model.py``) and the compile baseline's precompile pass
(``bench/reference_baseline.py``) split work exactly as the site's planner does
(``submissions.run_split``)."""

from __future__ import annotations


def shard_plan(*, operators: list[str], costs: dict[str, float], count: int) -> list[list[str]]:
    """Split ``operators`` into at most ``count`` non-empty shards of balanced cost.

    Largest cost first, each to the cheapest shard so far (ties: the one with the fewest
    operators, then the lowest index); each shard keeps the operators in their given
    order. ``count`` 1 gives one shard of every operator."""
    count = max(1, min(count, len(operators)))
    loads = [0] * count
    members: list[list[str]] = [[] for _ in range(count)]
    for operator in sorted(operators, key=lambda op: -costs.get(op, 0)):
        target = min(range(count), key=lambda i: (loads[i], len(members[i]), i))
        loads[target] += costs.get(operator, 0)
        members[target].append(operator)
    order = {op: i for i, op in enumerate(operators)}
    return [sorted(shard, key=order.__getitem__) for shard in members if shard]
