"""W/Q of new shapes, computed by the evaluator's work models in a child process.

The site never imports torch (docs/architecture.md, "The boundary"): the evaluator's
interpreter (``settings.ATREX["EVALUATOR_PYTHON"]``, else this one) runs
``python -m evaluator work``, started by ``evaluator.launch``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from django.conf import settings

from evaluator.launch import LaunchTimeout, run_evaluator_command, scratch_folder

WORK_TIMEOUT_S = 300


class WorkModelError(Exception):
    """The child process could not compute W/Q at all (not one shape's problem)."""


def shapes_work(items: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """For each {"operator", "init_kwargs", "input_kwargs"}: {"w_flops", "q_read",
    "q_write"} or {"error"}; WorkModelError when the child fails as a whole."""
    if not items:
        return []
    with scratch_folder("work") as scratch:
        try:
            completed = run_evaluator_command(
                "work",
                scratch=scratch,
                timeout_s=WORK_TIMEOUT_S,
                python=settings.ATREX.get("EVALUATOR_PYTHON") or "",
                input_text=json.dumps(list(items)),
            )
        except LaunchTimeout:
            raise WorkModelError(
                f"the work models did not answer within {WORK_TIMEOUT_S} s"
            ) from None
    if completed.returncode != 0:
        raise WorkModelError(
            f"the work-model child failed (exit {completed.returncode}): "
            f"{completed.output_tail(1500)}"
        )
    try:
        results = json.loads(completed.stdout)
    except json.JSONDecodeError:
        raise WorkModelError(
            f"the work-model child wrote no JSON: {completed.stdout[:300]!r}"
        ) from None
    if not isinstance(results, list) or len(results) != len(items):
        raise WorkModelError("the work-model child answered for a different number of shapes")
    return results
