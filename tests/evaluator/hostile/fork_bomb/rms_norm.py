"""A fork bomb at import: starts processes until the system refuses, each a long ``sleep``
(named by target.json, so the test can look for survivors). ``os.fork`` is refused to a
submission's code (an audit hook), so it goes through ``multiprocessing``'s spawn helper,
which raises no audit event. The sandbox's process limit stops it, or the runner's watch
over the child's processes does first; the runner kills the sleepers either way."""

import json
from multiprocessing import util
from pathlib import Path

_sleep = json.loads((Path(__file__).parent / "target.json").read_text())["sleep"]
_children = 0
try:
    while True:
        util.spawnv_passfds(b"/bin/sleep", ["sleep", _sleep], ())
        _children += 1
except OSError as exc:
    raise RuntimeError(f"fork bomb stopped after {_children} processes: {exc}") from exc


class Model:  # never reached: the import above fails first
    pass
