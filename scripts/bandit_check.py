"""Run bandit on the project's packages and fail on any finding not explained in
``security/bandit-accepted.toml``.

Each accepted finding names its file, its bandit test id, a piece of the flagged line (so
that it follows the code when lines move, and a new finding of the same kind in the same
file is not waved through) and the reason it is accepted. ``[skip]`` lists test ids
skipped everywhere, each with its reason. An entry that matches nothing any more is
reported (a warning), so that the file stays true. Every top-level package is scanned
but the tests and the examples.

Usage: python scripts/bandit_check.py [ROOT]   (exit 0: clean or every finding explained)
"""

from __future__ import annotations

import json
import subprocess  # nosec B404 - runs bandit, a fixed command
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ACCEPTED = ROOT / "security" / "bandit-accepted.toml"


# Top-level packages that are not the site's code: the tests (they build hostile inputs on
# purpose, e.g. the exploit corpus) and the example bundles.
NOT_SHIPPED = {"tests", "examples"}


def packages(root: Path) -> list[str]:
    """Every top-level Python package of the repository but ``NOT_SHIPPED``."""
    return sorted(
        path.parent.name
        for path in root.glob("*/__init__.py")
        if path.parent.name not in NOT_SHIPPED
    )


def main(root: Path = ROOT) -> int:
    """Exit status: 0 clean or all explained, 1 unexplained findings, 2 bandit failed."""
    accepted_path = root / ACCEPTED.relative_to(ROOT)
    accepted = tomllib.loads(accepted_path.read_text())
    skips = accepted.get("skip", {})
    entries = accepted.get("finding", [])
    for entry in entries:
        missing = {"file", "test", "code", "reason"} - entry.keys()
        if missing:
            print(f"{accepted_path.name}: an entry lacks {sorted(missing)}: {entry}")
            return 2
    command = [sys.executable, "-m", "bandit", "-q", "-r", "-f", "json", *packages(root)]
    if skips:
        command += ["--skip", ",".join(sorted(skips))]
    run = subprocess.run(command, cwd=root, capture_output=True, text=True)  # nosec B603
    try:
        report = json.loads(run.stdout)
    except json.JSONDecodeError:
        print(f"bandit did not run:\n{run.stdout}\n{run.stderr}")
        return 2
    if report.get("errors"):
        print(f"bandit could not read some files: {report['errors']}")
        return 2
    used: set[int] = set()
    unexplained = []
    for finding in report["results"]:
        flagged = [
            line.split(" ", 1)[-1]
            for line in finding["code"].splitlines()
            if line.split(" ", 1)[0] == str(finding["line_number"])
        ]
        text = flagged[0] if flagged else finding["code"]
        match = next(
            (
                index
                for index, entry in enumerate(entries)
                if entry["file"] == finding["filename"]
                and entry["test"] == finding["test_id"]
                and entry["code"] in text
            ),
            None,
        )
        if match is None:
            unexplained.append((finding, text.strip()))
        else:
            used.add(match)
    for finding, text in unexplained:
        print(
            f"{finding['filename']}:{finding['line_number']}: {finding['test_id']} "
            f"{finding['issue_text']}\n    {text}\n"
            "    fix it, or explain it in security/bandit-accepted.toml "
            "(file, test, code, reason)"
        )
    stale = [entry for index, entry in enumerate(entries) if index not in used]
    for entry in stale:
        print(
            f"security/bandit-accepted.toml: no finding matches any more, remove it: "
            f"{entry['file']} {entry['test']} {entry['code']!r}"
        )
    checked = len(report["results"])
    print(
        f"bandit: {checked} finding(s) in {', '.join(packages(root))}; "
        f"{checked - len(unexplained)} explained, {len(unexplained)} unexplained, "
        f"{len(stale)} stale entr{'y' if len(stale) == 1 else 'ies'}; "
        f"skipped everywhere: {', '.join(sorted(skips)) or 'none'}"
    )
    return 1 if unexplained else 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT))
