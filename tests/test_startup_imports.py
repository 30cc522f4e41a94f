"""``django.setup()`` imports neither pandas nor torch.

Every Django process pays for what setup imports: each test process, every `manage.py`
command, the worker, each child the site starts. pandas (about 1.2 s of CPU here) serves
only the traces' aggregation and is imported there, in the functions that build frames;
torch is not in the site's image at all (tests/evaluator/test_web_safe.py). A module-level
``import pandas`` in anything the apps, models or admin import brings it back, and this
test fails, naming which module imported it.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
HEAVY = ("pandas", "torch")

# In a fresh interpreter: record which module first imported each heavy package (the
# innermost frame of the project's own code on the stack), then set Django up.
PROBE = """
import builtins, json, sys, traceback

HEAVY = set(sys.argv[1].split(","))
first_importer = {}
original_import = builtins.__import__

def watching_import(name, *args, **kwargs):
    top = name.split(".")[0]
    if top in HEAVY and top not in sys.modules and top not in first_importer:
        stack = [f"{f.filename}:{f.lineno}" for f in traceback.extract_stack()[:-1]]
        own = [line for line in stack if sys.argv[2] in line and "/.venv/" not in line]
        first_importer[top] = own[-1] if own else stack[-1]
    return original_import(name, *args, **kwargs)

builtins.__import__ = watching_import
import django
django.setup()
loaded = sorted(top for top in HEAVY if top in sys.modules)
print(json.dumps({"loaded": loaded, "first_importer": first_importer}))
"""


def _setup_imports(settings_module: str) -> dict:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": settings_module}
    done = subprocess.run(
        [sys.executable, "-c", PROBE, ",".join(HEAVY), str(REPO)],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_django_setup_imports_neither_pandas_nor_torch():
    found = _setup_imports("atrex_site.settings.test")
    assert found["loaded"] == [], found["first_importer"]


def test_the_probe_sees_a_heavy_import_and_names_its_importer(tmp_path):
    # The check can fail: an app whose models module imports pandas at module level.
    app = tmp_path / "pandas_at_import"
    app.mkdir()
    (app / "__init__.py").write_text("")
    (app / "models.py").write_text("import pandas  # noqa: F401\n")
    (tmp_path / "settings_with_app.py").write_text(
        "from atrex_site.settings.test import *  # noqa: F403\n"
        "INSTALLED_APPS = [*INSTALLED_APPS, 'pandas_at_import']  # noqa: F405\n"
    )
    pythonpath = os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": pythonpath}
    done = subprocess.run(
        [sys.executable, "-c", PROBE, ",".join(HEAVY), str(tmp_path)],
        cwd=REPO, env={**env, "DJANGO_SETTINGS_MODULE": "settings_with_app"},
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["loaded"] == ["pandas"]
    assert found["first_importer"]["pandas"].endswith("pandas_at_import/models.py:1")


@pytest.mark.parametrize("module", HEAVY)
def test_each_heavy_package_is_installed_so_the_check_means_something(module):
    # pandas is a dependency of the traces pages; torch of the evaluator (dev extras).
    assert importlib.util.find_spec(module) is not None
