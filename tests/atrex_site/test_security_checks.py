"""The security checks fail on what nobody explained and pass on what is explained:
bandit (`make test` runs scripts/bandit_check.py on the site's code before pytest) and
pip-audit (`make audit`, from .ci/run)."""

from __future__ import annotations

import importlib.util
import sys
import textwrap

import pytest

from tests.release import REPO_ROOT


def _script(name: str):
    spec = importlib.util.spec_from_file_location(name, REPO_ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def bandit_check():
    return _script("bandit_check")


@pytest.fixture
def pip_audit_check():
    return _script("pip_audit_check")


def _project(tmp_path, accepted: str):
    (tmp_path / "security").mkdir()
    (tmp_path / "security" / "bandit-accepted.toml").write_text(textwrap.dedent(accepted))
    package = tmp_path / "webapp"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "run.py").write_text(
        "import subprocess\n\n\ndef run(name):\n"
        "    return subprocess.call('ls ' + name, shell=True)\n"
    )
    # The tests and examples are not scanned (they hold hostile code on purpose).
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "__init__.py").write_text("eval(input())\n")
    return tmp_path


def test_bandit_check_fails_on_an_unexplained_finding(bandit_check, tmp_path, capsys):
    root = _project(tmp_path, '[skip]\nB404 = "imports are not calls"\n')
    assert bandit_check.main(root) == 1
    out = capsys.readouterr().out
    assert "webapp/run.py:5: B602" in out and "1 unexplained" in out
    assert "tests/" not in out


def test_bandit_check_passes_an_explained_finding(bandit_check, tmp_path, capsys):
    root = _project(
        tmp_path,
        """
        [skip]
        B404 = "imports are not calls"

        [[finding]]
        file = "webapp/run.py"
        test = "B602"
        code = "subprocess.call('ls '"
        reason = "a test of the checker"
        """,
    )
    assert bandit_check.main(root) == 0
    assert "1 explained, 0 unexplained" in capsys.readouterr().out


def _report(*dependencies):
    return {"dependencies": list(dependencies), "fixes": []}


VULNERABLE = {
    "name": "django",
    "version": "5.2.0",
    "vulns": [
        {"id": "PYSEC-2099-1", "fix_versions": ["5.2.1"], "aliases": ["CVE-2099-1"]},
    ],
}


def test_pip_audit_check_fails_on_an_unexplained_vulnerability(pip_audit_check):
    outcome = pip_audit_check.classify(_report(VULNERABLE), {})
    assert outcome.exit_code == 1
    assert outcome.unexplained == ["django 5.2.0: PYSEC-2099-1 (fixed in 5.2.1)"]
    assert any("UNEXPLAINED" in line for line in pip_audit_check.report_lines(outcome))


def test_pip_audit_check_accepts_an_explained_vulnerability_by_any_alias(pip_audit_check):
    accepted = {"CVE-2099-1": {"id": "CVE-2099-1", "package": "django", "reason": "unused"}}
    outcome = pip_audit_check.classify(_report(VULNERABLE), accepted)
    assert outcome.exit_code == 0 and outcome.explained and not outcome.stale


def test_pip_audit_check_only_warns_when_the_service_cannot_answer(pip_audit_check):
    unknown = {"name": "celery", "skip_reason": "Dependency not found on PyPI"}
    outcome = pip_audit_check.classify(_report(unknown), {})
    assert outcome.exit_code == 0 and outcome.unaudited == ["celery"]
    assert "could not be audited" in "\n".join(pip_audit_check.report_lines(outcome))


def test_the_accepted_vulnerabilities_file_is_well_formed(pip_audit_check):
    for entry in pip_audit_check.load_accepted().values():
        assert entry["reason"].strip()
