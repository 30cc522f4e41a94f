"""W/Q of new shapes, computed by the evaluator's work models in a child process.

The site never imports torch (docs/architecture.md, "The boundary"): the evaluator's
interpreter (``settings.ATREX["EVALUATOR_PYTHON"]``, else this one) runs
``python -m traces.work_model``, which holds no Django.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from django.conf import settings

PROJECT_ROOT = Path(__file__).resolve().parents[1]
WORK_TIMEOUT_S = 300


class WorkModelError(Exception):
    """The child process could not compute W/Q at all (not one shape's problem)."""


def shapes_work(items: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """For each {"operator", "init_kwargs", "input_kwargs"}: {"w_flops", "q_read",
    "q_write"} or {"error"}; WorkModelError when the child fails as a whole."""
    if not items:
        return []
    python = settings.ATREX.get("EVALUATOR_PYTHON") or sys.executable
    with tempfile.TemporaryDirectory(prefix="atrex-work-") as scratch:
        env = {name: os.environ[name] for name in ("PATH", "LANG", "LC_ALL") if name in os.environ}
        env["HOME"] = scratch
        env["PYTHONPATH"] = str(PROJECT_ROOT)
        try:
            completed = subprocess.run(  # noqa: S603 - fixed argv, no shell
                [python, "-m", "traces.work_model"],
                input=json.dumps(list(items)),
                cwd=scratch,
                env=env,
                capture_output=True,
                text=True,
                timeout=WORK_TIMEOUT_S,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise WorkModelError(
                f"the work models did not answer within {WORK_TIMEOUT_S} s"
            ) from None
    if completed.returncode != 0:
        raise WorkModelError(
            f"the work-model child failed (exit {completed.returncode}): "
            f"{(completed.stderr or completed.stdout).strip()[-1500:]}"
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
