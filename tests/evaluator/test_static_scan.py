"""The static scan: each suspicious pattern is reported with file and line; honest code is not."""

from __future__ import annotations

import sys
import textwrap

import pytest

from evaluator.static_scan import scan_candidate, scan_source, scan_sources

from .conftest import EXAMPLES, TRITON_BASELINE, example_files

FIXTURES = EXAMPLES.parents[1] / "tests" / "evaluator" / "bundles" / "fallback"

CASES = {
    "guarded fallback": """
        import torch
        def forward(x):
            try:
                kernel[(1,)](x)
            except Exception:
                return torch.nn.functional.silu(x)
    """,
    "reference import": "from evaluator.operators import rms_norm\n",
    "reference import ": "import reference\n",
    "torch.compile": """
        import torch
        fast = torch.compile(lambda x: x * 2)
    """,
    "torch.compile ": "import torch._inductor.config\n",
    "torch.compile  ": "from torch import _dynamo\n",
    "dynamic import": """
        import importlib
        F = importlib.import_module("torch.nn.functional")
    """,
    "dynamic import ": "mod = __import__('torch')\n",
    "dynamic getattr": """
        import torch
        mm = getattr(torch, "ma" + "tmul")
    """,
    "dynamic getattr ": """
        import torch.nn.functional as F
        name = "silu"
        act = getattr(F, name)
    """,
    "torch.ops.aten": """
        import torch
        out = torch.ops.aten.mm.default(a, b)
    """,
    "another Model": """
        from reference_impl import Model as Reference
        class Model(Reference):
            pass
    """,
    "another Model ": """
        import helper
        inner = helper.Model()
    """,
    "monkeypatch": """
        import torch
        torch.cuda.synchronize = lambda *a: None
    """,
    "monkeypatch ": """
        import time
        time.perf_counter = lambda: 0.0
    """,
    "monkeypatch  ": """
        import torch
        setattr(torch.cuda, "Event", object)
    """,
    "monkeypatch   ": """
        import triton.testing as tt
        tt.do_bench = None
    """,
    "threads/processes": "import threading\n",
    "threads/processes ": "from multiprocessing import Pool\n",
    "threads/processes  ": "import subprocess\n",
    "threads/processes   ": """
        import os
        os.system("nvidia-smi")
    """,
    "threads/processes    ": "import ctypes\n",
    "file write": "open('/tmp/x', 'w').write('1')\n",
    "file write ": """
        import os
        os.write(2, b"x")
    """,
    "file write  ": """
        import sys
        sys.stdout.write("x")
    """,
    "file write   ": """
        import sys
        print("x", file=sys.stderr)
    """,
    "file write    ": "open(path, mode=m)\n",
    "side stream": """
        import torch
        s = torch.cuda.Stream()
    """,
    "object introspection": "import gc\nobjs = gc.get_objects()\n",
    "other array library": "import numpy as np\n",
    "other array library ": "from cupy import asarray\n",
    "profiler introspection": """
        import torch
        on = torch.autograd.profiler._is_profiler_enabled
    """,
}


@pytest.mark.parametrize("pattern", sorted(CASES))
def test_each_pattern_is_reported_with_file_and_line(pattern):
    source = textwrap.dedent(CASES[pattern]).lstrip("\n")
    warnings = scan_source("rms_norm.py", source)
    expected = pattern.strip()
    hits = [w for w in warnings if f": {expected}: " in w]
    assert hits, warnings
    line = int(hits[0].split(":")[1])
    assert hits[0].startswith("rms_norm.py:") and 1 <= line <= source.count("\n") + 1


@pytest.mark.parametrize(
    "source",
    [
        "import torch\nout = torch.empty_like(x)\n",
        "import torch\nmm = getattr(torch, 'matmul')\n",  # a literal name is plain to see
        "open('weights.bin').read()\n",
        "open('weights.bin', 'rb').read()\n",
        "print('progress')\n",
        "import sys\nprint('x', file=sys.stdout)\n",
        "from . import helpers\n",
        "import torch\ntry:\n    y = torch.empty(3)\nexcept RuntimeError:\n    y = None\n",
    ],
)
def test_ordinary_code_gives_no_warning(source):
    assert scan_source("ok.py", source) == []


def test_honest_triton_example_bundle_gives_no_warning():
    files = example_files(TRITON_BASELINE)
    assert scan_sources({k: v for k, v in files.items() if k.endswith(".py")}) == []


@pytest.mark.parametrize(
    ("bundle", "pattern"),
    [
        ("indirect_torch", "torch.ops.aten"),
        ("indirect_torch", "dynamic getattr"),
        ("indirect_torch", "dynamic import"),
        ("torch_compile", "torch.compile"),
        ("side_stream", "side stream"),
    ],
)
def test_fixture_bundles_are_flagged(bundle, pattern):
    files = {p.name: p.read_text() for p in (FIXTURES / bundle).glob("*.py")}
    assert any(f": {pattern}: " in w for w in scan_sources(files))


def test_syntax_error_is_a_warning_not_a_crash():
    assert scan_source("bad.py", "def (:\n")[0].startswith("bad.py:1: syntax error")


def test_candidate_scan_covers_the_bundle_modules_it_imported(tmp_path, monkeypatch):
    (tmp_path / "helper_mod_scan.py").write_text("import subprocess\n")
    (tmp_path / "rms_norm.py").write_text("import helper_mod_scan\nclass Model: pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "helper_mod_scan", raising=False)
    import importlib.util

    spec = importlib.util.spec_from_file_location("cand_scan", tmp_path / "rms_norm.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    warnings = scan_candidate(module, tmp_path)
    assert warnings == ["helper_mod_scan.py:1: threads/processes: imports subprocess"]
