"""Run the evaluator's ``validate-suite`` command on a suite definition, in a child process.

The site never imports the references (they need torch); the evaluator's own interpreter
(``settings.ATREX["EVALUATOR_PYTHON"]``, else this one) builds each reference with each
shape's kwargs and reports the shapes it rejects. The command's contract:
``python -m evaluator validate-suite SUITE_JSON [--device meta|cpu] [--out report.json]``
writes ``{"schema": "atrex-suite-validation/1", "ok", "errors": [{"operator",
"shape_id", "message"}], "warnings", "checked"}`` and exits 0 (ok) or 2 (errors).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings

REPORT_SCHEMA = "atrex-suite-validation/1"
VALIDATE_TIMEOUT_S = 600
PROJECT_ROOT = Path(__file__).resolve().parents[1]


@dataclass
class SuiteCheck:
    """What the command found: problems (each one line, naming operator and shape)."""

    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    checked: int = 0


def _line(item: Any) -> str:
    if not isinstance(item, dict):
        return str(item)
    where = "/".join(
        str(item[k]) for k in ("operator", "shape_id") if item.get(k) not in (None, "")
    )
    message = str(item.get("message", "")).strip()
    return f"{where}: {message}" if where else message


def suite_definition_check(
    *, definition: dict[str, Any], timeout_s: float = VALIDATE_TIMEOUT_S
) -> SuiteCheck:
    """Validate ``definition`` with ``python -m evaluator validate-suite`` (child process)."""
    python = settings.ATREX.get("EVALUATOR_PYTHON") or sys.executable
    with tempfile.TemporaryDirectory(prefix="atrex-validate-") as scratch:
        suite_path = Path(scratch) / "suite.json"
        report_path = Path(scratch) / "report.json"
        suite_path.write_text(json.dumps(definition), encoding="utf-8")
        env = {name: os.environ[name] for name in ("PATH", "LANG", "LC_ALL") if name in os.environ}
        env["HOME"] = scratch
        env["PYTHONPATH"] = str(PROJECT_ROOT)
        command = [
            python,
            "-m",
            "evaluator",
            "validate-suite",
            str(suite_path),
            "--out",
            str(report_path),
        ]
        try:
            completed = subprocess.run(  # noqa: S603 - fixed argv, no shell
                command,
                cwd=scratch,
                env=env,
                capture_output=True,
                text=True,
                timeout=timeout_s,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return SuiteCheck(problems=[f"validate-suite did not finish within {timeout_s:.0f} s"])
        output = (completed.stderr or completed.stdout or "").strip()[-2000:]
        if "invalid choice: 'validate-suite'" in output:
            return SuiteCheck(
                problems=["this evaluator has no validate-suite command; update the evaluator"]
            )
        try:
            report = json.loads(report_path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            return SuiteCheck(
                problems=[
                    f"validate-suite failed (exit code {completed.returncode}) without a report: "
                    f"{output or 'no output'}"
                ]
            )
    if not isinstance(report, dict) or report.get("schema") != REPORT_SCHEMA:
        return SuiteCheck(
            problems=[f"validate-suite wrote an unexpected report: {str(report)[:300]}"]
        )
    problems = [_line(item) for item in report.get("errors") or []]
    if not report.get("ok") and not problems:
        problems = [f"validate-suite reported the suite invalid (exit code {completed.returncode})"]
    return SuiteCheck(
        problems=problems,
        warnings=[_line(item) for item in report.get("warnings") or []],
        checked=int(report.get("checked") or 0),
    )
