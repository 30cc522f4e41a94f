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
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from evaluator.launch import LaunchTimeout, run_evaluator_command, scratch_folder

REPORT_SCHEMA = "atrex-suite-validation/1"
VALIDATE_TIMEOUT_S = 600


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
    """Validate ``definition`` with ``python -m evaluator validate-suite`` (a child process,
    started by ``evaluator.launch``)."""
    with scratch_folder("validate") as scratch:
        suite_path = scratch / "suite.json"
        report_path = scratch / "report.json"
        suite_path.write_text(json.dumps(definition), encoding="utf-8")
        try:
            completed = run_evaluator_command(
                "validate-suite",
                [str(suite_path), "--out", str(report_path)],
                scratch=scratch,
                timeout_s=timeout_s,
                python=settings.ATREX.get("EVALUATOR_PYTHON") or "",
            )
        except LaunchTimeout:
            return SuiteCheck(problems=[f"validate-suite did not finish within {timeout_s:.0f} s"])
        output = completed.output_tail()
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
