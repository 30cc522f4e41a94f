"""PyTorch's process-wide settings that the reference's numbers and speed depend on.

The candidate shares the evaluation process with the reference, so a setting it changes
(TF32 matmuls, one CPU thread, float64 as the default dtype, another attention back-end)
also changes the reference: the values the checks compare against and the eager time the
speedups divide by. The integrity guard (``evaluator.integrity``) takes :func:`snapshot`
before the candidate is imported and names any setting that differs after a call; a
kernel of the submission's own needs none of them.

Only read here, never set: where PyTorch has the ``fp32_precision`` settings (2.9 on) they
are read instead of ``allow_tf32`` and ``get_float32_matmul_precision``, which raise once
a program has used the newer ones. Each is read as what it takes effect as: ``"none"``
defers to the level above it (``cudnn.conv`` to ``cudnn``, that to ``backends``), and at
the top means ``"ieee"``; so the references' own ``set_float32_matmul_precision("highest")``
(which turns ``"none"`` into ``"ieee"``) is no change.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch


def _attribute(label: str, owner: Any, name: str) -> tuple[str, Callable[[], Any]]:
    return f"{label}.{name}", lambda: getattr(owner, name)


def _readers() -> tuple[tuple[str, Callable[[], Any]], ...]:
    backends = torch.backends
    found = [
        ("default_dtype", torch.get_default_dtype),
        ("num_threads", torch.get_num_threads),
        ("deterministic_algorithms", torch.are_deterministic_algorithms_enabled),
        *(
            _attribute("cuda.matmul", backends.cuda.matmul, name)
            for name in (
                "allow_fp16_reduced_precision_reduction",
                "allow_bf16_reduced_precision_reduction",
            )
        ),
        *(
            _attribute("cudnn", backends.cudnn, name)
            for name in ("enabled", "benchmark", "deterministic")
        ),
        _attribute("mkldnn", backends.mkldnn, "enabled"),
    ]
    if hasattr(backends, "fp32_precision"):
        owners = {
            "backends": backends,
            "cuda.matmul": backends.cuda.matmul,
            "cudnn": backends.cudnn,
            "cudnn.conv": getattr(backends.cudnn, "conv", None),
            "cudnn.rnn": getattr(backends.cudnn, "rnn", None),
            "mkldnn": backends.mkldnn,
            "mkldnn.matmul": getattr(backends.mkldnn, "matmul", None),
            "mkldnn.conv": getattr(backends.mkldnn, "conv", None),
            "mkldnn.rnn": getattr(backends.mkldnn, "rnn", None),
        }
        found.extend(
            (f"{label}.fp32_precision", _effective_precision(label, owners))
            for label, owner in owners.items()
            if owner is not None and hasattr(owner, "fp32_precision")
        )
    else:
        found.append(("float32_matmul_precision", torch.get_float32_matmul_precision))
        found.append(_attribute("cuda.matmul", backends.cuda.matmul, "allow_tf32"))
        found.append(_attribute("cudnn", backends.cudnn, "allow_tf32"))
    for kind in ("flash", "mem_efficient", "math", "cudnn"):  # scaled_dot_product_attention
        reader = getattr(backends.cuda, f"{kind}_sdp_enabled", None)
        if reader is not None:
            found.append((f"cuda.{kind}_sdp", reader))
    return tuple(found)


PRECISION_PARENT = {
    "cuda.matmul": "backends",
    "cudnn": "backends",
    "cudnn.conv": "cudnn",
    "cudnn.rnn": "cudnn",
    "mkldnn": "backends",
    "mkldnn.matmul": "mkldnn",
    "mkldnn.conv": "mkldnn",
    "mkldnn.rnn": "mkldnn",
}
"""Where each fp32_precision setting looks when it is ``"none"``."""


def _effective_precision(label: str, owners: dict[str, Any]) -> Callable[[], str]:
    """What ``label``'s fp32_precision takes effect as: its own value, else (``"none"``)
    its parent's (``PRECISION_PARENT``), else ``"ieee"``."""
    chain = []
    while label is not None:
        if owners.get(label) is not None:
            chain.append(owners[label])
        label = PRECISION_PARENT.get(label)

    def read() -> str:
        for owner in chain:
            value = getattr(owner, "fp32_precision", "none")
            if value != "none":
                return value
        return "ieee"

    return read


READERS = _readers()


def snapshot() -> dict[str, Any]:
    """The current value of every setting, by name."""
    return {name: read() for name, read in READERS}


def changed(before: dict[str, Any]) -> list[str]:
    """Every setting that differs from ``before``, as "name (old -> new)"."""
    now = snapshot()
    return [
        f"{name} ({before[name]} -> {now[name]})"
        for name in before
        if name in now and now[name] != before[name]
    ]
