"""Where things land on a page, for the browser tests' phone-width checks."""

from __future__ import annotations


def assert_within_width(cells, width: float, *, skip_unboxed: bool = False) -> None:
    """Every element of the locator ``cells`` lies between x = 0 and ``width`` (nothing runs
    off a screen that wide). ``skip_unboxed``: an element without a box of its own (the file
    input's, for one, may be the browser's) is passed over rather than failed."""
    for cell in cells.all():
        box = cell.bounding_box()
        if box is None and skip_unboxed:
            continue
        assert box["x"] >= 0 and box["x"] + box["width"] <= width, (
            cell.evaluate("e => e.outerHTML.slice(0, 80)"),
            box,
        )


def before_labels(cells) -> list[str]:
    """The CSS ``::before`` content of each element of the locator ``cells`` (a phone
    layout's names for a table's cells; "none" where there is none)."""
    return cells.evaluate_all("cells => cells.map(c => getComputedStyle(c, '::before').content)")
