"""The OS sandbox of the evaluation children (evaluator/sandbox.py).

Commands are started in real sandboxes (namespaces, mounts, user switch) and checked from
the inside; the degraded paths (no root) are checked by planning without privileges.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from evaluator.runner import run_bundle
from evaluator.sandbox import (
    Sandbox,
    SandboxError,
    SandboxPolicy,
    untraversable_ancestors,
)

from .hostile.test_hostile import HONEST, sleep_token, smoke_suite, survivors

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="the full sandbox needs root")


def run_inside(sandbox: Sandbox, code: str, *args: str, bundle: Path | None = None) -> dict:
    """Run Python ``code`` in a fresh child sandbox; its last stdout line as JSON."""
    child = sandbox.child("test", bundle)
    process, report = sandbox.launch(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        child,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err.decode()
    return {"seen": json.loads(out.decode().splitlines()[-1]), "report": report, "child": child}


def test_policy_from_the_environment():
    policy = SandboxPolicy.from_environment(
        {
            "ATREX_SANDBOX": "required",
            "ATREX_SANDBOX_CPU_S": "90",
            "ATREX_SANDBOX_MEMORY_MB": "2048",
            "ATREX_SANDBOX_HIDE": os.pathsep.join(["/srv/media", "/srv/env"]),
        },
        hidden_paths=["/srv/runs"],
    )
    assert policy.mode == "required" and policy.cpu_time_s == 90
    assert policy.memory_bytes == 2048 * 1024 * 1024
    assert policy.hidden_paths == ("/srv/media", "/srv/env", "/srv/runs")
    assert SandboxPolicy.from_environment({}).mode == "best-effort"


@pytest.mark.parametrize(
    ("environ", "words"),
    [
        ({"ATREX_SANDBOX": "off"}, "Unknown sandbox mode 'off'"),
        ({"ATREX_SANDBOX_CPU_S": "lots"}, "ATREX_SANDBOX_CPU_S='lots' is not a whole number"),
        ({"ATREX_SANDBOX_PROCESSES": "0"}, "must be positive"),
    ],
)
def test_bad_policy_settings_are_platform_errors(environ, words):
    with pytest.raises(SandboxError) as caught:
        SandboxPolicy.from_environment(environ)
    assert caught.value.code == "platform:sandbox" and words in caught.value.message


def test_without_privileges_best_effort_reports_what_is_missing(tmp_path):
    sandbox = Sandbox(policy=SandboxPolicy(), scratch=tmp_path, privileged=False)
    section = sandbox.probe()
    assert {"network", "mounts", "user"} <= set(section["missing"])
    assert "does not run as root" in section["missing"]["network"]
    assert {"rlimits", "clean_environment", "memory_watchdog"} <= set(section["active"])


def test_without_privileges_required_mode_is_a_platform_error(tmp_path):
    sandbox = Sandbox(policy=SandboxPolicy(mode="required"), scratch=tmp_path, privileged=False)
    with pytest.raises(SandboxError) as caught:
        sandbox.probe()
    assert "required" in caught.value.message
    assert "network (" in caught.value.message and "user (" in caught.value.message


def test_required_mode_fails_the_run_as_a_platform_error(tmp_path, monkeypatch):
    import evaluator.runner as runner_module

    class Unprivileged(Sandbox):
        def __post_init__(self) -> None:
            self.privileged = False
            super().__post_init__()

    monkeypatch.setattr(runner_module, "Sandbox", Unprivileged)
    with pytest.raises(SandboxError):
        run_bundle(
            bundle_path=HONEST,
            suite=smoke_suite(["rms_norm"]),
            hardware="cpu-dev",
            device="cpu",
            sandbox_policy=SandboxPolicy(mode="required"),
        )


def test_cli_reports_a_required_sandbox_it_cannot_give_as_a_platform_failure(tmp_path):
    """As an unprivileged user (``setpriv`` when run as root) ``--sandbox required`` exits 1
    with a ``platform:sandbox`` error in results.json."""
    from .conftest import REPO

    out = tmp_path / "results.json"
    command = [sys.executable, "-m", "evaluator", "run", str(HONEST / "rms_norm.py"),
               "--device", "cpu", "--operators", "rms_norm", "--sandbox", "required",
               "--out", str(out)]  # fmt: skip
    if os.geteuid() == 0:
        # Python under /root is not reachable by nobody: keep root, drop the capabilities
        # the sandbox needs instead (no CAP_SYS_ADMIN: no namespaces).
        command = ["capsh", "--drop=cap_sys_admin,cap_setuid,cap_setgid", "--", "-c",
                   " ".join(f"'{c}'" for c in command)]  # fmt: skip
        if subprocess.run(["which", "capsh"], capture_output=True).returncode:
            pytest.skip("capsh is not installed")
    completed = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert completed.returncode == 1, completed.stderr
    error = json.loads(out.read_text())["error"]
    assert error["code"] == "platform:sandbox", error
    assert "network" in error["message"]


@root_only
def test_inside_the_sandbox(tmp_path):
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    (bundle / "rms_norm.py").write_text("x = 1\n")
    from .conftest import REPO

    site_state = REPO / "var"  # the site's database, uploads and runs, when there are any
    policy = SandboxPolicy(
        mode="required", hidden_paths=(str(site_state),) if site_state.is_dir() else ()
    )
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    sandbox = Sandbox(policy=policy, scratch=scratch)
    sandbox.prepare_bundle(bundle)
    result = run_inside(
        sandbox,
        """
        import errno, json, os, socket, sys
        bundle, hidden = sys.argv[1], sys.argv[2:]
        def attempt(action):
            try:
                action()
                return "ok"
            except OSError as exc:
                return errno.errorcode.get(exc.errno, str(exc.errno))
        tmp = os.environ["TMPDIR"]
        print(json.dumps({
            "uid": os.getuid(),
            "groups": os.getgroups(),
            "hidden": [len(os.listdir(p)) for p in hidden],
            "tmp_listing": sorted(os.listdir("/tmp")),
            "write_tmp": attempt(lambda: open(os.path.join(tmp, "f"), "w").close()),
            "write_bundle": attempt(lambda: open(os.path.join(bundle, "x.py"), "w").close()),
            "read_bundle": open(os.path.join(bundle, "rms_norm.py")).read(),
            "write_root": attempt(lambda: open("/evil", "w").close()),
            "connect": attempt(lambda: socket.create_connection(("127.0.0.1", 5432), 2)),
            "env": sorted(os.environ),
        }))
        """,
        str(bundle),
        *policy.hidden_paths,
        bundle=bundle,
    )
    seen, report = result["seen"], result["report"]
    assert seen["uid"] == 65534 and seen["groups"] == []
    assert all(count == 0 for count in seen["hidden"])
    # Only the run's own scratch folder shows in /tmp, nothing of other runs or users.
    if scratch.parts[1] == "tmp":
        assert seen["tmp_listing"] == [scratch.parts[2]]
    assert seen["write_tmp"] == "ok"
    assert seen["write_bundle"] in ("EROFS", "EACCES")
    assert seen["read_bundle"] == "x = 1\n"
    assert seen["write_root"] in ("EROFS", "EACCES")
    assert seen["connect"] == "ENETUNREACH"
    assert "PATH" in seen["env"] and "HOME" in seen["env"]
    assert report["missing"] == {}
    assert {"network", "mounts", "user", "private_tmp", "no_new_privs"} <= set(report["active"])


@root_only
def test_secrets_are_not_in_the_environment_of_a_child(tmp_path, monkeypatch):
    monkeypatch.setenv("CELERY_BROKER_URL", "redis://:password@broker:6379/0")
    monkeypatch.setenv("ATREX_AGENT_TOKEN", "tok-123")
    sandbox = Sandbox(policy=SandboxPolicy(), scratch=tmp_path)
    seen = run_inside(sandbox, "import json, os; print(json.dumps(dict(os.environ)))")["seen"]
    assert "CELERY_BROKER_URL" not in seen and "ATREX_AGENT_TOKEN" not in seen
    assert seen["HOME"] == seen["TMPDIR"] and seen["TRITON_CACHE_DIR"].startswith(seen["HOME"])


def test_untraversable_ancestors_are_found(tmp_path):
    locked = tmp_path / "locked"
    inner = locked / "python" / "lib"
    inner.mkdir(parents=True)
    locked.chmod(0o700)
    found = untraversable_ancestors([str(inner)], uid=65534, gid=65534)
    assert str(locked) in found
    assert str(inner.parent) not in found


@root_only
def test_compilation_happens_inside_the_sandbox(tmp_path):
    """A candidate that builds native code at import (as a C++/CUDA extension or Triton's
    JIT does) runs its compiler as the sandbox user, without network, in its private tmp."""
    if not any(Path(d, "cc").exists() for d in os.environ.get("PATH", "").split(os.pathsep)):
        pytest.skip("no C compiler")
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    (bundle / "rms_norm.py").write_text(
        textwrap.dedent(
            '''
            """Builds and runs a small native program at import, then reports what it saw."""
            import os
            import subprocess
            import tempfile

            SOURCE = r"""
            #include <stdio.h>
            #include <unistd.h>
            #include <sys/socket.h>
            #include <netinet/in.h>
            #include <arpa/inet.h>
            int main(void) {
                int s = socket(AF_INET, SOCK_STREAM, 0);
                struct sockaddr_in a = {0};
                a.sin_family = AF_INET; a.sin_port = htons(5432);
                inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
                printf("uid=%d connect=%d", getuid(), connect(s, (void *)&a, sizeof a));
                return 0;
            }
            """
            out = os.path.join(tempfile.gettempdir(), "probe")
            subprocess.run(["cc", "-x", "c", "-", "-o", out], input=SOURCE.encode(), check=True)
            seen = subprocess.run([out], capture_output=True, text=True).stdout
            raise RuntimeError(f"built in {tempfile.gettempdir()}: {seen}")


            class Model:
                pass
            '''
        )
    )
    results = run_bundle(
        bundle_path=bundle,
        suite=smoke_suite(["rms_norm"]),
        hardware="cpu-dev",
        device="cpu",
        log_dir=tmp_path / "logs",
        sandbox_policy=SandboxPolicy(mode="required"),
    )
    (entry,) = results["operators"]
    assert entry["status"] == "compile_error", entry["error"]
    assert "uid=65534 connect=-1" in entry["error"]
    private = results["environment"]["sandbox"]["details"]["private_tmp"]
    assert private["tmpfs"] is True
    assert "/sandbox-" in entry["error"].split("built in ", 1)[1]


@root_only
def test_a_process_that_leaves_its_session_is_still_killed(tmp_path):
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    token = sleep_token()
    (bundle / "rms_norm.py").write_text(
        '"""Starts a daemon in a session of its own, then fails."""\n'
        "import subprocess\n"
        f'subprocess.Popen(["sleep", "{token}"], start_new_session=True)\n'
        'raise RuntimeError("left a daemon behind")\n'
        "class Model:\n    pass\n"
    )
    results = run_bundle(
        bundle_path=bundle,
        suite=smoke_suite(["rms_norm"]),
        hardware="cpu-dev",
        device="cpu",
        log_dir=tmp_path / "logs",
        sandbox_policy=SandboxPolicy(mode="required"),
    )
    assert "left a daemon behind" in results["operators"][0]["error"]
    assert survivors(token) == []


@root_only
def test_an_unknown_sandbox_user_is_reported_or_refused(tmp_path):
    policy = SandboxPolicy(user="no-such-user-atrex")
    section = Sandbox(policy=policy, scratch=tmp_path).probe()
    assert "no-such-user-atrex" in section["missing"]["user"]
    assert section["checked_inside"]["uid"] == 0  # kept root, and says so
    assert "could undo" in section["missing"]["mounts"]
    with pytest.raises(SandboxError) as caught:
        Sandbox(policy=SandboxPolicy(mode="required", user="no-such-user-atrex"), scratch=tmp_path)
    assert "ATREX_SANDBOX_USER" in caught.value.message
