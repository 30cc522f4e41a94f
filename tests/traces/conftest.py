"""Traces recorded here, on the CPU, by scripts/record_trace.py (real torch.profiler
output, not written by hand); recorded once per test session."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

PROJECT_ROOT = Path(__file__).resolve().parents[2]
RECORDER = PROJECT_ROOT / "scripts" / "record_trace.py"


def record(out: Path, *, model: str, engine: str, layers: int = 1, device: str = "cpu") -> Path:
    subprocess.run(  # noqa: S603 - fixed argv
        [
            sys.executable,
            str(RECORDER),
            "--model",
            model,
            "--engine",
            engine,
            "--size",
            "tiny",
            "--device",
            device,
            "--layers",
            str(layers),
            "--out",
            str(out),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    return out


@pytest.fixture(scope="session")
def vllm_moe_trace(tmp_path_factory) -> Path:
    """A tiny Qwen3-MoE-shaped layer through vLLM's op names, gzipped."""
    return record(
        tmp_path_factory.mktemp("traces") / "moe.json.gz", model="qwen3-30b-a3b", engine="vllm"
    )


@pytest.fixture(scope="session")
def plain_trace(tmp_path_factory) -> Path:
    """A tiny Llama-shaped layer written as a plain PyTorch model (aten ops only), as JSON."""
    return record(
        tmp_path_factory.mktemp("traces") / "plain.json", model="llama3-8b", engine="plain"
    )
