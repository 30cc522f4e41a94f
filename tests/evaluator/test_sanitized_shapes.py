"""Which operators the compute-sanitizer pass checks (``evaluator.runner.sanitized_shapes``):
those that passed at least one shape, on their smallest shape, where that shape passed or
fell back. An operator that passed nothing scores 0 whatever the tool finds."""

from __future__ import annotations

from evaluator.runner import sanitized_shapes
from evaluator.suite import ShapeSpec


def _shape(operator: str, shape_id: str, q_bytes: int) -> ShapeSpec:
    return ShapeSpec(
        operator=operator, shape_id=shape_id, init_kwargs={}, input_kwargs={}, weight=1.0,
        w_flops={}, q_read=q_bytes, q_write=0,
    )  # fmt: skip


def _entry(operator: str, **statuses: str) -> dict:
    return {
        "operator": operator,
        "shapes": [{"shape_id": sid.lstrip("s"), "status": st} for sid, st in statuses.items()],
    }


SHAPES = {op: [_shape(op, "0", 100), _shape(op, "1", 10)] for op in "abcdef"}


def test_an_operator_that_passed_a_shape_is_sanitized_on_its_smallest_shape() -> None:
    entries = [
        _entry("a", s0="pass", s1="pass"),
        # Its smallest shape fell back, a larger one passed: it can score, so it is checked.
        _entry("b", s0="pass", s1="fallback"),
    ]
    chosen = sanitized_shapes(["a", "b"], SHAPES, entries)
    assert {op: shape.shape_id for op, shape in chosen.items()} == {"a": "1", "b": "1"}


def test_an_operator_that_passed_no_shape_is_not_sanitized() -> None:
    entries = [
        _entry("c", s0="fallback", s1="fallback"),  # a PyTorch fallback throughout
        _entry("d", s0="incorrect", s1="fallback"),
        _entry("e", s0="pass", s1="runtime_error"),  # its smallest shape failed loudly
    ]
    # "f" has no entry at all (its child never reported).
    assert sanitized_shapes(["c", "d", "e", "f"], SHAPES, entries) == {}
