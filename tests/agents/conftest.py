"""Agents on loopback for the tests: the example tile-search agent and a scriptable agent
that misbehaves on purpose. Both listen on 127.0.0.1 only."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

SECRET = "test-shared-secret-0123456789"


@dataclass
class Hit:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class ScriptedAgent:
    """Answers each request with ``respond(hit, index) -> (status, headers, body)`` or
    with a callable that writes to the raw socket (``"raw"`` mode)."""

    respond: Callable[[Hit, int], Any]
    hits: list[Hit] = field(default_factory=list)
    url: str = ""
    port: int = 0


# How often a server's loop looks for shutdown(): the default 0.5 s made every test's
# tear-down wait half a second per server.
POLL_INTERVAL_S = 0.02


def _serve(handler_class: type[BaseHTTPRequestHandler]) -> tuple[ThreadingHTTPServer, Any]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler_class)
    server.daemon_threads = True
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": POLL_INTERVAL_S}, daemon=True
    )
    thread.start()
    return server, thread


@pytest.fixture
def scripted_agent() -> Iterator[Callable[[Callable[[Hit, int], Any]], ScriptedAgent]]:
    servers: list[ThreadingHTTPServer] = []

    def start(respond: Callable[[Hit, int], Any]) -> ScriptedAgent:
        agent = ScriptedAgent(respond=respond)
        lock = threading.Lock()

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                hit = Hit(self.command, self.path, dict(self.headers), self.rfile.read(length))
                with lock:
                    agent.hits.append(hit)
                    index = len(agent.hits) - 1
                answer = agent.respond(hit, index)
                if callable(answer):
                    answer(self)
                    return
                status, headers, body = answer
                try:
                    self.send_response(status)
                    for name, value in headers.items():
                        self.send_header(name, value)
                    if "Content-Length" not in headers:
                        self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            do_GET = _handle  # noqa: N815 - stdlib's name
            do_POST = _handle  # noqa: N815 - stdlib's name

        server, _ = _serve(Handler)
        servers.append(server)
        agent.port = server.server_address[1]
        agent.url = f"http://127.0.0.1:{agent.port}/agent"
        return agent

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def kernel_answer(operator: str, source: str = "class Model: pass\n", **extra: Any) -> bytes:
    return json.dumps({"operator": operator, "source": source, **extra}).encode()


def sleep_then(seconds: float, answer: Any) -> Callable[[Hit, int], Any]:
    def respond(hit: Hit, index: int) -> Any:
        time.sleep(seconds)
        return answer

    return respond


@pytest.fixture
def start_tile_agent() -> Iterator[Callable[[str], str]]:
    """``start_tile_agent(secret)``: the example agent on loopback with that shared secret;
    returns its base URL (routes under /tile)."""
    from examples.agents.tile_search.server import make_server

    servers = []

    def start(secret: str = SECRET) -> str:
        server = make_server(host="127.0.0.1", port=0, secret=secret.encode(), prefix="/tile")
        threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": POLL_INTERVAL_S}, daemon=True
        ).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}/tile"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


@pytest.fixture
def tile_search_agent(start_tile_agent) -> str:
    return start_tile_agent(SECRET)
