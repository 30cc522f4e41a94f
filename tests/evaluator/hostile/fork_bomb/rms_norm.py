"""A fork bomb at import: forks until the system refuses, every child becoming a long
``sleep`` (named by target.json, so the test can look for survivors). The sandbox's
process limit stops it; the runner kills the sleepers when the child ends."""

import json
import os
from pathlib import Path

_sleep = json.loads((Path(__file__).parent / "target.json").read_text())["sleep"]
_children = 0
try:
    while True:
        if os.fork() == 0:
            try:
                os.execv("/bin/sleep", ["sleep", _sleep])
            finally:
                os._exit(0)
        _children += 1
except OSError as exc:
    raise RuntimeError(f"fork bomb stopped after {_children} processes: {exc}") from exc


class Model:  # never reached: the import above fails first
    pass
