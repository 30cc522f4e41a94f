"""``python -m evaluator ceilings``: the figures a worker reports when it starts.

The CPU tests run the real command in a child process where importing Django kills it;
the GPU test measures the real device (run on the GPU machine, without Django:
``python3 -m pytest -m gpu tests/evaluator/test_ceilings.py -p no:django
--confcutdir=tests/evaluator``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
import torch

from evaluator.ceilings import SCHEMA, measure_ceilings, visible_gpu_index
from evaluator.hardware import get_profile

from .conftest import REPO

POISONED_DJANGO = "raise SystemExit('the evaluator imported django')\n"


def ceilings_cli(*args: str, tmp_path, extra_env: dict | None = None):
    poison = tmp_path / "poison"
    (poison / "django").mkdir(parents=True, exist_ok=True)
    (poison / "django" / "__init__.py").write_text(POISONED_DJANGO)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(poison)])}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    env.update(extra_env or {})
    return subprocess.run(
        [sys.executable, "-m", "evaluator", "ceilings", *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_cpu_ceilings_are_measured_quickly_without_django(tmp_path):
    out = tmp_path / "ceilings.json"
    started = time.monotonic()
    completed = ceilings_cli("--device", "cpu", "--out", str(out), tmp_path=tmp_path)
    elapsed = time.monotonic() - started
    assert completed.returncode == 0, completed.stderr
    figures = json.loads(out.read_text())
    assert figures["schema"] == SCHEMA
    assert figures["device"] == "cpu" and figures["development_only"] is True
    # Any working CPU copies more than 100 MB/s and multiplies faster than 10 MFLOP/s; a
    # broken timer (zero or negative seconds) gives inf or a negative figure.
    assert 1e8 < figures["copy_bytes_per_s"] < 1e13
    assert 1e7 < figures["bf16_gemm_flops_per_s"] < 1e14
    assert figures["environment"]["torch"]
    assert "GB/s" in completed.stderr and "TFLOP/s" in completed.stderr
    # The worker runs this at every start: it must stay a few seconds on a loaded machine.
    assert elapsed < 20, f"ceilings took {elapsed:.1f} s on cpu"


def test_cpu_ceilings_print_to_stdout_without_out(tmp_path):
    completed = ceilings_cli("--device", "cpu", tmp_path=tmp_path)
    assert completed.returncode == 0, completed.stderr
    assert json.loads(completed.stdout)["device"] == "cpu"


def test_cuda_ceilings_without_a_gpu_fail_with_a_reason(tmp_path):
    # An empty CUDA_VISIBLE_DEVICES hides every GPU, also on a GPU machine.
    completed = ceilings_cli(
        "--device", "cuda", "--out", str(tmp_path / "x.json"), tmp_path=tmp_path,
        extra_env={"CUDA_VISIBLE_DEVICES": ""},
    )  # fmt: skip
    assert completed.returncode == 1
    assert "no CUDA device" in completed.stderr
    assert not (tmp_path / "x.json").exists()


@pytest.mark.parametrize(
    ("visible", "index"), [("3", 3), ("2,5", 2), ("", 0), ("GPU-6f1c-uuid", 0), (None, 0)]
)
def test_nvidia_smi_index_follows_cuda_visible_devices(monkeypatch, visible, index):
    if visible is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    assert visible_gpu_index() == index


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_ceilings_are_within_the_datasheet():
    figures = measure_ceilings("cuda")
    print(json.dumps({k: v for k, v in figures.items() if k != "environment"}, indent=1))
    assert figures["device"] == "cuda" and figures["development_only"] is False
    assert figures["environment"]["driver"]
    if "H200" in figures["device_name"] or "H100" in figures["device_name"]:
        profile = get_profile("h200-sxm" if "H200" in figures["device_name"] else "h100-sxm")
        # Achievable ceilings sit below the datasheet and, on a healthy GPU, well above
        # half of it (on the H200: 4.27 TB/s of 4.8 and 716 of 989 TFLOP/s, DESIGN.md).
        assert 0.5 < figures["copy_bytes_per_s"] / profile.hbm_bytes_per_s < 1.02
        assert 0.4 < figures["bf16_gemm_flops_per_s"] / profile.peak_flops["bf16_tc"] < 1.02
    else:
        assert figures["copy_bytes_per_s"] > 1e11 and figures["bf16_gemm_flops_per_s"] > 1e12
    assert figures["wall_s"] < 60
