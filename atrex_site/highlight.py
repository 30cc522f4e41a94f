"""Server-side syntax highlighting of Python source (Pygments): HTML with CSS classes only,
no inline styles and no JavaScript; the colours are in static/css/operator.css
(``python -m atrex_site.highlight`` prints them for the style used here)."""

from __future__ import annotations

from django.utils.safestring import SafeString, mark_safe
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import PythonLexer

STYLE = "default"
CSS_CLASS = "source"


def highlight_python(text: str) -> SafeString:
    """``text`` as a highlighted ``<div class="source"><pre>…</pre></div>`` (escaped by
    Pygments, so safe to put in a page)."""
    formatter = HtmlFormatter(cssclass=CSS_CLASS, style=STYLE, nowrap=False, wrapcode=True)
    return mark_safe(highlight(text, PythonLexer(), formatter))  # noqa: S308 - Pygments escapes


def style_css() -> str:
    """The CSS rules of the token classes under ``.source`` (Pygments' unscoped ``pre`` and
    line-number rules left out: the page shows no line numbers)."""
    rules = HtmlFormatter(cssclass=CSS_CLASS, style=STYLE).get_style_defs(f".{CSS_CLASS}")
    return "\n".join(line for line in rules.splitlines() if line.startswith(f".{CSS_CLASS}"))


if __name__ == "__main__":
    print(style_css())
