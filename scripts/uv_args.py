"""Print pip's settings on this machine as ``uv pip install`` options, for `make install`.

uv installs the project's pinned set several times faster than pip, but reads none of
pip's configuration. This hands it the settings pip would use here (``pip config list``:
the configuration files and the ``PIP_*`` environment): local wheel folders
(``find-links``), extra and replacement indexes, and constraint files. Other settings
(timeouts, the certificate bundle) have no effect on which packages are chosen.

    uv pip install $(python scripts/uv_args.py) ...
"""

from __future__ import annotations

import shlex
import subprocess
import sys

OPTIONS = {
    "find-links": "--find-links",
    "extra-index-url": "--extra-index-url",
    "index-url": "--index-url",
    "constraint": "--constraint",
}


def pip_settings(text: str) -> list[tuple[str, str]]:
    """(setting, value) from ``pip config list`` lines such as ``global.find-links='/opt/w'``
    or ``:env:.extra-index-url='a b'`` (a list setting's values are space-separated)."""
    settings = []
    for line in text.splitlines():
        key, sep, raw = line.partition("=")
        if not sep:
            continue
        name = key.rpartition(".")[2]
        if name not in OPTIONS:
            continue
        for value in shlex.split(raw):
            settings.extend((name, item) for item in value.split())
    return settings


def uv_options(settings: list[tuple[str, str]]) -> list[str]:
    """uv's options for ``settings``, each value once (pip lists a setting both from its
    file and from the environment when both set it)."""
    options: list[str] = []
    seen = set()
    for name, value in settings:
        if (name, value) in seen:
            continue
        seen.add((name, value))
        options += [OPTIONS[name], value]
    if any(name.endswith("index-url") for name, _ in settings):
        # pip takes the best version found on any index; uv by default only looks at the
        # first index that has the package at all.
        options += ["--index-strategy", "unsafe-best-match"]
    return options


def main() -> int:
    listed = subprocess.run(  # noqa: S603 - this interpreter's own pip, fixed arguments
        [sys.executable, "-m", "pip", "config", "list"],
        capture_output=True,
        text=True,
        check=False,
    )
    print(shlex.join(uv_options(pip_settings(listed.stdout))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
