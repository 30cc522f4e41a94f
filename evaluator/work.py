"""W/Q of shapes from the evaluator's work models: ``python -m evaluator work``.

The command reads ``[{"operator", "init_kwargs", "input_kwargs"}, ...]`` as JSON on stdin
and writes, in the same order, ``{"w_flops", "q_read", "q_write"}`` or ``{"error": "..."}``
for each. It imports the evaluator's operators (and so torch): the site runs it with the
evaluator's interpreter through ``evaluator.launch`` (``traces.work``), never in its own
process.
"""

from __future__ import annotations

import json
import sys
from typing import Any


def shape_work(item: Any) -> dict[str, Any]:
    """The work model's W/Q for one shape, or the reason it cannot be computed."""
    from evaluator.operators import OPERATORS

    if not isinstance(item, dict):
        return {"error": "not an object"}
    spec = OPERATORS.get(str(item.get("operator")))
    if spec is None:
        return {"error": f"operator {item.get('operator')!r} is not built into the evaluator"}
    try:
        work = spec.work(item.get("init_kwargs") or {}, item.get("input_kwargs") or {})
    except Exception as exc:  # the work model's own complaint about the kwargs
        return {"error": f"the work model rejects these kwargs: {type(exc).__name__}: {exc}"}
    return {
        "w_flops": {k: int(v) for k, v in work.w_flops.items() if v},
        "q_read": int(work.q_read),
        "q_write": int(work.q_write),
    }


def command_work() -> int:
    """Read the shapes (JSON on stdin), write their W/Q (JSON on stdout); the exit code."""
    try:
        items = json.load(sys.stdin)
    except json.JSONDecodeError as exc:
        print(f"expected a JSON list on stdin: {exc}", file=sys.stderr)
        return 2
    if not isinstance(items, list):
        print("expected a JSON list", file=sys.stderr)
        return 2
    json.dump([shape_work(item) for item in items], sys.stdout)
    return 0
