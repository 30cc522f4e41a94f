"""Curation: drafts, edits, diff, publish (with the evaluator's validate-suite), immutability."""

from __future__ import annotations

import pytest
from django.utils import timezone

from catalogue import services
from catalogue.models import HardwareProfile, Shape, SuiteVersion
from submissions.models import Score

pytestmark = pytest.mark.django_db


@pytest.fixture
def draft(catalogue):
    return services.suite_version_draft_create(from_version=catalogue, version_label="v0.2")


def _snapshot(version: SuiteVersion) -> tuple:
    version.refresh_from_db()
    shapes = list(
        version.shapes.order_by("pk").values_list(
            "shape_id", "weight", "visibility", "enabled", "input_kwargs", "w_flops"
        )
    )
    operators = list(
        version.suite_operators.order_by("pk").values_list("importance", "enabled", "description")
    )
    return version.status, version.content_hash, version.definition, shapes, operators


def test_draft_copies_operators_shapes_and_weights(catalogue, draft):
    assert draft.status == SuiteVersion.Status.DRAFT and draft.parent == catalogue
    assert draft.shapes.count() == catalogue.shapes.count()
    assert sorted(draft.suite_operators.values_list("operator__slug", "importance")) == sorted(
        catalogue.suite_operators.values_list("operator__slug", "importance")
    )
    assert services.suite_version_diff(draft=draft, against=catalogue)["summary"] == {
        "operators_added": 0,
        "operators_removed": 0,
        "operators_changed": 0,
        "shapes_added": 0,
        "shapes_removed": 0,
        "shapes_changed": 0,
        "weights_changed": 0,
    }


def test_editing_a_draft_never_touches_the_published_version_or_its_scores(
    catalogue, draft, user, example_zip
):
    from submissions.services import submission_create

    # The example also covers operators beyond the three of the v0.1 catalogue used here.
    v01_files = ["rms_norm.py", "silu_and_mul.py", "fused_add_rms_norm.py", "atrex.toml"]
    submission = submission_create(
        owner=user, upload=example_zip("triton-baseline", only=v01_files)
    )
    score = Score.objects.create(
        submission=submission,
        run=submission.runs.get(),
        suite_version=catalogue,
        hardware=HardwareProfile.objects.get(slug="cpu-dev"),
        aggregate=0.25,
        apparent_pass_rate=1.0,
        real_pass_rate=1.0,
        fallback_rate=0.0,
        operator_scores={"rms_norm": 0.3},
        published_at=timezone.now(),
    )
    before = _snapshot(catalogue)
    shape = draft.shapes.get(operator__slug="rms_norm", shape_id="0")
    services.shape_update(shape=shape, weight=3.0, visibility="hidden", enabled=False)
    services.operator_update(
        suite_operator=draft.suite_operators.get(operator__slug="silu_and_mul"),
        importance=0.9,
        description="changed",
    )
    services.shape_delete(shape=draft.shapes.get(operator__slug="rms_norm", shape_id="1"))
    assert _snapshot(catalogue) == before
    score.refresh_from_db()
    assert (score.suite_version_id, score.aggregate, score.operator_scores) == (
        catalogue.pk,
        0.25,
        {"rms_norm": 0.3},
    )


def test_published_version_refuses_every_edit(catalogue):
    before = _snapshot(catalogue)
    shape = catalogue.shapes.first()
    with pytest.raises(services.SuiteVersionImmutableError, match="published and immutable"):
        services.shape_update(shape=shape, weight=2.0)
    with pytest.raises(services.SuiteVersionImmutableError):
        services.operator_update(suite_operator=catalogue.suite_operators.first(), enabled=False)
    with pytest.raises(services.SuiteVersionImmutableError):
        services.shape_add(
            draft=catalogue,
            operator="rms_norm",
            shape_id="99",
            input_kwargs={"token_count": 1, "hidden_size": 8},
            w_flops={"bf16": 1},
            q_read=1,
            q_write=1,
        )
    with pytest.raises(services.SuiteVersionImmutableError):
        services.shape_delete(shape=shape)
    with pytest.raises(services.SuiteVersionImmutableError):
        services.suite_version_publish(draft=catalogue, actor=None)
    assert _snapshot(catalogue) == before


def test_bad_shape_input_is_refused_with_the_reason(draft):
    shape = draft.shapes.get(operator__slug="rms_norm", shape_id="0")
    with pytest.raises(services.CurationError) as caught:
        services.shape_update(shape=shape, weight=-0.5)
    assert "weight -0.5 must be a finite number >= 0" in caught.value.problems
    with pytest.raises(services.CurationError) as caught:
        services.shape_add(
            draft=draft,
            operator="rms_norm",
            shape_id="new",
            input_kwargs={"token_count": 4, "hidden_size": 64},
            w_flops=None,
            q_read=None,
            q_write=None,
        )
    assert "W (w_flops) and Q (q_read, q_write) are required" in caught.value.problems
    shape.refresh_from_db()
    assert shape.weight == 1.0 and not draft.shapes.filter(shape_id="new").exists()


def test_diff_lists_field_level_changes_and_added_removed(catalogue, draft):
    services.shape_update(
        shape=draft.shapes.get(operator__slug="rms_norm", shape_id="0"), weight=2.5
    )
    services.shape_update(
        shape=draft.shapes.get(operator__slug="rms_norm", shape_id="1"), enabled=False
    )
    services.shape_add(
        draft=draft,
        operator="rms_norm",
        shape_id="100",
        init_kwargs={"eps": 1e-6},
        input_kwargs={"token_count": 8, "hidden_size": 256},
        w_flops={"bf16": 8 * 256 * 4},
        q_read=2 * 8 * 256 + 2 * 256,
        q_write=2 * 8 * 256,
    )
    services.operator_update(
        suite_operator=draft.suite_operators.get(operator__slug="silu_and_mul"), enabled=False
    )
    diff = services.suite_version_diff(draft=draft, against=catalogue)
    changed = {(c["operator"], c["shape_id"]): c["changes"] for c in diff["shapes"]["changed"]}
    assert changed[("rms_norm", "0")] == {"weight": [1.0, 2.5]}
    assert {"operator": "rms_norm", "shape_id": "1"} in diff["shapes"]["removed"]
    assert diff["shapes"]["added"] == [{"operator": "rms_norm", "shape_id": "100"}]
    assert diff["operators"]["removed"] == ["silu_and_mul"]
    importance = {c["operator"]: c["changes"]["importance"] for c in diff["operators"]["changed"]}
    assert set(importance) == {"rms_norm", "fused_add_rms_norm"}
    assert sum(new for _, new in importance.values()) == pytest.approx(1.0)


@pytest.mark.slow
def test_publish_freezes_the_rebuilt_definition(catalogue, draft, user):
    services.shape_update(
        shape=draft.shapes.get(operator__slug="rms_norm", shape_id="0"), weight=4.0
    )
    services.shape_update(
        shape=draft.shapes.get(operator__slug="rms_norm", shape_id="2"), enabled=False
    )
    services.operator_update(
        suite_operator=draft.suite_operators.get(operator__slug="silu_and_mul"), importance=2.0
    )
    published = services.suite_version_publish(draft=draft, actor=user)
    assert published.status == "published" and published.published_by == user
    from evaluator.suite import Suite

    suite = Suite.from_dict(published.definition)  # checks the content hash, too
    assert published.content_hash == suite.content_hash
    shapes = {(s.operator, s.shape_id): s for s in suite.shapes}
    assert shapes[("rms_norm", "0")].weight == 4.0
    assert ("rms_norm", "2") not in shapes  # disabled: left out
    assert sum(suite.importance().values()) == pytest.approx(1.0, abs=1e-12)
    assert suite.importance()["silu_and_mul"] > 0.5
    with pytest.raises(services.SuiteVersionImmutableError):
        services.shape_update(
            shape=published.shapes.get(operator__slug="rms_norm", shape_id="0"), weight=1.0
        )


@pytest.mark.slow
def test_publish_refuses_kwargs_the_reference_rejects(catalogue, draft):
    before = _snapshot(catalogue)
    shape = draft.shapes.get(operator__slug="rms_norm", shape_id="0")
    services.shape_update(shape=shape, init_kwargs={"eps": 1e-6, "no_such_argument": 3})
    with pytest.raises(services.CurationError) as caught:
        services.suite_version_publish(draft=draft, actor=None)
    assert "cannot be published" in caught.value.message
    assert any("rms_norm/0" in p and "no_such_argument" in p for p in caught.value.problems), (
        caught.value.problems
    )
    draft.refresh_from_db()
    assert draft.status == "draft" and draft.content_hash.startswith("draft:")
    assert _snapshot(catalogue) == before


def test_hardware_profile_is_editable_with_checks(catalogue):
    profile = HardwareProfile.objects.get(slug="h200-sxm")
    services.hardware_profile_update(
        profile=profile, hbm_bytes_per_s=4.27e12, source="measured: D2D copy, 2026-11-29"
    )
    profile.refresh_from_db()
    assert profile.hbm_bytes_per_s == 4.27e12
    with pytest.raises(services.CurationError) as caught:
        services.hardware_profile_update(profile=profile, peak_flops={"bf16_tc": -1, "fp99": 1})
    assert len(caught.value.problems) == 2


def test_shape_row_ordering_is_stable_for_numeric_ids(draft):
    ids = [s.shape_id for s in services.suite_version_build(version=draft)[0].shapes]
    assert len(ids) == Shape.objects.filter(suite_version=draft, enabled=True).count()


@pytest.mark.slow
def test_the_validation_child_runs_outside_any_transaction(catalogue, draft, monkeypatch):
    """On SQLite a write transaction locks the whole database: the worker's heartbeats and
    the reaper must not wait for the seconds the evaluator's validate-suite takes."""
    from django.db import connection

    seen = []
    real_check = services.suite_definition_check

    def watched(*, definition):
        seen.append(len(connection.atomic_blocks))
        return real_check(definition=definition)

    monkeypatch.setattr(services, "suite_definition_check", watched)
    depth = len(connection.atomic_blocks)  # the test's own transaction, if any
    published = services.suite_version_publish(draft=draft, actor=None)
    assert published.status == "published"
    assert seen == [depth]  # publish opened no transaction around the check


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_draft_edited_while_it_is_checked_is_not_published(catalogue, monkeypatch):
    draft = services.suite_version_draft_create(from_version=catalogue, version_label="v0.3")
    real_check = services.suite_definition_check

    def edit_meanwhile(*, definition):
        result = real_check(definition=definition)
        services.shape_update(
            shape=draft.shapes.get(operator__slug="rms_norm", shape_id="0"), weight=7.0
        )
        return result

    monkeypatch.setattr(services, "suite_definition_check", edit_meanwhile)
    with pytest.raises(services.CurationError) as caught:
        services.suite_version_publish(draft=draft, actor=None)
    assert "was edited while it was being checked" in caught.value.message
    draft.refresh_from_db()
    assert draft.status == "draft"
