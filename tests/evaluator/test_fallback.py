"""Fallback attribution on CPU: PyTorch compute inside a candidate's call is caught."""

from __future__ import annotations

import importlib.util
import textwrap
from pathlib import Path

import pytest
import torch

from evaluator.fallback import CUDA_WARNING, FallbackMonitor, is_allowed_op, measure_fallback
from evaluator.operators import get_operator

from .conftest import PYTORCH_EAGER, TRITON_BASELINE

CPU = torch.device("cpu")
THRESHOLD = 0.8
SHAPES = {
    "rms_norm": {"token_count": 8, "hidden_size": 200},
    "silu_and_mul": {"shape": [8, 600]},
    "fused_add_rms_norm": {"token_count": 8, "hidden_size": 300},
}

TRIVIAL_TRITON_PART = """
import torch
import triton
import triton.language as tl
from torch import nn


@triton.jit
def _touch(out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(out_ptr + offsets, mask=mask), mask=mask)


class Model(nn.Module):
    def __init__(self, eps=1e-6):
        super().__init__()
        self.eps = eps

    def forward(self, x, weight):
        xf = x.float()
        out = (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
               * weight.float()).to(x.dtype)
        _touch[(1,)](out, 16, BLOCK=16)  # a real Triton launch that does nothing useful
        return out
"""

SMALL_TORCH_HELPER = """
import torch
from torch import nn
from triton_rms import Model as TritonModel


class Model(TritonModel):
    def forward(self, x, weight):
        # A tiny torch op on the (H,) weight; the (T, H) work stays in Triton.
        return super().forward(x, weight.float().to(weight.dtype))
"""


def load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def own_share(model, operator: str, **input_kwargs):
    spec = get_operator(operator)
    kwargs = input_kwargs or SHAPES[operator]
    inputs = spec.make_inputs(device=CPU, seed=3, **kwargs)
    work = spec.work({}, kwargs)
    with torch.inference_mode():
        return measure_fallback(
            lambda: model(**inputs), device=CPU, q_bytes=work.q_read + work.q_write
        )


@pytest.mark.parametrize("operator", sorted(SHAPES))
def test_pure_pytorch_example_is_flagged(operator):
    model = load(PYTORCH_EAGER / f"{operator}.py", f"eager_{operator}").Model()
    report = own_share(model, operator)
    assert report.own_kernel_share < THRESHOLD
    assert report.share_by_time < THRESHOLD  # flagged by time alone, too
    assert report.top_ops and report.top_ops[0]["op"].startswith("aten.")


@pytest.mark.parametrize("operator", sorted(SHAPES))
def test_triton_example_is_not_flagged(operator):
    model = load(TRITON_BASELINE / f"{operator}.py", f"triton_{operator}").Model()
    report = own_share(model, operator)
    assert report.own_kernel_share >= 0.99, report.top_ops
    # The interpreter's own argument copies (storage.cpu(), copy_) are not counted.
    assert report.top_ops == []


def test_trivial_triton_launch_around_pytorch_compute_is_flagged(tmp_path):
    (tmp_path / "cheat.py").write_text(TRIVIAL_TRITON_PART)
    model = load(tmp_path / "cheat.py", "cheat_rms_norm").Model()
    report = own_share(model, "rms_norm")
    assert report.own_kernel_share < THRESHOLD
    names = [op["op"] for op in report.top_ops]
    assert "aten.mean.dim" in names and "aten.pow.Tensor_Scalar" in names


def test_small_torch_helper_beside_a_triton_kernel_is_not_flagged(tmp_path, monkeypatch):
    (tmp_path / "triton_rms.py").write_text((TRITON_BASELINE / "rms_norm.py").read_text())
    (tmp_path / "helper.py").write_text(SMALL_TORCH_HELPER)
    monkeypatch.syspath_prepend(str(tmp_path))
    model = load(tmp_path / "helper.py", "helper_rms_norm").Model()
    report = own_share(model, "rms_norm", token_count=64, hidden_size=128)
    assert report.own_kernel_share >= THRESHOLD
    assert report.top_ops  # the helper's ops are still listed


def test_views_and_allocations_are_not_compute():
    monitor = FallbackMonitor()
    x = torch.randn(4, 6)

    def call():
        y = torch.empty_like(x)
        z = x.view(6, 4).reshape(24).view(4, 6).t()  # reshape of contiguous = a view
        return y, z, torch.zeros(3), x[1:, ::2], x.unsqueeze(0).expand(2, 4, 6)

    with torch.inference_mode():
        monitor.call(call)
    assert monitor.report(q_bytes=None).top_ops == []


def test_clone_and_casts_count_as_compute():
    monitor = FallbackMonitor()
    x = torch.randn(4, 6)
    with torch.inference_mode():
        monitor.call(lambda: (x.clone(), x.to(torch.bfloat16), x.t().contiguous()))
    names = {op["op"] for op in monitor.report(q_bytes=None).top_ops}
    assert "aten.clone.default" in names and "aten._to_copy.default" in names


def test_allowed_op_table():
    assert is_allowed_op(torch.ops.aten.empty.memory_format)
    assert is_allowed_op(torch.ops.aten.view.default)
    assert not is_allowed_op(torch.ops.aten.mm.default)
    assert not is_allowed_op(torch.ops.aten.copy_.default)


def test_cuda_has_no_attribution_yet_but_a_warning():
    report = measure_fallback(lambda: None, device=torch.device("cuda"), q_bytes=100)
    assert report.own_kernel_share is None and report.warnings == [CUDA_WARNING]


def test_monitor_source_is_dedented():
    # The cheat above must be a real, parseable module.
    compile(textwrap.dedent(TRIVIAL_TRITON_PART), "cheat.py", "exec")
