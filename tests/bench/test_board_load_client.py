"""bench/board_load.py's load generator (prebuilt request bytes on raw sockets): it sends
what ``http.client`` sent, counts only whole ``200`` answers, and reports its CPU time."""

from __future__ import annotations

import http.server
import sys
import threading
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))

from board_load import answer_ok, load, request_bytes  # noqa: E402

BODY = b"x" * 1_500_000  # larger than the client's first buffer


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    seen: list[dict[str, str]]


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self.server.seen.append(dict(self.headers))  # type: ignore[attr-defined]
        status = 200 if self.path.startswith("/ok") else 404
        self.send_response(status)
        self.send_header("Content-Length", str(len(BODY)))
        self.end_headers()
        self.wfile.write(BODY)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server():
    served = _Server(("127.0.0.1", 0), _Handler)
    served.seen = []
    thread = threading.Thread(target=served.serve_forever, daemon=True)
    thread.start()
    yield served
    served.shutdown()
    served.server_close()


def test_whole_200_answers_are_counted_with_the_viewer_s_headers(server):
    port = server.server_address[1]
    figures = load(
        url=f"http://127.0.0.1:{port}/ok?x=1",
        clients=3,
        duration_s=30,
        max_requests=12,
        headers={"Authorization": "Token abc"},
    )
    assert figures["ok"] == 12 and figures["errors"] == 0
    assert figures["cpu_s"] > 0
    assert all(seen["Authorization"] == "Token abc" for seen in server.seen)
    assert all(seen["Connection"] == "close" for seen in server.seen)
    assert all(seen["Host"] == f"127.0.0.1:{port}" for seen in server.seen)


def test_other_statuses_are_errors(server):
    port = server.server_address[1]
    figures = load(url=f"http://127.0.0.1:{port}/gone", clients=2, duration_s=30, max_requests=4)
    assert figures["ok"] == 0 and figures["errors"] == 4
    assert "404" in figures["error_sample"][0]


def test_a_cut_answer_is_an_error():
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 10\r\n\r\n"
    assert answer_ok(head + b"0123456789") is None
    assert "not 10" in answer_ok(head + b"01234")
    assert answer_ok(b"HTTP/1.1 200 OK\r\nContent-Le") == "no complete header"
    assert answer_ok(b"HTTP/1.1 500 Internal Server Error\r\n\r\n").startswith("HTTP/1.1 500")


def test_the_request_is_what_http_client_sent():
    request = request_bytes(host="127.0.0.1", port=8000, path="/?a=1", headers={"Cookie": "s=1"})
    lines = request.decode().split("\r\n")
    assert lines[0] == "GET /?a=1 HTTP/1.1"
    assert lines[1:] == [
        "Host: 127.0.0.1:8000",
        "Accept-Encoding: identity",
        "Cookie: s=1",
        "Connection: close",
        "",
        "",
    ]
