"""The test session's clean-up at the end (tests/conftest.py): the database sessions it ends
at once are this process's own, found by the local ports of its TCP sockets."""

from __future__ import annotations

import socket
import subprocess
import sys

from tests.conftest import _own_tcp_ports


def test_own_tcp_ports_are_this_processs_sockets_and_not_another_processs():
    with socket.socket() as mine:
        mine.bind(("127.0.0.1", 0))
        mine.listen()
        assert mine.getsockname()[1] in _own_tcp_ports()
    child = subprocess.Popen(
        [sys.executable, "-c", "import socket, time; s = socket.socket(); "
         "s.bind(('127.0.0.1', 0)); s.listen(); print(s.getsockname()[1], flush=True); "
         "time.sleep(60)"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        theirs = int(child.stdout.readline())
        assert theirs not in _own_tcp_ports()
    finally:
        child.kill()
        child.wait()
