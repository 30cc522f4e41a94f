"""Whether a code object really comes from the file it names (stdlib only).

The audit hook (``evaluator.integrity``) and the CPU fallback monitor
(``evaluator.fallback``) tell the harness's code, the libraries' and the submission's apart
by the file a code object names (``co_filename``). A submission can name any file:
``compile(source, "<the harness's child.py>", "exec")`` makes code that claims to be the
harness, and would be given frame objects; named after Triton's interpreter, its PyTorch
calls would not be counted as its own. :func:`genuine` compiles the named file as it is on
disk and looks for the same code there (name, first line, bytecode, names and constants),
so such a claim is told from the real thing. Each file is compiled once per process.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from importlib.util import find_spec
from types import CodeType
from typing import Any

_FILE_CODES: dict[str, frozenset[tuple[Any, ...]]] = {}


def _walk(code: CodeType) -> Iterator[CodeType]:
    yield code
    for constant in code.co_consts:
        if isinstance(constant, CodeType):
            yield from _walk(constant)


def _key(code: CodeType) -> tuple[Any, ...]:
    constants = tuple(
        ("code", c.co_name) if isinstance(c, CodeType) else (type(c).__name__, repr(c))
        for c in code.co_consts
    )
    return (
        code.co_name,
        code.co_firstlineno,
        code.co_code,
        code.co_names,
        code.co_varnames,
        code.co_freevars,
        code.co_cellvars,
        constants,
    )


def genuine(code: CodeType) -> bool:
    """Whether ``code`` is compiled from the file it names, as that file is now."""
    path = code.co_filename
    keys = _FILE_CODES.get(path)
    if keys is None:
        try:
            with open(path, "rb") as handle:
                top = compile(handle.read(), path, "exec", dont_inherit=True)
        except (OSError, SyntaxError, ValueError):
            keys = frozenset()
        else:
            keys = frozenset(_key(c) for c in _walk(top))
        _FILE_CODES[path] = keys
    return _key(code) in keys


def package_dir(name: str) -> str | None:
    """The real folder of an importable package, with a trailing separator (a prefix for
    ``str.startswith`` on real paths); None when there is no such package."""
    spec = find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return os.path.realpath(next(iter(spec.submodule_search_locations))) + os.sep
