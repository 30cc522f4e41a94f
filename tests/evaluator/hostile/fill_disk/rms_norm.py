"""Fills its temp folder with many small files until writing fails (the private tmpfs's
size stops it, whatever the file size limit)."""

import os
import tempfile

_chunk = b"\0" * (1 << 20)
_written = 0
try:
    for _index in range(1 << 16):
        with open(os.path.join(tempfile.gettempdir(), f"filler-{_index}.bin"), "wb") as _out:
            _out.write(_chunk)
        _written += len(_chunk)
except OSError as exc:
    raise RuntimeError(f"disk filler stopped after {_written >> 20} MiB: {exc}") from exc


class Model:  # never reached: the import above fails first
    pass
