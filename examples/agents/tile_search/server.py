"""The example agent's HTTP service (standard library only): ``GET <prefix>/health`` and
``POST <prefix>/kernel`` of the Atrex agent protocol (docs/agent-protocol.yaml).

Every request must carry ``X-Atrex-Timestamp`` within the replay window and
``X-Atrex-Signature: v1=<hex HMAC-SHA256(secret, timestamp + "." + body)>``; an exact
replay of a signed request is refused. An answer is remembered under its
``Idempotency-Key``, so a retried round gets the same kernel and the search does not
advance twice.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from collections import OrderedDict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from .search import OperatorSearch
from .templates import TEMPLATES

NAME = "tile-search"
VERSION = "1.0"
REPLAY_WINDOW_S = 300
MAX_REQUEST_BYTES = 8 * 1024 * 1024
REMEMBERED_ANSWERS = 1024


class Agent:
    """The agent's state: one search per (campaign, operator) and the answers it gave."""

    def __init__(self, *, secret: bytes, patience: int = 2) -> None:
        self.secret = secret
        self.patience = patience
        self.searches: dict[tuple[str, str], OperatorSearch] = {}
        self.answers: OrderedDict[str, bytes] = OrderedDict()
        self.seen_signatures: dict[str, float] = {}
        self.lock = threading.Lock()

    def authentic(self, timestamp: str, body: bytes, signature: str) -> str | None:
        """None when the request is signed, fresh and not a replay; else why not."""
        try:
            sent = int(timestamp)
        except (TypeError, ValueError):
            return "missing or malformed X-Atrex-Timestamp"
        now = time.time()
        if abs(now - sent) > REPLAY_WINDOW_S:
            return "timestamp outside the replay window (check the clocks)"
        mac = hmac.new(self.secret, timestamp.encode() + b"." + body, hashlib.sha256)
        if not hmac.compare_digest("v1=" + mac.hexdigest(), signature or ""):
            return "bad signature"
        with self.lock:
            for old, at in list(self.seen_signatures.items()):
                if now - at > 2 * REPLAY_WINDOW_S:
                    del self.seen_signatures[old]
            if signature in self.seen_signatures:
                return "replayed request"
            self.seen_signatures[signature] = now
        return None

    def answer(self, task: dict[str, Any], idempotency_key: str) -> tuple[int, bytes]:
        with self.lock:
            if idempotency_key and idempotency_key in self.answers:
                return 200, self.answers[idempotency_key]
            status, body = self._answer(task)
            if status == 200 and idempotency_key:
                self.answers[idempotency_key] = body
                while len(self.answers) > REMEMBERED_ANSWERS:
                    self.answers.popitem(last=False)
            return status, body

    def _answer(self, task: dict[str, Any]) -> tuple[int, bytes]:
        operator = task.get("operator")
        template = TEMPLATES.get(str(operator))
        if template is None:
            message = f"this agent has no template for {operator!r}; it knows {sorted(TEMPLATES)}"
            return 422, json.dumps({"error": message}).encode()
        dsl = task.get("dsl") or "triton"
        if dsl.lower() != "triton":
            return 422, json.dumps({"error": f"this agent writes Triton, not {dsl}"}).encode()
        number = int(task.get("round") or 1)
        shapes = task.get("public_shapes") or []
        key = (str(task.get("campaign")), template.operator)
        search = self.searches.get(key)
        if search is None or number == 1:
            search = self.searches[key] = OperatorSearch(template, patience=self.patience)
        feedback = task.get("feedback")
        if feedback:
            search.learn(number - 1, feedback, shapes)
        configs = search.propose(number, shapes)
        notes = f"round {number}: {json.dumps(configs, sort_keys=True)}. {search.summary()}"
        if search.log:
            notes += " | " + " | ".join(search.log[-3:])
        body = {
            "operator": template.operator,
            "source": template.render(configs),
            "notes": notes,
            "usage": {"input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0},
        }
        return 200, json.dumps(body).encode()


class Handler(BaseHTTPRequestHandler):
    server_version = f"{NAME}/{VERSION}"
    agent: Agent
    prefix = ""

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib's name
        if getattr(self.server, "verbose", False):
            super().log_message(format, *args)

    def _route(self) -> str:
        path = self.path.split("?", 1)[0]
        prefix = self.prefix.rstrip("/")
        if prefix and not path.startswith(prefix + "/"):
            return ""
        return path[len(prefix) :].strip("/")

    def _send(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _error(self, status: int, message: str) -> None:
        self._send(status, json.dumps({"error": message}).encode())

    def _authentic(self, body: bytes) -> bool:
        reason = self.agent.authentic(
            self.headers.get("X-Atrex-Timestamp", ""),
            body,
            self.headers.get("X-Atrex-Signature", ""),
        )
        if reason:
            self._error(401, reason)
            return False
        return True

    def do_GET(self) -> None:  # noqa: N802 - stdlib's name
        if self._route() != "health":
            self._error(404, "not found")
            return
        if self._authentic(b""):
            self._send(200, json.dumps({"status": "ok", "name": NAME, "version": VERSION}).encode())

    def do_POST(self) -> None:  # noqa: N802 - stdlib's name
        if self._route() != "kernel":
            self._error(404, "not found")
            return
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_REQUEST_BYTES:
            self._error(413, "request too large")
            return
        body = self.rfile.read(length)
        if not self._authentic(body):
            return
        try:
            task = json.loads(body)
        except json.JSONDecodeError as exc:
            self._error(400, f"not JSON: {exc}")
            return
        status, answer = self.agent.answer(task, self.headers.get("Idempotency-Key", ""))
        self._send(status, answer)


def make_server(
    *, host: str, port: int, secret: bytes, prefix: str = "", patience: int = 2
) -> ThreadingHTTPServer:
    """A ready server (call ``serve_forever``); port 0 picks a free port."""
    handler = type(
        "TileSearchHandler",
        (Handler,),
        {"agent": Agent(secret=secret, patience=patience), "prefix": prefix},
    )
    server = ThreadingHTTPServer((host, port), handler)
    server.daemon_threads = True
    return server
