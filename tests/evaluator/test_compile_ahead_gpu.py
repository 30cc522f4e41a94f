"""``evaluator.compile_ahead`` on the GPU, with Triton compiling for real: what one process
recorded, a fresh process (an empty Triton cache, as a revised kernel's round has)
compiles ahead, in forks or threads, so that its shapes launch without compiling and
compute what they computed; a record that no longer fits is skipped."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

REPO = Path(__file__).resolve().parents[2]
KERNEL = REPO / "examples" / "bundles" / "triton-baseline" / "rms_norm.py"
SHAPES = ((5, 200), (64, 4096), (3, 1152), (7, 128), (9, 4096))

PROBE = r"""
import json, os, sys
from pathlib import Path
import torch
from triton import knobs
from evaluator import compile_ahead
from evaluator.child import import_candidate

mode, specs_path, out_path, source = sys.argv[1:5]
recorder = compile_ahead.Recorder()
recorder.install()
source = Path(source)
module = import_candidate(source, "rms_norm", source.parent)
ahead = None
if mode != "record":
    specs = json.loads(Path(specs_path).read_text())
    import threading
    meanwhile = []  # in this thread, while the compiles go on
    ahead = compile_ahead.compile_ahead(
        [module], specs, recorder=recorder, forks=mode == "forks",
        meanwhile=lambda: meanwhile.append(threading.current_thread() is threading.main_thread()),
    )
    ahead["meanwhile"] = meanwhile
def built():  # the files in Triton's cache that are compiled modules (launchers among them)
    return sorted(p.name for p in Path(os.environ["TRITON_CACHE_DIR"]).rglob("*.so"))
ahead_built = built()
at_launch = []
previous = knobs.runtime.jit_post_compile_hook
def counting(**kwargs):
    at_launch.append(kwargs["fn"].name)
    return previous(**kwargs)
knobs.runtime.jit_post_compile_hook = counting
outputs = []
for tokens, hidden in SHAPES:
    generator = torch.Generator(device="cuda").manual_seed(tokens * hidden)
    x = torch.randn(tokens, hidden, device="cuda", dtype=torch.bfloat16, generator=generator)
    weight = torch.randn(hidden, device="cuda", dtype=torch.bfloat16, generator=generator)
    outputs.append(module.Model()(x, weight).float().cpu().tolist())
torch.cuda.synchronize()
if mode == "record":
    Path(specs_path).write_text(json.dumps(recorder.specs()))
Path(out_path).write_text(json.dumps(
    {"ahead": ahead, "at_launch": at_launch, "outputs": outputs, "recorded": recorder.specs(),
     "built": built(), "ahead_built": ahead_built if mode != "record" else None}
))
"""


def _probe(tmp_path: Path, mode: str, source: Path, specs: Path, name: str) -> dict:
    cache = tmp_path / f"cache-{name}"
    cache.mkdir()
    out = tmp_path / f"{name}.json"
    env = {**os.environ, "TRITON_CACHE_DIR": str(cache), "PYTHONPATH": str(REPO)}
    env.pop("TRITON_INTERPRET", None)
    code = f"SHAPES = {SHAPES!r}\n" + PROBE
    done = subprocess.run(
        [sys.executable, "-c", code, mode, str(specs), str(out), str(source)],
        env=env, capture_output=True, text=True, timeout=240, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(out.read_text())


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("compile-ahead")
    specs = tmp_path / "specs.json"
    first = _probe(tmp_path, "record", KERNEL, specs, "record")
    return tmp_path, specs, first


def test_the_first_process_records_each_specialisation_it_compiled(recorded):
    _, specs, first = recorded
    records = json.loads(specs.read_text())
    assert len(records) >= 3, records  # hidden 200, 4096, 1152, 128: other blocks
    assert {r["function"] for r in records} == {"_rms_norm_kernel"}
    assert len(first["at_launch"]) == len(records)


@pytest.mark.parametrize("mode", ["forks", "threads"])
def test_a_fresh_process_compiles_them_ahead_and_launches_without_compiling(recorded, mode):
    tmp_path, specs, first = recorded
    again = _probe(tmp_path, mode, KERNEL, specs, mode)
    records = json.loads(specs.read_text())
    assert again["ahead"]["compiled"] == len(records), again["ahead"]
    assert again["ahead"]["failed"] == 0 and again["ahead"]["skipped"] == 0
    assert again["ahead"]["meanwhile"] == [True]
    if mode == "forks":
        assert again["ahead"]["forks"] >= 2
        # The forks built the kernels' launchers too: the launches built none.
        assert again["built"] == again["ahead_built"]
    assert again["at_launch"] == [], "a shape compiled at its launch all the same"
    assert again["outputs"] == first["outputs"]
    # Every one was launched: the next round gets them all again.
    assert sorted(r["data"] for r in again["recorded"]) == sorted(r["data"] for r in records)


def test_a_revised_kernel_with_other_parameters_compiles_at_its_launch(recorded, tmp_path):
    root, specs, first = recorded
    revised = tmp_path / "rms_norm.py"
    revised.write_text(KERNEL.read_text().replace("x_row_stride", "x_stride"))
    again = _probe(root, "forks", revised, specs, "revised")
    records = json.loads(specs.read_text())
    assert again["ahead"]["compiled"] == 0
    assert again["ahead"]["skipped"] == len(records)
    assert len(again["at_launch"]) == len(records)
    assert again["outputs"] == first["outputs"]
