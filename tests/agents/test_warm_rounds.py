"""A campaign's rounds through its warm evaluator server (``evaluator.serve``) get the
verdicts of the cold path, one round's code cannot reach a later round's verdict, and the
server does not outlive its campaign. Real processes, the real sandbox, Triton kernels in
the interpreter. What is proven here is about rounds, children and servers, not shapes:
each round measures one smoke shape of its operator (``ONE_SHAPE_SUITE``), which keeps the
19 rounds here that measure shapes from measuring 38 more."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from agents import loop
from evaluator.suite import Suite, load_suite

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
HONEST = (REPO / "examples" / "bundles" / "triton-baseline" / "rms_norm.py").read_text()
WRONG = HONEST.replace(
    "out = x * inv_rms[:, None] * weight[None, :]", "out = x * weight[None, :]"
)  # the Triton kernel forgets to normalise
FALLBACK = """
import torch
from torch import nn


class Model(nn.Module):
    def __init__(self, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps

    def forward(self, x, weight):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps) * weight).to(x.dtype)
"""
CRASH = """
import os
from torch import nn


class Model(nn.Module):
    def __init__(self, eps: float = 1e-6) -> None:
        super().__init__()

    def forward(self, x, weight):
        os._exit(7)
"""
# A round that never ends and never reports: it sleeps rather than spins, since what ends
# it is silence (the shape timeout) or the round's time limit, never CPU time, and a spinning
# loop took a core from the other tests for its 15-20 s (tests/evaluator/hostile/ has the
# spinning one, stopped at the CPU time limit).
ENDLESS = """
import time

from torch import nn


class Model(nn.Module):
    def __init__(self, eps: float = 1e-6) -> None:
        super().__init__()

    def forward(self, x, weight):
        while True:
            time.sleep(1.0)
"""
# Patches torch and the harness at import and on its first call, leaves files wherever it
# may write, and tries to kill the server's other children; returns zeros.
PATCHER = """
import os
import sys

import torch
from torch import nn


def _everything():
    import evaluator.correctness as correctness
    import evaluator.timing as timing

    correctness.compare_outputs = lambda *a, **k: correctness.Comparison(True)
    timing.CpuTimer.time_once = lambda self, fn: (fn(), (1e-9, 1e-9))[1]
    torch.allclose = lambda *a, **k: True
    torch.Tensor.__sub__ = lambda self, other: torch.zeros_like(self)
    torch.rsqrt = lambda t: t
    for folder in {os.getcwd(), os.environ.get("HOME", ""), os.environ.get("TMPDIR", ""),
                   "/tmp", "/dev/shm", *sys.path}:
        for name in ("sitecustomize.py", "rms_norm.py", "triton.py"):
            try:
                with open(os.path.join(folder, name), "w") as handle:
                    handle.write("import os\\nos._exit(9)\\n")
            except OSError:
                pass
    # Another child of the server (the next round's, where one waits): killed if it can be.
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/stat") as handle:
                parent = int(handle.read().rsplit(")", 1)[1].split()[1])
            if parent == os.getppid() and int(entry) != os.getpid():
                os.kill(int(entry), 9)
        except Exception:
            pass


try:
    _everything()
except Exception:
    pass


class Model(nn.Module):
    def __init__(self, eps: float = 1e-6) -> None:
        super().__init__()
        self.done = False

    def forward(self, x, weight):
        if not self.done:
            self.done = True
            try:
                _everything()
            except Exception:
                pass
        return torch.zeros_like(x)
"""


def _one_smoke_shape_each(name: str) -> dict:
    """Suite ``name`` with only the first smoke shape of each operator, sealed again."""
    data = load_suite(name).to_dict()
    data.pop("content_hash")
    seen: set[str] = set()
    kept = []
    for shape in data["shapes"]:
        if shape.get("smoke"):
            if shape["operator"] in seen:
                continue
            seen.add(shape["operator"])
        kept.append(shape)
    return Suite.from_dict({**data, "shapes": kept}).to_dict()


ONE_SHAPE_SUITE = _one_smoke_shape_each("atrex-bench-v0.1")


@pytest.fixture(scope="module")
def suite() -> dict:
    return ONE_SHAPE_SUITE


def _evaluator(
    suite: dict, work: Path, *, warm: bool = True, shape_timeout_s: float = 300
) -> loop.CampaignEvaluator:
    return loop.evaluator_for(
        suite_definition=suite,
        hardware_slug="cpu-dev",
        device="cpu",
        shape_set="smoke",
        work_root=work,
        timeout_s=600,
        extra_args=["--time-budget-s", "0.05", "--shape-timeout-s", str(shape_timeout_s)],
        sandbox_args=[],
        warm=warm,
    )


@pytest.fixture(scope="module")
def campaign(suite, tmp_path_factory):
    with _evaluator(suite, tmp_path_factory.mktemp("warm")) as evaluate:
        yield evaluate


class Statuses(list):
    """The shapes' statuses, shown with the shapes' errors where an assertion fails (the
    error of a shape says what decided it: the share and what did the work, for one)."""

    def __init__(self, shapes: list[dict]) -> None:
        super().__init__(shape["status"] for shape in shapes)
        self.errors = [shape.get("error") for shape in shapes]

    def __repr__(self) -> str:
        return f"{list(self)!r} (errors: {self.errors!r})"


def statuses(results: dict) -> list[str]:
    assert not results.get("error"), results.get("error")
    (entry,) = results["operators"]
    return Statuses(entry["shapes"])


def test_the_rounds_here_measure_one_smoke_shape_of_the_suites_operator():
    full = load_suite("atrex-bench-v0.1")
    trimmed = Suite.from_dict(ONE_SHAPE_SUITE)
    for operator in full.operator_slugs():
        assert trimmed.shapes_for(operator, "smoke") == full.shapes_for(operator, "smoke")[:1]
        assert trimmed.shapes_for(operator, "full") == full.shapes_for(operator, "full")


def _children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            found.append(int(entry))
    return found


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _wait_gone(pids: list[int], seconds: float = 20.0) -> list[int]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and any(_alive(pid) for pid in pids):
        time.sleep(0.1)
    return [pid for pid in pids if _alive(pid)]


def test_warm_rounds_give_the_verdicts_of_cold_rounds(campaign, suite, tmp_path):
    cold = _evaluator(suite, tmp_path, warm=False)
    expected = {"honest": "pass", "wrong": "incorrect", "fallback": "fallback"}
    sources = {"honest": HONEST, "wrong": WRONG, "fallback": FALLBACK}
    for number, (name, source) in enumerate(sources.items(), start=1):
        warm = campaign("rms_norm", source, number)
        cold_results = cold("rms_norm", source, number)
        errors = [
            (shape["status"], shape.get("error"))
            for results in (warm, cold_results)
            for shape in results["operators"][0]["shapes"]
        ]
        assert statuses(warm) == statuses(cold_results) == [expected[name]], (name, errors)
    # Every round went to the one server, warm.
    assert campaign.session.servers_started == 1


def test_a_round_that_crashes_or_never_ends_is_that_rounds_error_only(suite, tmp_path):
    # 10 s of silence ends the endless round (the test waits it out); an honest round's
    # silences on a busy 2-core machine (the candidate's import, one smoke shape) are
    # under 2 s.
    with _evaluator(suite, tmp_path, shape_timeout_s=10) as campaign:
        _crash_then_endless(campaign)


def _crash_then_endless(campaign: loop.CampaignEvaluator) -> None:
    crashed = campaign("rms_norm", CRASH, 11)
    assert set(statuses(crashed)) == {"runtime_error"}
    assert "exited with code 7" in crashed["operators"][0]["error"]
    assert statuses(campaign("rms_norm", HONEST, 12)) == ["pass"]
    endless = campaign("rms_norm", ENDLESS, 13)
    assert set(statuses(endless)) == {"timeout"}
    assert statuses(campaign("rms_norm", HONEST, 14)) == ["pass"]
    assert campaign.session.servers_started == 1


def test_a_round_that_patches_torch_and_the_harness_cannot_change_a_later_verdict(campaign):
    patched = campaign("rms_norm", PATCHER, 21)
    assert "pass" not in statuses(patched)
    assert statuses(campaign("rms_norm", WRONG, 22)) == ["incorrect"]
    assert statuses(campaign("rms_norm", HONEST, 23)) == ["pass"]
    # Another operator after it: a fresh child for that operator, honest verdicts.
    silu = (REPO / "examples" / "bundles" / "triton-baseline" / "silu_and_mul.py").read_text()
    assert statuses(campaign("silu_and_mul", silu, 1)) == ["pass"]
    assert campaign.session.servers_started == 1


def test_the_server_and_its_children_stop_with_close(suite, tmp_path):
    evaluate = _evaluator(suite, tmp_path)
    try:
        assert statuses(evaluate("rms_norm", HONEST, 1)) == ["pass"]
        server = evaluate.session.server.process.pid
        deadline = time.monotonic() + 30
        while not _children(server) and time.monotonic() < deadline:
            time.sleep(0.1)
        waiting = _children(server)
        assert waiting, "no child started ahead for the next round"
    finally:
        evaluate.close()
    assert _wait_gone([server, *waiting]) == []


DRIVER = """
import json, sys
from pathlib import Path
from agents import loop

suite = json.loads(Path(sys.argv[1]).read_text())
evaluate = loop.evaluator_for(
    suite_definition=suite, hardware_slug="cpu-dev", device="cpu", shape_set="smoke",
    work_root=Path(sys.argv[2]), timeout_s=600, extra_args=["--time-budget-s", "0.05"],
    sandbox_args=[],
)
results = evaluate("rms_norm", Path(sys.argv[3]).read_text(), 1)
print(json.dumps({"server": evaluate.session.server.process.pid,
                  "statuses": [s["status"] for s in results["operators"][0]["shapes"]]}),
      flush=True)
evaluate("rms_norm", Path(sys.argv[4]).read_text(), 2)  # never ends (300 s of silence)
"""


def _tree(pid: int) -> list[int]:
    found, pending = [], [pid]
    while pending:
        children = _children(pending.pop())
        found += children
        pending += children
    return found


def test_the_server_and_a_running_round_die_with_the_campaigns_process(suite, tmp_path):
    honest, endless = tmp_path / "honest.py", tmp_path / "endless.py"
    honest.write_text(HONEST)
    endless.write_text(ENDLESS)
    suite_path = tmp_path / "suite.json"
    suite_path.write_text(json.dumps(suite))
    driver = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(DRIVER),
         str(suite_path), str(tmp_path / "work"), str(honest),
         str(endless)],
        cwd=REPO, stdout=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    try:
        report = json.loads(driver.stdout.readline())
        assert report["statuses"] == ["pass"]
        server = report["server"]
        # The endless round's child runs (on CUDA the next round's would wait beside it).
        time.sleep(3)
        running = _tree(server)
        assert running, "no child runs the endless round"
        driver.send_signal(signal.SIGKILL)  # the campaign's process dies without cleaning up
        driver.wait(timeout=30)
        assert _wait_gone([server, *running]) == []
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()


# Honest, unless its Triton cache folder holds what an earlier round left there: then zeros.
MARKER = (
    HONEST
    + """

import os as _os

_MARK = _os.path.join(_os.environ.get("TRITON_CACHE_DIR", "/nonexistent"), "left-by-a-round")
_SEEN = _os.path.exists(_MARK)
try:
    with open(_MARK, "w") as _handle:
        _handle.write("seen")
except OSError:
    pass

_Honest = Model


class Model(_Honest):
    def forward(self, x, weight):
        out = super().forward(x, weight)
        return torch.zeros_like(out) if _SEEN else out
"""
)


def test_a_rounds_triton_cache_reaches_only_a_later_round_of_the_same_source(campaign):
    assert statuses(campaign("rms_norm", MARKER, 31)) == ["pass"]
    # Another source finds an empty cache, whatever the first left in its own.
    assert statuses(campaign("rms_norm", MARKER + "\n# revised\n", 32)) == ["pass"]
    # The same source again gets what its first round compiled (and left).
    assert statuses(campaign("rms_norm", MARKER, 33)) == ["incorrect"]


def test_a_round_past_the_time_limit_stops_the_server_and_the_next_round_gets_a_new_one(
    suite, tmp_path
):
    from submissions.evaluation import EvaluatorTimeout

    evaluate = loop.evaluator_for(
        suite_definition=suite, hardware_slug="cpu-dev", device="cpu", shape_set="smoke",
        work_root=tmp_path, timeout_s=8, extra_args=["--time-budget-s", "0.05"],
        sandbox_args=[],
    )  # fmt: skip
    with evaluate:
        with pytest.raises(EvaluatorTimeout, match="within 8 s"):
            evaluate("rms_norm", ENDLESS, 1)
        stopped = evaluate.session.server
        assert stopped is None or not stopped.alive
        # The honest rounds' limit is roomy: each starts a new server and child first, and
        # one limit for every round (40 s) made the endless round wait that long, yet was
        # too short for an honest round on a loaded machine.
        evaluate.timeout_s = 300
        assert statuses(evaluate("rms_norm", HONEST, 2)) == ["pass"]
        # A server that died between rounds is replaced at the next round.
        server = evaluate.session.server.process.pid
        waiting = _tree(server)
        os.kill(server, signal.SIGKILL)
        assert _wait_gone([server, *waiting]) == []
        assert statuses(evaluate("rms_norm", HONEST, 3)) == ["pass"]
        assert evaluate.session.servers_started == 3


def test_a_campaigns_rounds_time_the_eager_baseline_once_per_shape(suite, tmp_path):
    """Round 1 times the eager baseline and keeps it in the campaign's cache; round 2 (a
    revised kernel) takes it from there. Both measured with the round policy, which the
    feedback names."""
    with _evaluator(suite, tmp_path) as evaluate:
        first = evaluate("rms_norm", HONEST, 1)
        second = evaluate("rms_norm", HONEST + "\n# revised\n", 2)
    (miss,) = first["operators"][0]["shapes"]
    (hit,) = second["operators"][0]["shapes"]
    assert miss["status"] == hit["status"] == "pass", (miss["error"], hit["error"])
    assert miss["reference_time_source"] == "measured"
    assert hit["reference_time_source"] == "cache"
    assert hit["reference_time_ms"] == miss["reference_time_ms"]
    assert "timed_reference" not in hit["wall_s"]
    for results in (first, second):
        assert results["environment"]["measurement"]["kind"] == "round"
        assert results["operators"][0]["shapes"][0]["trials"] == 2
    assert (tmp_path / "reference-timings").is_dir()
    feedback = loop.feedback_from_results(second, "rms_norm")
    assert feedback["measurement"]["kind"] == "round"
    assert feedback["measurement"]["note"] == loop.ROUND_MEASUREMENT_NOTE


READ_TARGETS = """
from pathlib import Path

_read, _errors = [], []
for _path in {targets!r}:
    try:
        _read.append(Path(_path).read_bytes()[:8].hex() if Path(_path).is_file()
                     else sorted(p.name for p in Path(_path).iterdir()))
    except OSError as exc:
        _errors.append(type(exc).__name__)
raise RuntimeError(f"read={{_read!r}} errors={{_errors!r}}")


class Model:  # never reached: the import above fails first
    pass
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="the sandbox's user switch needs root")
def test_a_rounds_child_cannot_read_the_campaigns_reference_timings(suite, tmp_path):
    # Inside the checkout, which the child sees (read-only, for the evaluator's code): not
    # under /tmp, which every child has hidden anyway.
    folder = REPO / f".campaign-timings-test-{os.getpid()}"
    evaluate = loop.evaluator_for(
        suite_definition=suite, hardware_slug="cpu-dev", device="cpu", shape_set="smoke",
        work_root=tmp_path, timeout_s=600, sandbox_args=[],
        extra_args=["--time-budget-s", "0.05", "--reference-timings", str(folder)],
    )  # fmt: skip
    try:
        with evaluate:
            assert statuses(evaluate("rms_norm", HONEST, 1)) == ["pass"]
            stored = sorted(folder.rglob("timings.json"))
            assert stored, "round 1 stored no eager figure"
            targets = [str(folder), str(stored[0])]
            reader = evaluate("rms_norm", READ_TARGETS.format(targets=targets), 2)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    entry = reader["operators"][0]
    assert entry["status"] == "compile_error"
    # The folder is an empty tmpfs in the child (hidden), its inside unreachable.
    assert "read=[[]]" in entry["error"], entry["error"]
    assert "errors=['FileNotFoundError']" in entry["error"]
