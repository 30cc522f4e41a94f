"""Hostile bundles: each attacks the machine (network, site files, processes, disk, CPU,
memory, a crash, the GPU) and must end with a clear status and message in results.json,
without harm, while the next operator of the run is still evaluated.

Every run here uses the sandbox in ``required`` mode, so a protection missing on this
machine fails the test instead of being skipped silently. The bundles sit beside this
file (each module's docstring says what it tries); the honest neighbours come from
examples/bundles/triton-baseline.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import tempfile
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from evaluator.runner import run_bundle
from evaluator.sandbox import SandboxPolicy
from evaluator.suite import Suite, load_suite

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="the full sandbox needs root"),
]

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
HONEST = REPO / "examples" / "bundles" / "triton-baseline"
OPERATORS = ["rms_norm", "silu_and_mul", "fused_add_rms_norm"]
OPERATORS_IN_SUITE_ORDER = ["fused_add_rms_norm", "rms_norm", "silu_and_mul"]
"""The order the runner evaluates them in: the hostile ones go first, the honest last."""


def smoke_suite(operators: list[str]) -> Suite:
    """The v0.1 suite cut down to ``operators`` and their first smoke shape each."""
    suite = load_suite("atrex-bench-v0.1").restrict(operators)
    return replace(suite, shapes=tuple(s for s in suite.shapes if s.shape_id == "smoke-0"))


def hostile_bundle(name: str, tmp_path: Path, target: dict[str, Any] | None = None) -> Path:
    """The hostile bundle ``name``, its missing operators filled with honest kernels."""
    bundle = tmp_path / f"bundle-{name}"
    shutil.copytree(HERE / name, bundle, ignore=shutil.ignore_patterns("__pycache__"))
    for operator in OPERATORS:
        if not (bundle / f"{operator}.py").exists():
            shutil.copy(HONEST / f"{operator}.py", bundle / f"{operator}.py")
    if target is not None:
        (bundle / "target.json").write_text(json.dumps(target))
    return bundle


def evaluate(bundle: Path, tmp_path: Path, operators=OPERATORS, **policy: Any) -> dict:
    return run_bundle(
        bundle_path=bundle,
        suite=smoke_suite(operators),
        hardware="cpu-dev",
        device="cpu",
        shape_set="smoke",
        time_budget_s=0.05,
        log_dir=tmp_path / "logs",
        shape_timeout_s=policy.pop("shape_timeout_s", None),
        sandbox_policy=SandboxPolicy(mode="required", **policy),
    )


def entry(results: dict, operator: str) -> dict:
    (found,) = [e for e in results["operators"] if e["operator"] == operator]
    return found


def assert_failed(results: dict, operator: str, status: str, *words: str) -> str:
    """The operator and all its shapes fail with ``status``; its error names ``words``."""
    found = entry(results, operator)
    assert found["status"] == status, (found["status"], found["error"])
    assert found["score"] == 0
    assert all(s["status"] == status for s in found["shapes"])
    text = f"{found['error']} {' '.join(str(s['error']) for s in found['shapes'])}"
    for word in words:
        assert word in text, text
    return text


def assert_honest_passes(results: dict, operator: str) -> None:
    found = entry(results, operator)
    assert [s["status"] for s in found["shapes"]] == ["pass"], found["error"]
    assert found["score"] > 0


def sleep_token() -> str:
    """A ``sleep`` argument no other process on this machine uses (e.g. ``600.123456``)."""
    return f"600.{secrets.randbelow(10**9):09d}"


def survivors(token: str) -> list[int]:
    """Processes still alive whose command line holds ``token`` (zombies excepted)."""
    alive = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as handle:
                if token.encode() not in handle.read():
                    continue
            with open(f"/proc/{name}/stat", "rb") as handle:
                if handle.read().rsplit(b")", 1)[1].split()[0] == b"Z":
                    continue
        except OSError:
            continue
        alive.append(int(name))
    return alive


def test_sandbox_section_reports_every_protection_active(tmp_path):
    results = evaluate(hostile_bundle("segfault", tmp_path), tmp_path, operators=["silu_and_mul"])
    sandbox = results["environment"]["sandbox"]
    assert sandbox["mode"] == "required" and sandbox["missing"] == {}
    for protection in ("network", "mounts", "user", "rlimits", "private_tmp", "memory_watchdog"):
        assert protection in sandbox["active"]
    assert sandbox["checked_inside"]["uid"] == 65534
    assert sandbox["checked_inside"]["loopback_errno"] not in (0, 111)  # not even refused


def test_network_connection_to_loopback_fails(tmp_path):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.settimeout(0.5)
    received: list[bytes] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
            except OSError:
                continue
            received.append(connection.recv(100))
            connection.close()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    port = listener.getsockname()[1]
    try:
        bundle = hostile_bundle("network", tmp_path, {"port": port})
        results = evaluate(bundle, tmp_path, operators=["rms_norm", "silu_and_mul"])
    finally:
        stop.set()
        thread.join(5)
        listener.close()
    assert received == []
    assert_failed(results, "rms_norm", "compile_error", "Network is unreachable")
    assert_honest_passes(results, "silu_and_mul")


@pytest.fixture
def site_secrets():
    """A settings file and another submission's upload, world-readable, outside /tmp (so
    only the hidden-path mounts protect them, not file modes or the private /tmp)."""
    base = Path(tempfile.mkdtemp(prefix="hostile-site-", dir=REPO / "var"))
    settings_dir, media = base / "settings", base / "media" / "uploads"
    settings_dir.mkdir()
    media.mkdir(parents=True)
    secret = settings_dir / ".env"
    secret.write_text("DJANGO_SECRET_KEY=very-secret-key\n")
    upload = media / "other-submission.py"
    upload.write_text("# someone else's kernel: TOP-SECRET-KERNEL\n")
    for path in (base, settings_dir, base / "media", media):
        path.chmod(0o755)
    for path in (secret, upload):
        path.chmod(0o644)
    yield {"settings": settings_dir, "media": base / "media", "files": [secret, upload]}
    shutil.rmtree(base)


def test_site_secrets_and_other_uploads_are_hidden(tmp_path, site_secrets):
    bundle = hostile_bundle(
        "read_secrets", tmp_path, {"paths": [str(p) for p in site_secrets["files"]]}
    )
    results = run_bundle(
        bundle_path=bundle,
        suite=smoke_suite(["rms_norm"]),
        hardware="cpu-dev",
        device="cpu",
        shape_set="smoke",
        time_budget_s=0.05,
        log_dir=tmp_path / "logs",
        sandbox_policy=SandboxPolicy(
            mode="required",
            hidden_paths=(str(site_secrets["settings"]), str(site_secrets["media"])),
        ),
    )
    text = assert_failed(results, "rms_norm", "compile_error", "stolen=[]")
    assert "very-secret-key" not in text and "TOP-SECRET-KERNEL" not in text
    assert "very-secret-key" not in (tmp_path / "logs" / "rms_norm.log").read_text()
    # Both reads failed inside the sandbox (the files are world-readable outside it).
    assert text.count("FileNotFoundError") + text.count("PermissionError") >= 2, text


def test_environment_of_the_child_holds_no_secrets(tmp_path, monkeypatch):
    monkeypatch.setenv("DATABASE_URL", "postgres://atrex:hunter2@db/atrex")
    monkeypatch.setenv("DJANGO_SECRET_KEY", "env-secret-key")
    bundle = tmp_path / "envdump"
    bundle.mkdir()
    (bundle / "rms_norm.py").write_text(
        '"""Puts its whole environment into its error."""\nimport os\n'
        "raise RuntimeError(repr(sorted(os.environ.items())))\nclass Model:\n    pass\n"
    )
    results = evaluate(bundle, tmp_path, operators=["rms_norm"])
    text = assert_failed(results, "rms_norm", "compile_error", "TRITON_INTERPRET")
    assert "hunter2" not in text and "env-secret-key" not in text
    assert "DATABASE_URL" not in text and "DJANGO_SECRET_KEY" not in text


def test_fork_bomb_is_stopped_and_the_next_operator_runs(tmp_path):
    token = sleep_token()
    bundle = hostile_bundle("fork_bomb", tmp_path, {"sleep": token})
    results = evaluate(bundle, tmp_path, operators=["rms_norm", "silu_and_mul"], max_processes=64)
    assert_fork_bomb_stopped(results)
    assert_honest_passes(results, "silu_and_mul")
    assert survivors(token) == []  # every sleeping child was killed


def assert_fork_bomb_stopped(results: dict) -> None:
    """Stopped by the process limit (the import fails), or first by the runner's watch over
    the child's processes (a ``sleep`` is no compiler): whichever comes first."""
    error = entry(results, "rms_norm")["error"] or ""
    if "started a process of its own" in error:
        assert_failed(results, "rms_norm", "runtime_error", "tampering", "/sleep")
    else:
        assert_failed(
            results, "rms_norm", "compile_error", "fork bomb stopped after", "temporarily"
        )


def test_filling_the_disk_is_stopped_by_file_size_and_tmp_size(tmp_path):
    bundle = hostile_bundle("fill_disk", tmp_path)
    results = evaluate(bundle, tmp_path, max_file_bytes=16 << 20, tmp_bytes=48 << 20)
    assert_failed(
        results, "fused_add_rms_norm", "compile_error", "stopped after 16 MiB", "File too large"
    )
    assert_failed(results, "rms_norm", "compile_error", "No space left on device")
    assert_honest_passes(results, "silu_and_mul")


# The endless loop's limits: the child's start (sandbox, torch, the candidate's import) takes
# about 1 s of CPU and of wall time here, so both limits are several times that (as in
# tests/evaluator/test_runner.py, which stops a hanging child after 4 s); each test checks
# that the loop was stopped in its shape, not while the child was starting.
ENDLESS_LOOP_CPU_S = 6
ENDLESS_LOOP_SILENCE_S = 6


def test_endless_loop_is_stopped_at_the_cpu_time_limit(tmp_path):
    bundle = hostile_bundle("endless_loop", tmp_path)
    results = evaluate(
        bundle,
        tmp_path,
        operators=["rms_norm", "silu_and_mul"],
        cpu_time_s=ENDLESS_LOOP_CPU_S,
        shape_timeout_s=120,
    )
    assert_failed(
        results,
        "rms_norm",
        "runtime_error",
        f"CPU time limit ({ENDLESS_LOOP_CPU_S} s",
        "during shape smoke-0",
    )
    assert_honest_passes(results, "silu_and_mul")


def test_endless_loop_is_stopped_at_the_wall_clock_limit(tmp_path):
    bundle = hostile_bundle("endless_loop", tmp_path)
    results = evaluate(
        bundle, tmp_path, operators=["rms_norm"], shape_timeout_s=ENDLESS_LOOP_SILENCE_S
    )
    assert_failed(
        results,
        "rms_norm",
        "timeout",
        f"no progress for {ENDLESS_LOOP_SILENCE_S} s while shape smoke-0",
    )


def test_host_memory_hog_is_stopped_by_the_watchdog(tmp_path):
    bundle = hostile_bundle("memory_hog", tmp_path)
    results = evaluate(
        bundle, tmp_path, operators=["rms_norm", "silu_and_mul"], memory_bytes=2 << 30
    )
    text = assert_failed(results, "rms_norm", "runtime_error", "GiB of host memory")
    assert "limit of 2.0 GiB" in text
    assert_honest_passes(results, "silu_and_mul")


def test_segfault_is_a_clear_crash_and_the_run_goes_on(tmp_path):
    bundle = hostile_bundle("segfault", tmp_path)
    results = evaluate(bundle, tmp_path, operators=["rms_norm", "silu_and_mul"])
    assert_failed(results, "rms_norm", "runtime_error", "segmentation fault")
    assert_honest_passes(results, "silu_and_mul")


def test_one_run_survives_several_hostile_operators(tmp_path):
    """A segfault, then a fork bomb, then an honest kernel, in one run (suite order)."""
    bundle = tmp_path / "mixed"
    bundle.mkdir()
    shutil.copy(HERE / "segfault" / "rms_norm.py", bundle / "fused_add_rms_norm.py")
    shutil.copy(HERE / "fork_bomb" / "rms_norm.py", bundle / "rms_norm.py")
    token = sleep_token()
    (bundle / "target.json").write_text(json.dumps({"sleep": token}))
    shutil.copy(HONEST / "silu_and_mul.py", bundle / "silu_and_mul.py")
    results = evaluate(bundle, tmp_path, max_processes=64)
    assert results["error"] is None
    assert [e["operator"] for e in results["operators"]] == OPERATORS_IN_SUITE_ORDER
    assert_failed(results, "fused_add_rms_norm", "runtime_error", "segmentation fault")
    assert_fork_bomb_stopped(results)
    assert_honest_passes(results, "silu_and_mul")
    assert survivors(token) == []


# --------------------------------------------------------------------------- GPU


def _cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


needs_cuda = pytest.mark.skipif(not _cuda(), reason="needs a CUDA GPU")


def evaluate_cuda(bundle: Path, tmp_path: Path, monkeypatch) -> dict:
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0] or "0"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)  # the children's one GPU
    return run_bundle(
        bundle_path=bundle,
        suite=smoke_suite(["rms_norm", "silu_and_mul"]),
        hardware="h200-sxm",
        device="cuda",
        shape_set="smoke",
        time_budget_s=0.2,
        log_dir=tmp_path / "logs",
        sandbox_policy=SandboxPolicy(mode="required"),
    )


@pytest.mark.gpu
@needs_cuda
def test_gpu_illegal_memory_access_fails_its_operator_only(tmp_path, monkeypatch):
    results = evaluate_cuda(hostile_bundle("gpu_illegal_access", tmp_path), tmp_path, monkeypatch)
    found = entry(results, "rms_norm")
    assert found["score"] == 0
    text = f"{found['error']} {' '.join(str(s['error']) for s in found['shapes'])}"
    assert all(s["status"] == "runtime_error" for s in found["shapes"]), text
    assert "illegal memory access" in text or "CUDA error" in text, text
    assert_honest_passes(results, "silu_and_mul")
    assert "gpu_isolation" in results["environment"]["sandbox"]["active"]


@pytest.mark.gpu
@needs_cuda
def test_gpu_memory_hog_fails_its_operator_and_frees_the_gpu(tmp_path, monkeypatch):
    results = evaluate_cuda(hostile_bundle("gpu_memory_hog", tmp_path), tmp_path, monkeypatch)
    found = entry(results, "rms_norm")
    text = f"{found['error']} {' '.join(str(s['error']) for s in found['shapes'])}"
    assert all(s["status"] == "runtime_error" for s in found["shapes"]), text
    assert "out of memory" in text, text
    assert_honest_passes(results, "silu_and_mul")
