"""What fallback attribution reports: one shape's own-kernel share, the PyTorch ops that
did the work, and which aten ops are not compute (stdlib only: web-safe).

How the shares are measured: ``evaluator.fallback_cpu`` (CPU) and
``evaluator.fallback_cuda`` (CUDA); ``evaluator.fallback`` picks the monitor.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

NO_KERNEL_WARNING = "no device kernel ran during the monitored calls"
NO_MONITOR_WARNING = "no fallback monitor for this device"
FIRST_CALL_DECIDED_WARNING = (
    "a shape's first correctness call launched none of the bundle's own kernels: the shape "
    "is a fallback (own-kernel share 0), decided on that call; its later correctness trials "
    "were not run (a fallback scores 0 whatever they return)"
)
ALLOCATION_OPS = frozenset(
    {
        "empty",
        "empty_like",
        "empty_strided",
        "new_empty",
        "new_empty_strided",
        # Memsets: trivial fills, no arithmetic on the operator's data.
        "zeros",
        "zeros_like",
        "zero_",
        "fill_",
        "full",
        "full_like",
        "ones",
        "ones_like",
        "new_zeros",
        "new_ones",
        "new_full",
        "scalar_tensor",
        "lift_fresh",
        "lift_fresh_copy",
        "resize_",
    }
)
VIEW_OPS = frozenset(
    {
        "view",
        "_unsafe_view",
        "_reshape_alias",
        "as_strided",
        "t",
        "transpose",
        "permute",
        "expand",
        "detach",
        "alias",
        "slice",
        "select",
        "split",
        "split_with_sizes",
        "unsqueeze",
        "squeeze",
        "unbind",
        "narrow",
        "view_as_real",
        "view_as_complex",
        "unfold",
        "diagonal",
        "_local_scalar_dense",
        "sym_size",
        "sym_stride",
        "sym_numel",
        "sym_storage_offset",
        "is_contiguous",
        "is_same_size",
        "_has_compatible_shallow_copy_type",
        "set_",
        "prim",
    }
)
ALLOWED_OPS = ALLOCATION_OPS | VIEW_OPS


@dataclass
class OpStats:
    """Calls, time and bytes of one aten op seen as PyTorch compute."""

    calls: int = 0
    time_s: float = 0.0
    nbytes: int = 0


@dataclass
class FallbackReport:
    """Own-kernel share of a candidate's calls and the PyTorch compute ops seen."""

    own_kernel_share: float | None
    share_by_time: float | None = None
    share_by_bytes: float | None = None
    share_in_own_kernels: float | None = None
    """CPU with the bundle's folder: the median call's share of time inside the bundle's
    own Triton kernel launches."""
    total_s: float = 0.0
    compute_s: float = 0.0
    compute_bytes: int = 0
    top_ops: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    own_s: float | None = None
    """CUDA: device time of the submission's own kernels (``compute_s`` is the rest); CPU
    with the bundle's folder: time inside its own Triton kernel launches."""
    neutral_s: float | None = None
    """CUDA: device time of memsets and fills, counted on neither side."""
    own_activities: int = 0
    """CUDA: how many device activities were the submission's own kernels."""
    other_stream_activities: int = 0
    """CUDA: device activities of the calls that ran on a stream other than the one the
    harness called on (CUDA events on that stream do not see them; the timer must then
    time all streams)."""
    observed_call_s: float | None = None
    """The fastest watched call after the first: its device busy time (CUDA: the busiest
    stream's kernels, copies and fills) or its counted time (CPU: ``evaluator.
    counted_time``, the calling thread's wall time less its waits for a CPU). The timed
    calls must not be much faster (``evaluator.measure.unwatched_path_error``)."""
    decided_on_first_call: bool = False
    """The first watched call launched none of the bundle's own kernels: the shape is a
    fallback with share 0, its later calls were not watched (``evaluator.fallback.
    ShapeWatch``); the top ops are the first call's."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready copy."""
        return {
            "own_kernel_share": self.own_kernel_share,
            "share_by_time": self.share_by_time,
            "share_by_bytes": self.share_by_bytes,
            "share_in_own_kernels": self.share_in_own_kernels,
            "total_s": self.total_s,
            "compute_s": self.compute_s,
            "compute_bytes": self.compute_bytes,
            "own_s": self.own_s,
            "neutral_s": self.neutral_s,
            "own_activities": self.own_activities,
            "other_stream_activities": self.other_stream_activities,
            "observed_call_s": self.observed_call_s,
            "decided_on_first_call": self.decided_on_first_call,
            "top_ops": self.top_ops,
            "warnings": self.warnings,
        }
