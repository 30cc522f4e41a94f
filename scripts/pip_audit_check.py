"""Audit the installed Python environment for known vulnerabilities (pip-audit), with the
accepted ones explained in ``security/pip-audit-accepted.toml``.

pip-audit asks PyPI's vulnerability data over the network, so its answer depends on a
service outside the project and changes when an advisory is published. This check
therefore fails (exit 1) only on a *known vulnerability that nobody has explained*;
when the service cannot be reached, times out, or cannot say anything about a package,
it says so plainly and exits 0, so CI is never made red by the network. ``.ci/run`` runs
it (``make audit``) before the tests; its report is in the CI log.

Usage: python scripts/pip_audit_check.py   (run with the environment's own interpreter)
"""

from __future__ import annotations

import json
import subprocess  # nosec B404 - runs pip-audit, a fixed command
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ACCEPTED = ROOT / "security" / "pip-audit-accepted.toml"
TIMEOUT_S = 300


@dataclass
class Outcome:
    unexplained: list[str] = field(default_factory=list)
    explained: list[str] = field(default_factory=list)
    unaudited: list[str] = field(default_factory=list)
    audited: int = 0
    stale: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        return 1 if self.unexplained else 0


def load_accepted(path: Path = ACCEPTED) -> dict[str, dict]:
    """Vulnerability id -> its entry (package, reason); every entry must give both."""
    entries = tomllib.loads(path.read_text()).get("vulnerability", [])
    accepted = {}
    for entry in entries:
        missing = {"id", "package", "reason"} - entry.keys()
        if missing:
            raise ValueError(f"{path.name}: an entry lacks {sorted(missing)}: {entry}")
        accepted[entry["id"]] = entry
    return accepted


def classify(report: dict, accepted: dict[str, dict]) -> Outcome:
    """Sort pip-audit's JSON report into explained, unexplained and unaudited."""
    outcome = Outcome()
    used = set()
    for dependency in report.get("dependencies", []):
        name, version = dependency["name"], dependency.get("version", "")
        if "skip_reason" in dependency:
            outcome.unaudited.append(f"{name} {version}".strip())
            continue
        outcome.audited += 1
        for vulnerability in dependency.get("vulns", []):
            ids = {vulnerability["id"], *vulnerability.get("aliases", [])}
            fixes = ", ".join(vulnerability.get("fix_versions", [])) or "none yet"
            line = f"{name} {version}: {vulnerability['id']} (fixed in {fixes})"
            known = next((accepted[i] for i in sorted(ids) if i in accepted), None)
            if known is None:
                outcome.unexplained.append(line)
            else:
                used.add(known["id"])
                outcome.explained.append(f"{line}: {known['reason']}")
    outcome.stale = sorted(set(accepted) - used)
    return outcome


def run_pip_audit() -> tuple[dict | None, str]:
    """pip-audit's JSON report of this interpreter's environment, or None and why not."""
    command = [
        sys.executable, "-m", "pip_audit", "--format", "json", "--progress-spinner", "off",
        "--skip-editable",
    ]  # fmt: skip
    try:
        run = subprocess.run(  # nosec B603 - fixed argv
            command, cwd=ROOT, capture_output=True, text=True, timeout=TIMEOUT_S
        )
    except subprocess.TimeoutExpired:
        return None, f"pip-audit did not finish in {TIMEOUT_S} s (network?)"
    try:
        return json.loads(run.stdout), ""
    except json.JSONDecodeError:
        return None, f"pip-audit gave no report (exit {run.returncode}): {run.stderr[-1500:]}"


def report_lines(outcome: Outcome) -> list[str]:
    lines = [f"UNEXPLAINED: {line}" for line in outcome.unexplained]
    lines += [f"explained: {line}" for line in outcome.explained]
    if outcome.unaudited:
        lines.append(
            f"warning: {len(outcome.unaudited)} package(s) could not be audited (the "
            f"vulnerability service had no answer for them): {', '.join(outcome.unaudited)}"
        )
    lines += [
        f"warning: security/pip-audit-accepted.toml lists {vid}, which no installed package "
        "has any more: remove it"
        for vid in outcome.stale
    ]
    lines.append(
        f"pip-audit: {outcome.audited} package(s) audited, {len(outcome.unaudited)} not; "
        f"{len(outcome.unexplained)} unexplained and {len(outcome.explained)} explained "
        "vulnerabilit(ies)"
    )
    if outcome.unexplained:
        lines.append(
            "upgrade the package, or explain why it does not apply in "
            "security/pip-audit-accepted.toml (id, package, reason)"
        )
    return lines


def main() -> int:
    accepted = load_accepted()
    report, problem = run_pip_audit()
    if report is None:
        print(f"warning: no audit this time: {problem}")
        return 0
    outcome = classify(report, accepted)
    print("\n".join(report_lines(outcome)))
    return outcome.exit_code


if __name__ == "__main__":
    sys.exit(main())
