"""Writes one ever-growing file into its temp folder until writing fails (the file size
limit stops it)."""

import os
import tempfile

_chunk = b"\0" * (1 << 20)
_written = 0
try:
    with open(os.path.join(tempfile.gettempdir(), "filler.bin"), "wb") as _out:
        while _written < (64 << 30):
            _out.write(_chunk)
            _out.flush()
            _written += len(_chunk)
except OSError as exc:
    raise RuntimeError(f"disk filler stopped after {_written >> 20} MiB: {exc}") from exc


class Model:  # never reached: the import above fails first
    pass
