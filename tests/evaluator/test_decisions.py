"""docs/decisions.md and what cites it: numbered as the release's decisions, cited by number,
and every operator module states its departures from upstream."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

from evaluator.operators import OPERATOR_MODULES
from evaluator.suite import load_suite
from tests.release import RELEASE_DIR, require_release

REPO_ROOT = Path(__file__).resolve().parents[2]
DECISIONS = REPO_ROOT / "docs" / "decisions.md"
CITED_FILE = "docs/decisions.md"

# An item of a numbered list of decisions: "3. **Saturating casts.** ...".
ITEM = re.compile(r"^(\d+)\. \*\*([^*]+?)\*\*", re.MULTILINE)  # a title may wrap
# A citation by number of any decisions file: "docs/decisions.md 6", "``x/DECISIONS.md`` 2, 3",
# "DECISIONS.md 2-3", "docs/decisions.md 2 and 3" (possibly across a line break).
CITATION = re.compile(r"(?i)([\w./-]*decisions\.md)`*\s+(\d+(?:\s*(?:,|and|-|–)\s*\d+)*)")


def _items(text: str) -> dict[int, str]:
    return {int(number): title for number, title in ITEM.findall(text)}


def _subject(title: str) -> str:
    """An item's subject: the first word of its title ('FP8 format.' and 'fp8 format' agree)."""
    return title.split()[0].strip(".,:;").lower()


def _cited_numbers(numbers: str) -> list[int]:
    cited: list[int] = []
    for part in re.split(r"\s*(?:,|and)\s*", numbers):
        bounds = re.split(r"\s*[-–]\s*", part)  # "2-3" is 2 and 3
        cited.extend(range(int(bounds[0]), int(bounds[-1]) + 1))
    return cited


def _citing_files() -> list[Path]:
    return [
        *sorted((REPO_ROOT / "evaluator").rglob("*.py")),
        *sorted((REPO_ROOT / "docs").glob("*.md")),
        REPO_ROOT / "README.md",
    ]


def test_every_suite_operator_module_states_its_departures_from_upstream():
    suite_operators = {entry.slug for entry in load_suite("atrex-bench-v1").operators}
    assert len(suite_operators) == 30
    assert suite_operators == set(OPERATOR_MODULES)
    missing = sorted(
        name
        for name in OPERATOR_MODULES
        if "Departures from upstream"
        not in (importlib.import_module(f"evaluator.operators.{name}").__doc__ or "")
    )
    assert missing == [], f"no 'Departures from upstream' section in the docstring of {missing}"


def test_decisions_are_numbered_one_to_n():
    numbers = list(_items(DECISIONS.read_text()))
    assert numbers == list(range(1, len(numbers) + 1))
    assert len(numbers) >= 9


def test_decisions_one_to_nine_are_the_releases_items_on_the_same_subjects():
    require_release()
    release = _items((RELEASE_DIR / "DECISIONS.md").read_text())
    portal = _items(DECISIONS.read_text())
    assert sorted(release) == list(range(1, 10))
    assert {n: _subject(portal[n]) for n in release} == {
        n: _subject(title) for n, title in release.items()
    }


def test_every_decision_citation_names_docs_decisions_md_and_an_item_it_has():
    items = _items(DECISIONS.read_text())
    wrong: list[str] = []
    found = 0
    for path in _citing_files():
        text = path.read_text()
        for match in CITATION.finditer(text):
            found += 1
            where = f"{path.relative_to(REPO_ROOT)}:{text.count(chr(10), 0, match.start()) + 1}"
            if match.group(1) != CITED_FILE:
                wrong.append(f"{where} cites {match.group(0)!r}, not {CITED_FILE} N")
            missing = [n for n in _cited_numbers(match.group(2)) if n not in items]
            if missing:
                wrong.append(f"{where} cites item(s) {missing}, which {CITED_FILE} lacks")
    assert found >= 10  # the pattern still finds the citations the code makes
    assert wrong == []


def test_the_citation_check_catches_the_forms_it_must():
    found = [
        (m.group(1), _cited_numbers(m.group(2)))
        for m in CITATION.finditer(
            "(``atrex-bench/DECISIONS.md`` 2, 3) and docs/decisions.md 2 and 3; "
            "DECISIONS.md 2-3. docs/decisions.md\n   10) but not decisions.md (departures)"
        )
    ]
    assert found == [
        ("atrex-bench/DECISIONS.md", [2, 3]),
        ("docs/decisions.md", [2, 3]),
        ("DECISIONS.md", [2, 3]),
        ("docs/decisions.md", [10]),
    ]
