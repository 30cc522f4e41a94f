"""The OS sandbox of the evaluation children (evaluator/sandbox.py).

Commands are started in real sandboxes (namespaces, mounts, user switch) and checked from
the inside; the degraded paths (no root) are checked by planning without privileges.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from evaluator import sandbox as sandbox_module
from evaluator.runner import run_bundle
from evaluator.sandbox import (
    Sandbox,
    SandboxError,
    SandboxPolicy,
    foreign_processes,
    kill_tree,
    program_name,
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
    # Only the run's own scratch folder shows in /tmp, nothing of other runs or users; and
    # the harness's own checkout, read-only, when it lies under /tmp (a clone there).
    expected = {path.parts[2] for path in (scratch, REPO) if path.parts[1] == "tmp"}
    if scratch.parts[1] == "tmp":
        assert set(seen["tmp_listing"]) == expected
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
    monkeypatch.setenv("OMP_WAIT_POLICY", "PASSIVE")  # the host's OpenMP setting does pass
    sandbox = Sandbox(policy=SandboxPolicy(), scratch=tmp_path)
    seen = run_inside(sandbox, "import json, os; print(json.dumps(dict(os.environ)))")["seen"]
    assert "CELERY_BROKER_URL" not in seen and "ATREX_AGENT_TOKEN" not in seen
    assert seen["OMP_WAIT_POLICY"] == "PASSIVE"
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
@pytest.mark.slow  # 5.3 s: a C compiler's run inside the sandbox
def test_compilation_happens_inside_the_sandbox(tmp_path):
    """A candidate that builds native code at import (a Python extension, through a build
    library, as torch's extension builder or Triton's JIT does) runs the compiler as the
    sandbox user, without network, in its private tmp; the code it built runs there too."""
    if not any(Path(d, "cc").exists() for d in os.environ.get("PATH", "").split(os.pathsep)):
        pytest.skip("no C compiler")
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    (bundle / "rms_norm.py").write_text(
        textwrap.dedent(
            '''
            """Builds a small extension at import, imports it, reports what it saw."""
            import importlib.util
            import os
            import sysconfig
            import tempfile

            from setuptools._distutils import ccompiler

            SOURCE = r"""
            #include <Python.h>
            #include <unistd.h>
            #include <sys/socket.h>
            #include <netinet/in.h>
            #include <arpa/inet.h>
            static PyObject *probe(PyObject *self, PyObject *args) {
                int s = socket(AF_INET, SOCK_STREAM, 0);
                struct sockaddr_in a = {0};
                a.sin_family = AF_INET; a.sin_port = htons(5432);
                inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
                int connected = connect(s, (void *)&a, sizeof a);
                return PyUnicode_FromFormat("uid=%d connect=%d", (int)getuid(), connected);
            }
            static PyMethodDef methods[] = {{"probe", probe, METH_NOARGS, NULL}, {NULL}};
            static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "probe", NULL, -1, methods};
            PyMODINIT_FUNC PyInit_probe(void) { return PyModule_Create(&module); }
            """
            tmp = tempfile.gettempdir()
            source = os.path.join(tmp, "probe.c")
            with open(source, "w") as handle:
                handle.write(SOURCE)
            compiler = ccompiler.new_compiler()
            objects = compiler.compile(
                [source], output_dir=tmp, include_dirs=[sysconfig.get_paths()["include"]],
                extra_preargs=["-fPIC"],
            )
            library = os.path.join(tmp, "probe" + sysconfig.get_config_var("EXT_SUFFIX"))
            compiler.link_shared_object(objects, library)
            spec = importlib.util.spec_from_file_location("probe", library)
            probe = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(probe)
            raise RuntimeError(f"built in {tmp}: {probe.probe()}")


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
        '"""Starts a daemon in a session of its own (through multiprocessing\'s spawn helper:\n'
        'subprocess is refused to a submission), then fails."""\n'
        "import os, shutil\n"
        "from multiprocessing import util\n"
        'setsid = os.fsencode(shutil.which("setsid"))\n'
        f'util.spawnv_passfds(setsid, ["setsid", "sleep", "{token}"], ())\n'
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
    error = results["operators"][0]["error"]
    # The import fails at once; the runner's process watch may see the daemon first.
    assert "left a daemon behind" in error or "started a process of its own" in error, error
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


PROCESS_TREE = """
import os, subprocess, sys, time
token, ptxas = sys.argv[1], sys.argv[2]
subprocess.Popen(["sleep", token])
subprocess.Popen(["setsid", "sleep", token])  # leaves the session, stays in the tree
subprocess.Popen([ptxas, token])  # a compiler's name, run from a writable folder
subprocess.Popen(["gcc", "-x", "c", "-o", "/dev/null", "-"], stdin=subprocess.PIPE)
if os.fork() == 0:  # a copy of this process that has not exec'd (yet)
    time.sleep(60)
    os._exit(0)
print("ready", flush=True)
time.sleep(60)
"""


@pytest.mark.parametrize(
    ("path", "name"),
    [
        ("/usr/bin/x86_64-linux-gnu-gcc-12", "gcc"),
        ("/opt/gcc/bin/gcc-real", "gcc"),  # the H200 machine's gcc is a wrapper around this
        ("/sbin/ldconfig.real", "ldconfig"),
        ("/usr/lib/gcc/x86_64-linux-gnu/13/cc1", "cc1"),
        ("/usr/bin/ld.bfd", "ld.bfd"),
        ("/usr/bin/python3.11", "python3.11"),
        ("/usr/bin/python3-real", "python3"),
    ],
)
def test_program_names_lose_target_prefixes_versions_and_wrapper_suffixes(path, name):
    assert program_name(path) == name


def test_processes_below_a_child_that_no_compiler_explains_are_named(tmp_path, monkeypatch):
    token = sleep_token()
    ptxas = tmp_path / "ptxas"
    ptxas.write_bytes(Path("/bin/sleep").read_bytes())
    ptxas.chmod(0o755)
    leader = subprocess.Popen(
        [sys.executable, "-c", PROCESS_TREE, token, str(ptxas)],
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        assert leader.stdout.readline() == b"ready\n"
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # until gcc has started cc1 and each sleep runs
            found = foreign_processes(leader.pid)
            # (setsid runs sleep only after it has left the session: until then it is named
            # as itself, with the token among its arguments.)
            sleeping = [f for f in found if "/sleep (sleep " + token in f]
            if (
                len(sleeping) >= 2
                and any(str(ptxas) in f for f in found)
                and any("cc1" in line for line in _cmdlines_below(leader.pid))
            ):
                break
            time.sleep(0.1)
        found = foreign_processes(leader.pid)
        assert len([f for f in found if "/sleep (sleep " + token in f]) == 2, found
        assert any(f"{ptxas} ({ptxas} {token})" in f for f in found), found
        assert not any("gcc" in f or "cc1" in f for f in found), found
        assert not any("python" in f.split()[1] for f in found), found
        # The copy that has not exec'd is named once it is older than a fork takes.
        monkeypatch.setattr(sandbox_module, "FORK_GRACE_S", 0.0)
        python = os.path.realpath(sys.executable)
        copies = [f for f in foreign_processes(leader.pid) if f.split()[1] == python]
        assert len(copies) == 1, copies
    finally:
        kill_tree(leader.pid)
        leader.wait(timeout=10)
    assert survivors(token) == []  # the one that left the session was killed too


def test_the_systems_file_below_a_child_is_a_tool_a_copy_in_a_writable_place_is_not(tmp_path):
    # Python's platform.architecture() runs "file -b" from library code (seen on the H200
    # below an honest child's first call); a program of that name the child could have
    # written is the submission's.
    system_file = shutil.which("file")
    if system_file is None:
        pytest.skip("no file(1) on this machine")
    token = sleep_token()
    copy = tmp_path / "file"
    copy.write_bytes(Path("/bin/sleep").read_bytes())
    copy.chmod(0o755)
    # sh gives a background command /dev/null for its input unless told otherwise: file(1)
    # reads the pipe through fd 3, so it waits on it until it is closed.
    leader = subprocess.Popen(
        ["sh", "-c", f'exec 3<&0; {system_file} -b - <&3 & "{copy}" {token} & echo ready; wait'],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        assert leader.stdout.readline() == b"ready\n"
        deadline = time.monotonic() + 10
        while True:
            names = [line.split("\0")[0] for line in _cmdlines_below(leader.pid)]
            if system_file in names and str(copy) in names:
                break
            assert time.monotonic() < deadline, f"both programs never ran at once: {names}"
            time.sleep(0.05)
        found = foreign_processes(leader.pid, writable=[str(tmp_path)])
        assert any(f"{copy} ({copy} {token})" in f for f in found), found
        assert not any(f.split()[1] == os.path.realpath(system_file) for f in found), found
    finally:
        kill_tree(leader.pid)
        leader.wait(timeout=10)


def _cmdlines_below(session: int) -> list[str]:
    lines = []
    for pid in sandbox_module.descendants(session, None):
        try:
            lines.append(Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace"))
        except OSError:
            continue
    return lines


def test_a_process_running_before_the_child_is_not_counted_as_the_childs():
    """An orphan adopted by the harness's process counts as the child's only if it started
    after the child: the harness's own earlier processes (a Celery worker, torch's compile
    workers in the same test process) are not the submission computing elsewhere."""
    uid = os.getuid()
    earlier = subprocess.Popen(["sleep", "30"])  # noqa: S607 - a fixed test program
    time.sleep(0.05)  # a clock tick or more apart (100 a second)
    leader = subprocess.Popen(["sleep", "30"], start_new_session=True)  # noqa: S607
    time.sleep(0.05)
    later = subprocess.Popen(["sleep", "30"])  # noqa: S607 - as an orphan the child left here
    try:
        found = sandbox_module.descendants(leader.pid, uid)
        assert leader.pid in found  # the child's session
        assert later.pid in found  # started after the child: it may be the child's
        assert earlier.pid not in found  # running before the child: it is not
    finally:
        for process in (earlier, leader, later):
            process.kill()
            process.wait(timeout=10)


def test_a_childs_triton_cache_outlives_it_and_is_copied_into_a_later_child(tmp_path):
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    sandbox = Sandbox(policy=SandboxPolicy(), scratch=scratch)
    first = sandbox.child("rms_norm", None, cache="rms_norm")
    process, _ = sandbox.launch(
        [sys.executable, "-c", textwrap.dedent(
            """
            import os
            folder = os.path.join(os.environ["TRITON_CACHE_DIR"], "abc")
            os.makedirs(folder)
            with open(os.path.join(folder, "k.cubin"), "w") as handle:
                handle.write("compiled")
            """
        )],
        first, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err.decode()
    # Kept after the child (its private temp folder is not), then copied for a later one.
    assert (scratch / "caches" / "rms_norm" / "abc" / "k.cubin").read_text() == "compiled"
    later = sandbox.child("sanitizer", None, cache="sanitizer-memcheck-1", cache_from=["rms_norm"])
    seen = run_inside_child(
        sandbox, later, "import os, json; p = os.environ['TRITON_CACHE_DIR']; "
        "print(json.dumps([p, open(os.path.join(p, 'abc', 'k.cubin')).read()]))",
    )  # fmt: skip
    assert seen == [later.cache_dir, "compiled"]
    assert later.cache_dir != first.cache_dir


def run_inside_child(sandbox: Sandbox, child, code: str):
    process, _ = sandbox.launch(
        [sys.executable, "-c", code], child,
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err.decode()
    return json.loads(out.decode().splitlines()[-1])
