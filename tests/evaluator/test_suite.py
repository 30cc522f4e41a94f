"""Suites: the shipped files, content hashing, tamper refusal, restriction, validation."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from evaluator.errors import PlatformError, UnknownOperatorError, UnknownSuiteError, UserError
from evaluator.suite import (
    SUITES_DIR,
    OperatorEntry,
    ShapeSpec,
    Suite,
    canonical_json,
    list_suites,
    load_suite,
)
from scripts.build_suite import SMOKE_SHAPES, SMOKE_SOURCE, smoke_shapes
from tests.release import require_release

REPO = Path(__file__).resolve().parents[2]


def _shape(
    operator: str, shape_id: str, *, weight: float = 1.0, smoke: bool = True, q: int = 100
) -> ShapeSpec:
    return ShapeSpec(
        operator=operator,
        shape_id=shape_id,
        init_kwargs={},
        input_kwargs={"n": int(shape_id)},
        weight=weight,
        w_flops={"bf16": 10},
        q_read=q,
        q_write=q,
        smoke=smoke,
    )


def _entry(slug: str, importance: float, raw: float | None = None) -> OperatorEntry:
    return OperatorEntry(
        slug=slug,
        atrex_id=f"atrex_{slug}",
        importance=importance,
        importance_raw=importance if raw is None else raw,
        dtype="bf16",
        phase="both",
    )


@pytest.fixture
def small_suite() -> Suite:
    return Suite(
        name="tiny",
        version="v1",
        description="A test suite.",
        operators=(_entry("a", 0.6, 0.03), _entry("b", 0.3, 0.015), _entry("c", 0.1, 0.005)),
        shapes=(
            _shape("a", "0"),
            _shape("a", "1", smoke=False, weight=2.0),
            _shape("b", "0"),
            _shape("c", "0"),
        ),
    )


# --- the shipped suite files ---------------------------------------------------------


def test_both_shipped_suites_are_listed():
    assert {"atrex-bench-v0.1", "atrex-bench-v1"} <= set(list_suites())


def test_preview_suite_holds_the_three_foundation_operators():
    suite = load_suite("atrex-bench-v0.1")
    assert suite.slug == "atrex-bench-v0.1"
    assert sorted(suite.operator_slugs()) == ["fused_add_rms_norm", "rms_norm", "silu_and_mul"]
    assert sum(len(suite.shapes_for(op)) for op in suite.operator_slugs()) == 56 + 37 + 19
    assert sum(e.importance for e in suite.operators) == pytest.approx(1.0, abs=1e-12)
    raw_total = 0.027508 + 0.017601 + 0.011487
    assert suite.operator("rms_norm").importance == pytest.approx(0.027508 / raw_total)
    assert suite.operator("rms_norm").importance_raw == 0.027508
    assert "arXiv:2607.14541" in suite.description
    assert "rms_norm" in suite.description and "subset" in suite.description.lower()


def test_full_suite_holds_all_440_published_shapes():
    suite = load_suite("atrex-bench-v1")
    assert len(suite.operators) == 30
    full = [shape for op in suite.operator_slugs() for shape in suite.shapes_for(op, "full")]
    assert len(full) == 440
    assert all(shape.from_release and not shape.smoke for shape in full)
    assert suite.operator("unified_attention").importance == pytest.approx(0.394972 / 1.09478)
    assert "arXiv:2607.14541" in suite.description


def test_each_operator_has_two_or_three_synthetic_smoke_shapes_outside_the_full_set():
    suite = load_suite("atrex-bench-v1")
    for slug in suite.operator_slugs():
        full = suite.shapes_for(slug)
        smoke = suite.shapes_for(slug, "smoke")
        assert 2 <= len(smoke) <= 3, slug
        assert all(shape.smoke and shape.source == SMOKE_SOURCE for shape in smoke)
        assert not any(shape.smoke for shape in full)
        assert {s.shape_id for s in full}.isdisjoint(s.shape_id for s in smoke)


def test_preview_smoke_shapes_are_small():
    suite = load_suite("atrex-bench-v0.1")
    smoke = [s for op in suite.operator_slugs() for s in suite.shapes_for(op, "smoke")]
    assert len(smoke) == 9
    assert max(shape.q_total for shape in smoke) < 1024 * 1024


def test_shipped_shapes_match_the_release_exactly():
    data_dir = require_release()
    suite = load_suite("atrex-bench-v1")
    for slug in suite.operator_slugs():
        published = json.loads((data_dir / slug / "shapes.json").read_text())
        assert {s.shape_id for s in suite.shapes_for(slug)} == set(published)
    for shape in (s for s in suite.shapes if not s.smoke):
        folder = data_dir / shape.operator
        published = json.loads((folder / "shapes.json").read_text())[shape.shape_id]
        work = json.loads((folder / "roofline.json").read_text())["shapes"][shape.shape_id]
        assert shape.init_kwargs == (published["init_kwargs"] or {})
        assert shape.input_kwargs == published["input_kwargs"]
        assert shape.w_flops == work["semantic_W_flops"]
        assert (shape.q_read, shape.q_write) == (
            work["semantic_Q_read_bytes"],
            work["semantic_Q_write_bytes"],
        )
        assert shape.weight == 1.0 and shape.visibility == "public"
        assert shape.source == "atrex-bench release eb8697d5 (Apache-2.0)"


@pytest.mark.parametrize(
    "name, extra",
    [
        (
            "atrex-bench-v0.1",
            ["--operators", "rms_norm,silu_and_mul,fused_add_rms_norm", "--version", "v0.1"],
        ),
        ("atrex-bench-v1", []),
    ],
)
def test_shipped_files_are_reproduced_by_the_build_script(tmp_path, name, extra):
    data_dir = require_release()
    out = tmp_path / f"{name}.json"
    subprocess.run(
        [
            sys.executable,
            str(REPO / "scripts" / "build_suite.py"),
            "--data",
            str(data_dir),
            "--out",
            str(out),
            *extra,
        ],
        check=True,
        capture_output=True,
        cwd=tmp_path,
    )
    assert out.read_bytes() == (SUITES_DIR / f"{name}.json").read_bytes()


# --- loading, hashing, tampering -----------------------------------------------------


def test_content_hash_is_sha256_of_canonical_json_without_the_hash(small_suite):
    data = small_suite.to_dict()
    stored = data.pop("content_hash")
    import hashlib

    expected = "sha256:" + hashlib.sha256(canonical_json(data).encode()).hexdigest()
    assert stored == expected == small_suite.content_hash
    assert data["format"] == "atrex-suite/1"


def test_hash_survives_a_round_trip_and_changes_with_content(small_suite):
    again = Suite.from_dict(json.loads(small_suite.to_json()))
    assert again == small_suite
    assert again.content_hash == small_suite.content_hash
    heavier = replace(
        small_suite, shapes=(replace(small_suite.shapes[0], weight=3.0), *small_suite.shapes[1:])
    )
    assert heavier.content_hash != small_suite.content_hash


def test_load_by_path_and_by_name_give_the_same_suite(tmp_path, small_suite):
    path = tmp_path / "mine.json"
    path.write_text(small_suite.to_json())
    assert load_suite(str(path)) == small_suite
    shipped = load_suite("atrex-bench-v0.1")
    assert load_suite(str(SUITES_DIR / "atrex-bench-v0.1.json")) == shipped


def test_unknown_suite_error_lists_the_available_ones():
    with pytest.raises(UnknownSuiteError) as excinfo:
        load_suite("atrex-bench-v9")
    assert "atrex-bench-v0.1" in excinfo.value.message
    assert "atrex-bench-v1" in excinfo.value.message
    with pytest.raises(UnknownSuiteError):
        load_suite("/nonexistent/suite.json")


def test_a_tampered_suite_file_is_refused(tmp_path):
    data = json.loads((SUITES_DIR / "atrex-bench-v0.1.json").read_text())
    data["shapes"][0]["weight"] = 50.0  # quietly favour one shape, keep the old hash
    path = tmp_path / "tampered.json"
    path.write_text(json.dumps(data))
    with pytest.raises(PlatformError) as excinfo:
        load_suite(str(path))
    assert excinfo.value.code == "platform:suite-hash-mismatch"


def test_a_suite_file_without_a_hash_is_refused(tmp_path, small_suite):
    data = small_suite.to_dict()
    del data["content_hash"]
    path = tmp_path / "unsealed.json"
    path.write_text(json.dumps(data))
    with pytest.raises(PlatformError, match="content_hash"):
        load_suite(str(path))


def test_a_file_of_another_format_is_refused(tmp_path, small_suite):
    data = {**small_suite.to_dict(), "format": "atrex-suite/2"}
    with pytest.raises(UserError, match="atrex-suite/2"):
        Suite.from_dict(data)


# --- queries and restriction ---------------------------------------------------------


def test_shapes_for_full_and_smoke_are_disjoint(small_suite):
    assert [s.shape_id for s in small_suite.shapes_for("a")] == ["1"]
    assert [s.shape_id for s in small_suite.shapes_for("a", "full")] == ["1"]
    assert [s.shape_id for s in small_suite.shapes_for("a", "smoke")] == ["0"]
    assert small_suite.shapes_for("b") == []
    with pytest.raises(UnknownOperatorError):
        small_suite.shapes_for("z")
    with pytest.raises(UserError, match="tiny"):
        small_suite.shapes_for("a", "tiny")


def test_unknown_operator_error_lists_the_suites_operators(small_suite):
    with pytest.raises(UnknownOperatorError) as excinfo:
        small_suite.operator("rms_norm")
    assert "rms_norm" in excinfo.value.message and "a, b, c" in excinfo.value.message


def test_restrict_keeps_operators_and_renormalises_importance(small_suite):
    restricted = small_suite.restrict(["c", "a"])
    assert restricted.operator_slugs() == ["a", "c"]
    assert restricted.operator("a").importance == pytest.approx(0.6 / 0.7)
    assert restricted.operator("c").importance == pytest.approx(0.1 / 0.7)
    assert restricted.operator("a").importance_raw == 0.03
    assert {s.operator for s in restricted.shapes} == {"a", "c"}
    restricted.validate()
    assert restricted.content_hash != small_suite.content_hash


def test_restrict_refuses_an_operator_not_in_the_suite(small_suite):
    with pytest.raises(UnknownOperatorError, match="rms_norm"):
        small_suite.restrict(["a", "rms_norm"])


# --- validation ----------------------------------------------------------------------


def _with_shapes(suite: Suite, *shapes: ShapeSpec) -> Suite:
    return replace(suite, shapes=shapes)


@pytest.mark.parametrize(
    "broken, fragment",
    [
        (lambda s: _with_shapes(s, *s.shapes, _shape("z", "0")), "z/0"),
        (lambda s: _with_shapes(s, *s.shapes, _shape("a", "0")), "a/0"),
        (lambda s: _with_shapes(s, _shape("a", "1", weight=-1.0), *s.shapes[2:]), "a/1"),
        (lambda s: _with_shapes(s, s.shapes[0], *s.shapes[2:3]), "'c' has no smoke"),
        (
            lambda s: replace(s, operators=(_entry("a", 0.6), _entry("b", 0.3), _entry("c", 0.2))),
            "sums to",
        ),
        (
            lambda s: replace(s, operators=(_entry("a", 1.1), _entry("b", -0.2), _entry("c", 0.1))),
            "'b'",
        ),
        (
            lambda s: _with_shapes(s, *s.shapes[:3], replace(s.shapes[3], visibility="secret")),
            "c/0",
        ),
        (
            lambda s: _with_shapes(s, *s.shapes[:3], replace(s.shapes[3], w_flops={"int4": 5})),
            "int4",
        ),
        (lambda s: _with_shapes(s, *s.shapes[:3], replace(s.shapes[3], q_read=-1)), "q_read"),
        (lambda s: replace(s, threshold_own_share=1.5), "threshold_own_share"),
    ],
)
def test_validate_says_what_is_wrong(small_suite, broken, fragment):
    small_suite.validate()
    with pytest.raises(UserError) as excinfo:
        broken(small_suite).validate()
    assert fragment in excinfo.value.message


def test_problems_lists_every_broken_invariant_with_operator_and_shape(small_suite):
    assert small_suite.problems() == []
    broken = _with_shapes(
        replace(small_suite, threshold_own_share=2.0),
        _shape("a", "0", weight=-1.0),
        replace(_shape("a", "1", smoke=False), q_write=-3),
        _shape("b", "0"),
        _shape("c", "0", smoke=False),
    )
    found = [(p.operator, p.shape_id) for p in broken.problems()]
    assert found == [(None, None), ("a", "0"), ("a", "1"), ("c", None)]
    with pytest.raises(UserError, match="threshold_own_share"):
        broken.validate()


# --- the build script's smoke table --------------------------------------------------


def test_the_smoke_table_covers_every_built_in_operator():
    from evaluator.operators import OPERATORS

    assert sorted(SMOKE_SHAPES) == sorted(OPERATORS)
    assert all(2 <= len(shapes) <= 3 for shapes in SMOKE_SHAPES.values())
    assert all(smoke.exercises for shapes in SMOKE_SHAPES.values() for smoke in shapes)


def test_smoke_shapes_take_their_work_from_the_work_model():
    shapes = smoke_shapes("rms_norm")
    assert [s.shape_id for s in shapes] == ["smoke-0", "smoke-1", "smoke-2"]
    first = shapes[0]
    tokens, hidden = first.input_kwargs["token_count"], first.input_kwargs["hidden_size"]
    assert first.w_flops == {"bf16": 3 * tokens * hidden + tokens}
    assert (first.q_read, first.q_write) == (2 * tokens * hidden + 2 * hidden, 2 * tokens * hidden)
    assert first.smoke and first.weight == 1.0 and first.visibility == "public"
