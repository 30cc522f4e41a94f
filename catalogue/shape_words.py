"""A shape's arguments as people read them: ``T=2500 H=1024 eps=0.000001``.

Pure functions over a suite file's shape records (``init_kwargs`` and ``input_kwargs``); the
submission page shows them beside each shape's result so that a shape is more than an index.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

# The arguments every reader of an LLM-inference trace knows by a letter; the page keeps
# the full name in the abbreviation's title. Everything else is shown by its own name.
SHORT_NAMES = {
    "token_count": "T",
    "num_tokens": "T",
    "total_tokens": "T",
    "hidden_size": "H",
}
LIST_SHOWN = 4
"""A list argument longer than this is summarised (``[256 × 130]``, ``[1, 2, …, 9] (12)``)."""


@dataclass(frozen=True)
class ShapeArgument:
    name: str
    label: str
    value: str

    @property
    def abbreviated(self) -> bool:
        return self.label != self.name


def argument_text(value: Any) -> str:
    """One argument's value in plain words: numbers without e-notation, long lists
    summarised."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            return str(value)
        text = format(Decimal(repr(value)), "f")
        return text.rstrip("0").rstrip(".") if "." in text else text
    if isinstance(value, list | tuple):
        items = [argument_text(item) for item in value]
        if len(items) <= LIST_SHOWN:
            return "[" + ", ".join(items) + "]"
        if len(set(items)) == 1:
            return f"[{items[0]} × {len(items)}]"
        return f"[{items[0]}, {items[1]}, …, {items[-1]}] ({len(items)} values)"
    if value is None:
        return "none"
    return str(value)


def shape_arguments(
    *, init_kwargs: Mapping[str, Any], input_kwargs: Mapping[str, Any]
) -> list[ShapeArgument]:
    """The shape's input arguments, then its constructor's arguments that the inputs do
    not repeat (most operators pass e.g. ``hidden_size`` to both)."""
    init_only = [(name, value) for name, value in init_kwargs.items() if name not in input_kwargs]
    return [
        ShapeArgument(name=name, label=SHORT_NAMES.get(name, name), value=argument_text(value))
        for name, value in [*input_kwargs.items(), *init_only]
    ]


def suite_shape_arguments(
    shapes: Iterable[Mapping[str, Any]],
) -> dict[tuple[str, str], list[ShapeArgument]]:
    """(operator, shape id) -> arguments, for the shape records of a suite file."""
    return {
        (str(shape["operator"]), str(shape["shape_id"])): shape_arguments(
            init_kwargs=shape.get("init_kwargs") or {},
            input_kwargs=shape.get("input_kwargs") or {},
        )
        for shape in shapes
    }
