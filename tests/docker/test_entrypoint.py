"""The commands the images run, run here (no Docker engine on these machines): the
entrypoint's web, worker and gpu-node commands start and answer on loopback against the
test PostgreSQL and Redis; the compose file is checked with the compose client."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from django.conf import settings

from fleet.models import WorkerNode
from tests.conftest import _database_url

REPO = Path(__file__).resolve().parents[2]
ENTRYPOINT = REPO / "docker" / "entrypoint.sh"
COMPOSE = REPO / "docker" / "compose.yaml"


def production_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """The environment the images set, pointed at the test database and broker."""
    env = {
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "HOME": str(tmp_path),
        "LANG": "C.UTF-8",
        "PYTHONPATH": str(REPO),
        "DJANGO_SETTINGS_MODULE": "atrex_site.settings.production",
        "DJANGO_SECRET_KEY": "entrypoint-test-only",
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1",
        "DJANGO_SECURE_SSL_REDIRECT": "false",
        "DATABASE_URL": _database_url(),
        "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
        "DJANGO_STATIC_ROOT": str(tmp_path / "static"),
        "DJANGO_MEDIA_ROOT": str(tmp_path / "media"),
        "ATREX_VAR_DIR": str(tmp_path / "var"),
        "ATREX_DEFAULT_SUITE": "atrex-bench-v0.1",
        "ATREX_DEFAULT_HARDWARE": "cpu-dev",
    }
    env.update(extra)
    return env


def start(command: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    with log.open("wb") as out:
        return subprocess.Popen(
            [str(ENTRYPOINT), *command], cwd=tmp_cwd(log), env=env, stdout=out,
            stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip


def tmp_cwd(log: Path) -> Path:
    # Not the repository: the entrypoint must find the code by itself.
    return log.parent


def stop(process: subprocess.Popen, timeout_s: float = 30.0) -> int:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    return process.returncode


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_for(predicate, *, timeout_s: float, what: str, log: Path, process=None):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        if process is not None and process.poll() is not None:
            break
        time.sleep(0.3)
    raise AssertionError(
        f"no {what} within {timeout_s} s:\n{log.read_text(errors='replace')[-4000:]}"
    )


def http_get(url: str):
    try:
        with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310 - loopback
            return response.status, dict(response.headers), response.read()
    except OSError:
        return None


def compose_client() -> list[str] | None:
    docker = shutil.which("docker")
    if (
        docker
        and subprocess.run([docker, "compose", "version"], capture_output=True).returncode == 0
    ):
        return [docker, "compose"]
    legacy = shutil.which("docker-compose")
    return [legacy] if legacy else None


def test_compose_file_defines_the_full_stack(tmp_path):
    client = compose_client()
    if client is None:
        pytest.skip("no compose client (docker compose plugin or docker-compose) installed")
    env_file = tmp_path / "env"
    example = (REPO / "docker" / ".env.example").read_text()
    env_file.write_text(
        example.replace("DJANGO_SECRET_KEY=\n", "DJANGO_SECRET_KEY=check\n").replace(
            "POSTGRES_PASSWORD=\n", "POSTGRES_PASSWORD=check\n"
        )
    )
    isolated = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}
    checked = subprocess.run(
        [*client, "-f", str(COMPOSE), "--env-file", str(env_file), "config"],
        capture_output=True, text=True, env=isolated,
    )  # fmt: skip
    assert checked.returncode == 0, checked.stderr
    config = checked.stdout
    for service in (
        "postgres:",
        "redis:",
        "migrate:",
        "web:",
        "site-worker:",
        "beat:",
        "gpu-node:",
    ):
        assert f"\n  {service}\n" in config, service
    assert "driver: nvidia" in config and "service_completed_successfully" in config
    assert "- SYS_ADMIN" in config  # the evaluation sandbox needs it in the GPU container
    assert "DATABASE_URL: postgres://atrex:check@postgres:5432/atrex" in config
    # Without the secrets, the compose client refuses and says which one is missing.
    missing = subprocess.run(
        [*client, "-f", str(COMPOSE), "--env-file", str(REPO / "docker" / ".env.example"),
         "config"], capture_output=True, text=True, env=isolated,
    )  # fmt: skip
    assert missing.returncode != 0
    assert "set DJANGO_SECRET_KEY" in missing.stderr or "set POSTGRES_PASSWORD" in missing.stderr


def test_requirements_script_lists_what_the_images_install():
    def listed(*args):
        out = subprocess.run(
            [sys.executable, str(REPO / "docker" / "requirements.py"), *args],
            capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        return [line.split(">")[0].split("[")[0].split("=")[0].lower() for line in out.split()]

    web = listed()
    assert {"django", "gunicorn", "whitenoise", "celery", "psycopg"} <= set(web)
    assert "torch" not in web
    gpu = listed("--extra", "evaluator", "--without", "torch,triton")
    assert "numpy" in gpu and "torch" not in gpu and "triton" not in gpu and "django" in gpu
    bad = subprocess.run(
        [sys.executable, str(REPO / "docker" / "requirements.py"), "--extra", "nope"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert bad.returncode != 0 and "no extra 'nope'" in bad.stderr


def test_worker_command_refuses_to_start_without_its_hardware(tmp_path):
    completed = subprocess.run(
        [str(ENTRYPOINT), "worker"], env=production_env(tmp_path), cwd=tmp_path,
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert completed.returncode == 64
    assert "ATREX_HARDWARE must be set" in completed.stderr


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_web_command_serves_the_board_and_static_files(
    tmp_path, catalogue, close_other_db_sessions_at_the_end
):
    port = free_port()
    env = production_env(tmp_path, ATREX_BIND=f"127.0.0.1:{port}", GUNICORN_WORKERS="1")
    collected = subprocess.run(
        [str(ENTRYPOINT), "collectstatic"], env=env, cwd=tmp_path, capture_output=True,
        text=True, timeout=300,
    )  # fmt: skip
    assert collected.returncode == 0, collected.stderr
    log = tmp_path / "web.log"
    web = start(["web"], env, log)
    try:
        board = wait_for(
            lambda: http_get(f"http://127.0.0.1:{port}/"), timeout_s=90, what="web answer",
            log=log, process=web,
        )  # fmt: skip
        css = http_get(f"http://127.0.0.1:{port}/static/css/site.css")
    finally:
        stop(web)
    status, _, body = board
    assert status == 200 and b"Atrex-Bench Portal" in body
    assert css is not None and css[0] == 200 and b"--accent" in css[2]
    assert "max-age" in css[1].get("Cache-Control", "")  # served by whitenoise
    assert "gunicorn" in log.read_text(errors="replace").lower()


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_gpu_node_starts_one_pinned_worker_per_gpu(
    tmp_path, catalogue, close_other_db_sessions_at_the_end
):
    # On this CPU machine the "GPUs" are only CUDA_VISIBLE_DEVICES values, and the workers
    # evaluate on the CPU: what is checked is one registered process per listed GPU.
    env = production_env(
        tmp_path, ATREX_HARDWARE="cpu-dev", ATREX_GPUS="0,1", ATREX_WORKER_DEVICE="cpu",
        ATREX_FLEET_HEARTBEAT_S="1", ATREX_FLEET_MEASURE_CEILINGS="false",
        ATREX_SANDBOX_UID_BASE="61000", ATREX_CONCURRENCY="2",
    )  # fmt: skip
    env.pop("ATREX_SANDBOX_USER", None)
    env.pop("ATREX_SANDBOX_MORE_USERS", None)
    log = tmp_path / "gpu-node.log"
    node = start(["gpu-node"], env, log)
    host = socket.gethostname()
    names = {f"gpu0.cpu-dev@{host}": "0", f"gpu1.cpu-dev@{host}": "1"}
    users = {}
    try:
        wait_for(
            lambda: WorkerNode.objects.filter(name__in=names, status="online").count() == 2,
            timeout_s=120, what="two workers online", log=log, process=node,
        )  # fmt: skip
        for worker in WorkerNode.objects.filter(name__in=names):
            environ = Path(f"/proc/{worker.pid}/environ").read_bytes().split(b"\0")
            variables = dict(item.decode().split("=", 1) for item in environ if b"=" in item)
            users[worker.cuda_visible_devices] = (
                variables.get("ATREX_SANDBOX_USER"),
                variables.get("ATREX_SANDBOX_SECOND_USER"),
                variables.get("ATREX_SANDBOX_THIRD_USER"),
                variables.get("ATREX_SANDBOX_MORE_USERS"),
                variables.get("ATREX_CONCURRENCY"),
            )
    finally:
        code = stop(node, timeout_s=60)
    # Each GPU's children run as sandbox users of their own: two operators at once, the
    # next one started ahead and the sanitizer's, four a GPU.
    assert users == {
        "0": ("61000", "61001", "61002", "61003", "2"),
        "1": ("61004", "61005", "61006", "61007", "2"),
    }
    workers = {w.name: w for w in WorkerNode.objects.filter(name__in=names)}
    assert {name: w.cuda_visible_devices for name, w in workers.items()} == names
    assert all(w.queues == ["eval.cpu-dev"] and w.concurrency == 1 for w in workers.values())
    # TERM reached both workers: each shut down warmly and said so.
    assert {w.status for w in workers.values()} == {"stopped"}, log.read_text()[-3000:]
    assert code is not None


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_migrate_command_migrates_and_loads_the_suites(
    tmp_path, close_other_db_sessions_at_the_end
):
    from catalogue.models import HardwareProfile, SuiteVersion

    completed = subprocess.run(
        [str(ENTRYPOINT), "migrate"], env=production_env(tmp_path), cwd=tmp_path,
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert re.search(r"^suite atrex-bench-v1: \d+ shapes", completed.stdout, re.M)
    assert SuiteVersion.objects.filter(name="atrex-bench", version="v1").exists()
    assert HardwareProfile.objects.filter(slug="h200-sxm").exists()


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_site_worker_registers_on_the_site_queue_without_ceilings(
    tmp_path, close_other_db_sessions_at_the_end
):
    env = production_env(tmp_path, ATREX_FLEET_HEARTBEAT_S="1")
    log = tmp_path / "site-worker.log"
    worker = start(["site-worker"], env, log)
    name = f"site@{socket.gethostname()}"
    try:
        node = wait_for(
            lambda: WorkerNode.objects.filter(name=name, status="online").first(),
            timeout_s=90, what="the site worker online", log=log, process=worker,
        )  # fmt: skip
    finally:
        stop(worker)
    assert node.queues == ["site"] and node.hardware_profile == ""
    # A CPU worker for site work measures nothing and says why.
    assert node.ceilings_status == "not_measured"
    assert "no evaluation queue" in node.ceilings_error
