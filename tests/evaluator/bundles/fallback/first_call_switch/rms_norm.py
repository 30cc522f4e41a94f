"""RMSNorm that changes its path with the call: its own Triton kernel on the calls that
``schedule.json`` beside it lists in ``own_on`` (1 is the first call), plain PyTorch on the
others, and a wrong answer (the right one times 1.5) on the calls listed in ``wrong_on``.

The tests copy the bundle and write the schedule they need: its own kernel first and
PyTorch after (watched on every call, judged as before), PyTorch first and its own kernel
after (a fallback decided on the first call), a wrong answer on a later call of a PyTorch
path (caught although that call is not watched). The schedule is a data file, not a
module, so that copies imported into one process do not share it.
"""

import json
from pathlib import Path

import torch
import triton
import triton.language as tl
from torch import nn

_SCHEDULE = json.loads((Path(__file__).parent / "schedule.json").read_text())
OWN_ON = frozenset(_SCHEDULE.get("own_on", []))
WRONG_ON = frozenset(_SCHEDULE.get("wrong_on", []))


@triton.jit
def _first_call_switch_rms_kernel(x_ptr, w_ptr, out_ptr, hidden, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < hidden
    x = tl.load(x_ptr + row * hidden + cols, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    out = x * tl.rsqrt(tl.sum(x * x, axis=0) / hidden + eps) * w
    tl.store(out_ptr + row * hidden + cols, out.to(out_ptr.dtype.element_ty), mask=mask)


def triton_rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    hidden = x.shape[-1]
    out = torch.empty_like(x)
    grid = (x.numel() // hidden,)
    _first_call_switch_rms_kernel[grid](
        x, weight, out, hidden, eps, BLOCK=triton.next_power_of_2(hidden)
    )
    return out


def torch_rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(x.dtype)


class Model(nn.Module):
    def __init__(self, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.calls = 0

    def forward(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        path = triton_rms_norm if self.calls in OWN_ON else torch_rms_norm
        out = path(x, weight, self.eps)
        if self.calls in WRONG_ON:
            out = (out.float() * 1.5).to(out.dtype)
        return out
