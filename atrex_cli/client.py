"""A small HTTP client for the portal's REST API, on urllib only (runs anywhere)."""

from __future__ import annotations

import json
import mimetypes
import os
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib import error, parse, request

DEFAULT_URL = "http://127.0.0.1:8000"
TOKEN_FILE = Path("~/.config/atrex/token")


class ApiError(Exception):
    """An answer that is not 2xx (or no answer): ``status`` 0 when the server is unreachable."""

    def __init__(self, status: int, body: dict[str, Any]) -> None:
        self.status = status
        self.body = body
        super().__init__(f"HTTP {status}: {body.get('detail', body)}")

    @property
    def detail(self) -> str:
        return str(self.body.get("detail", ""))

    @property
    def code(self) -> str:
        return str(self.body.get("code", ""))


def token_from_environment() -> str | None:
    """``ATREX_TOKEN``, else the first line of ``~/.config/atrex/token``."""
    token = os.environ.get("ATREX_TOKEN", "").strip()
    if token:
        return token
    path = TOKEN_FILE.expanduser()
    if path.is_file():
        return path.read_text().strip().splitlines()[0].strip() or None
    return None


def _multipart(fields: dict[str, str], file_field: str, file_path: Path) -> tuple[bytes, str]:
    boundary = f"atrex-{uuid.uuid4().hex}"
    parts: list[bytes] = []
    for name, value in fields.items():
        header = f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n'
        parts.append(f"{header}{value}\r\n".encode())
    content_type = mimetypes.guess_type(file_path.name)[0] or "application/octet-stream"
    parts.append(
        (
            f'--{boundary}\r\nContent-Disposition: form-data; name="{file_field}"; '
            f'filename="{file_path.name}"\r\nContent-Type: {content_type}\r\n\r\n'
        ).encode()
        + file_path.read_bytes()
        + b"\r\n"
    )
    parts.append(f"--{boundary}--\r\n".encode())
    return b"".join(parts), f"multipart/form-data; boundary={boundary}"


@dataclass
class Client:
    """The portal at ``base_url``; ``token`` for the calls that need one."""

    base_url: str = DEFAULT_URL
    token: str | None = None
    timeout_s: float = 60.0

    def _call(
        self,
        method: str,
        path: str,
        *,
        query: dict[str, str] | None = None,
        data: bytes | None = None,
        content_type: str | None = None,
        ok: tuple[int, ...] = (200, 201, 204),
    ) -> tuple[int, dict[str, Any]]:
        url = self.base_url.rstrip("/") + path
        if query:
            url += "?" + parse.urlencode({k: v for k, v in query.items() if v})
        headers = {"Accept": "application/json", "User-Agent": "atrex-cli/1"}
        if self.token:
            headers["Authorization"] = f"Token {self.token}"
        if content_type:
            headers["Content-Type"] = content_type
        req = request.Request(url, data=data, method=method, headers=headers)
        try:
            with request.urlopen(req, timeout=self.timeout_s) as response:  # noqa: S310
                status, raw = response.status, response.read()
        except error.HTTPError as failure:
            status, raw = failure.code, failure.read()
        except error.URLError as failure:
            raise ApiError(0, {"detail": f"cannot reach {url}: {failure.reason}"}) from failure
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            body = {"detail": raw[:200].decode(errors="replace"), "code": "not-json"}
        if status not in ok:
            raise ApiError(status, body if isinstance(body, dict) else {"detail": str(body)})
        return status, body

    def submit(self, bundle: Path, *, fields: dict[str, str]) -> tuple[int, dict[str, Any]]:
        """Upload a bundle: (201, submission) when queued, (422, submission) when rejected."""
        data, content_type = _multipart(fields, "bundle", bundle)
        return self._call(
            "POST", "/api/submissions/", data=data, content_type=content_type, ok=(201, 422)
        )

    def check(self, bundle: Path, *, fields: dict[str, str]) -> dict[str, Any]:
        """Check a bundle without submitting it (nothing stored, no quota used)."""
        data, content_type = _multipart(fields, "bundle", bundle)
        return self._call("POST", "/api/submissions/check/", data=data, content_type=content_type)[
            1
        ]

    def cancel(self, submission_id: int) -> dict[str, Any]:
        """Cancel your unfinished submission; its detail afterwards."""
        return self._call("POST", f"/api/submissions/{submission_id}/cancel/", data=b"")[1]

    def compare(self, submission_ids: list[int]) -> dict[str, Any]:
        """Per-operator and per-shape comparison; the first id is the reference point."""
        query = {"submissions": ",".join(str(pk) for pk in submission_ids)}
        return self._call("GET", "/api/compare/", query=query)[1]

    def quota(self) -> dict[str, Any]:
        """Your submission limits and what is left."""
        return self._call("GET", "/api/quota/")[1]

    def progress(self, submission_id: int) -> dict[str, Any]:
        return self._call("GET", f"/api/submissions/{submission_id}/progress/")[1]

    def submission(self, submission_id: int) -> dict[str, Any]:
        return self._call("GET", f"/api/submissions/{submission_id}/")[1]

    def board(
        self,
        *,
        suite: str | None = None,
        hardware: str | None = None,
        view: str = "best",
        page_size: int = 50,
    ) -> dict[str, Any]:
        """The board's first ``page_size`` rows; ``view`` "best" (each submitter's best) or
        "all" (every submission)."""
        query = {
            "suite": suite or "",
            "hardware": hardware or "",
            "view": view,
            "page_size": str(page_size),
        }
        return self._call("GET", "/api/leaderboard/", query=query)[1]
