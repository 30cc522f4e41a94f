"""The frame protocol between the runner and its per-operator children (stdlib only:
web-safe, and the runner imports it without loading torch).

A frame is a 4-byte big-endian length and that many bytes of UTF-8 JSON. On the job pipe
the runner writes one frame (the job) and closes it; on the result pipe the child writes
one frame per event, each starting with the hex HMAC-SHA256 of its JSON under the run's
key, so that a frame the harness did not write (the candidate runs in the child) is told
from one it did (``ForgedFrameError``).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from collections.abc import Mapping
from typing import Any

MAX_FRAME_BYTES = 16 * 1024 * 1024
MAC_CHARS = 64
"""Hex digits of the HMAC-SHA256 that starts every frame on the result pipe."""
WARM_UP_FAILED = 3
"""The child's exit status when the harness itself could not start (before the job)."""

# Bound at import, before any candidate code runs in the child.
_os_write = os.write
_json_dumps = json.dumps
_hmac_new = hmac.new
_sha256 = hashlib.sha256


class ForgedFrameError(ValueError):
    """A frame on the result pipe that the harness did not write (bad or missing HMAC)."""


def _mac(key: bytes, payload: bytes) -> bytes:
    return _hmac_new(key, payload, _sha256).hexdigest().encode("ascii")


def write_frame(fd: int, message: Mapping[str, Any], *, key: bytes | None = None) -> None:
    """Send one length-prefixed JSON message on a pipe (HMAC-signed when given a key)."""
    payload = _json_dumps(message, allow_nan=True).encode("utf-8")
    if key is not None:
        payload = _mac(key, payload) + payload
    data = len(payload).to_bytes(4, "big") + payload
    view = memoryview(data)
    while view:
        written = _os_write(fd, view)
        view = view[written:]


class FrameReader:
    """Incremental decoder of length-prefixed JSON frames from a non-blocking source.

    With a ``key`` every frame must start with the HMAC of its JSON under that key; one
    that does not raises ForgedFrameError.
    """

    def __init__(self, max_frame_bytes: int = MAX_FRAME_BYTES, *, key: bytes | None = None):
        self.buffer = bytearray()
        self.max_frame_bytes = max_frame_bytes
        self.key = key

    def feed(self, data: bytes) -> list[dict[str, Any]]:
        """Add bytes; return every complete message. ValueError on a malformed frame."""
        self.buffer.extend(data)
        messages = []
        while len(self.buffer) >= 4:
            size = int.from_bytes(self.buffer[:4], "big")
            if size > self.max_frame_bytes:
                raise ValueError(f"frame of {size} bytes exceeds {self.max_frame_bytes}")
            if len(self.buffer) < 4 + size:
                break
            payload = bytes(self.buffer[4 : 4 + size])
            del self.buffer[: 4 + size]
            if self.key is not None:
                mac, payload = payload[:MAC_CHARS], payload[MAC_CHARS:]
                if not hmac.compare_digest(mac, _mac(self.key, payload)):
                    raise ForgedFrameError("a frame without the harness's signature")
            message = json.loads(payload)
            if not isinstance(message, dict):
                raise ValueError("frame is not a JSON object")
            messages.append(message)
        return messages


def read_exactly(fd: int, count: int) -> bytes:
    """``count`` bytes from ``fd`` (fewer only at end-of-file)."""
    data = bytearray()
    while len(data) < count:
        chunk = os.read(fd, count - len(data))
        if not chunk:
            break
        data.extend(chunk)
    return bytes(data)


def read_job(fd: int) -> dict[str, Any]:
    """Read the job frame, the first on the job pipe (the runner then closes it, or, for a
    sanitized child, keeps it to say when to go on: ``evaluator.child.run_sanitize_job``)."""
    header = read_exactly(fd, 4)
    (job,) = FrameReader().feed(header + read_exactly(fd, int.from_bytes(header, "big")))
    return job
