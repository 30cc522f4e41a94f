"""Killing a child that was already reaped kills only its own tree: not another child of
the same sandbox user that was started before it and waits for its turn (the next round's
child of a campaign's evaluator server, ``evaluator.serve``)."""

from __future__ import annotations

import subprocess
import sys

from evaluator.sandbox import Sandbox, SandboxPolicy, descendants, kill_tree


def launch_sleeper(sandbox: Sandbox) -> subprocess.Popen[bytes]:
    process, _ = sandbox.launch(
        [sys.executable, "-c", "import time; time.sleep(60)"],
        sandbox.child("sleeper", None),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return process


def test_a_reaped_childs_kill_spares_an_earlier_child_of_the_same_user(tmp_path):
    sandbox = Sandbox(policy=SandboxPolicy(), scratch=tmp_path)
    waiting = launch_sleeper(sandbox)  # started first, as the same user: not the later one's
    later = launch_sleeper(sandbox)
    try:
        later.kill()
        later.wait()  # reaped: /proc no longer says when it started
        assert waiting.pid not in descendants(later.pid, sandbox.uid)
        kill_tree(later.pid, sandbox.uid)
        assert waiting.poll() is None, "the waiting child was killed with the reaped one"
    finally:
        kill_tree(waiting.pid, sandbox.uid)
        waiting.wait()
