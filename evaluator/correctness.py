"""Correctness of a candidate against the reference, per shape, under the operator's policy.

Every trial draws fresh inputs from a seed derived from the run's secret seed; the
reference and the candidate each get their own copy; outputs are compared in float64.
Besides the values, a candidate must return the same structure, shapes, dtypes and
device as the reference, plain ``torch.Tensor`` objects that do not share memory with
the inputs, and it must leave its inputs unchanged.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from evaluator.errors import EvaluationError
from evaluator.operators.base import CorrectnessPolicy, OperatorSpec


class CandidateError(EvaluationError):
    """The candidate raised while being called (status ``runtime_error``)."""

    code = "eval:runtime-error"


@dataclass
class Comparison:
    """The outcome of comparing one candidate output with the reference's."""

    ok: bool
    error: str | None = None
    max_abs_error: float = 0.0
    mismatch_share: float = 0.0

    def merge(self, other: Comparison) -> Comparison:
        """The worse of two outcomes, keeping the first failure's message."""
        return Comparison(
            ok=self.ok and other.ok,
            error=self.error if not self.ok else other.error,
            max_abs_error=max(self.max_abs_error, other.max_abs_error),
            mismatch_share=max(self.mismatch_share, other.mismatch_share),
        )


def derive_seed(run_seed: int, *parts: object) -> int:
    """A 31-bit seed from the run's seed and a purpose (``'correctness', op, shape, trial``)."""
    text = "|".join(str(part) for part in (run_seed, *parts))
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "big") & 0x7FFFFFFF


def clone_inputs(inputs: Mapping[str, Any]) -> dict[str, Any]:
    """A deep copy of named inputs (tensors cloned with their strides, others as they are)."""
    return {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}


def poison_allocator(device: torch.device, nbytes: int) -> None:
    """Leave NaN-filled blocks in CUDA's caching allocator so stale ``torch.empty`` shows.

    On CPU freed memory is returned to the C allocator and is not reliably reused, so
    this does nothing there.
    """
    if device.type != "cuda" or nbytes <= 0:
        return
    block = torch.full((nbytes // 4 + 1,), float("nan"), dtype=torch.float32, device=device)
    del block


def output_nbytes(output: Any) -> int:
    """Total bytes of the tensors of an output structure."""
    return sum(
        t.numel() * t.element_size()
        for _, t in _leaves(output, "out")
        if isinstance(t, torch.Tensor)
    )


def _leaves(output: Any, prefix: str) -> list[tuple[str, Any]]:
    if isinstance(output, Mapping):
        return [(str(key), output[key]) for key in sorted(output, key=str)]
    if isinstance(output, list | tuple):
        return [(f"output[{i}]", value) for i, value in enumerate(output)]
    return [(prefix, output)]


def _structure_error(reference: Any, candidate: Any) -> str | None:
    if isinstance(reference, Mapping):
        if not isinstance(candidate, Mapping):
            return f"expected a dict with keys {sorted(reference)}, got {type(candidate).__name__}"
        if set(candidate) != set(reference):
            return f"expected dict keys {sorted(reference)}, got {sorted(map(str, candidate))}"
    elif isinstance(reference, list | tuple):
        if not isinstance(candidate, list | tuple):
            return f"expected a tuple of {len(reference)}, got {type(candidate).__name__}"
        if len(candidate) != len(reference):
            return f"expected a tuple of {len(reference)} outputs, got {len(candidate)}"
    elif isinstance(reference, torch.Tensor) and isinstance(candidate, Mapping | list | tuple):
        return f"expected one tensor, got {type(candidate).__name__}"
    return None


def compare_tensors(
    reference: torch.Tensor, candidate: Any, *, policy: CorrectnessPolicy, where: str
) -> Comparison:
    """Compare one output leaf; ``where`` ('shape 3, output out') prefixes every message."""
    if type(candidate) is not torch.Tensor:
        return Comparison(
            False,
            f"{where}: expected a plain torch.Tensor, got "
            f"{type(candidate).__module__}.{type(candidate).__qualname__}",
        )
    if candidate.shape != reference.shape:
        return Comparison(
            False, f"{where}: shape {tuple(candidate.shape)}, expected {tuple(reference.shape)}"
        )
    if policy.check_dtype and candidate.dtype != reference.dtype:
        return Comparison(False, f"{where}: dtype {candidate.dtype}, expected {reference.dtype}")
    if candidate.device != reference.device:
        return Comparison(False, f"{where}: on {candidate.device}, expected {reference.device}")
    if not (reference.is_floating_point() or candidate.is_floating_point()):
        equal = torch.equal(reference, candidate)
        mismatched = 0.0 if equal else float((reference != candidate).double().mean())
        error = (
            None
            if equal
            else (
                f"{where}: integer output differs in {mismatched:.2%} of "
                "elements (integers must match exactly)"
            )
        )
        return Comparison(equal, error, 0.0 if equal else float("inf"), mismatched)
    return _compare_floating(reference, candidate, policy=policy, where=where)


def _compare_floating(
    reference: torch.Tensor, candidate: torch.Tensor, *, policy: CorrectnessPolicy, where: str
) -> Comparison:
    ref = reference.detach().to(torch.float64)
    cand = candidate.detach().to(torch.float64)
    if ref.numel() == 0:
        return Comparison(True)
    ref_finite = torch.isfinite(ref)
    cand_finite = torch.isfinite(cand)
    # Non-finite reference entries must be matched exactly (same inf, or NaN for NaN).
    same_nonfinite = (torch.isnan(ref) & torch.isnan(cand)) | (~ref_finite & (ref == cand))
    bad_nonfinite = (~cand_finite & ref_finite) | (~ref_finite & ~same_nonfinite)
    safe_ref = torch.where(ref_finite, ref, torch.zeros_like(ref))
    safe_cand = torch.where(cand_finite, cand, torch.zeros_like(cand))
    abs_error = (safe_cand - safe_ref).abs()
    scale = float(safe_ref.abs().max())
    atol = max(policy.atol_floor, policy.atol_scale * scale)
    bad = bad_nonfinite | (ref_finite & (abs_error > atol + policy.rtol * safe_ref.abs()))
    bad_count = int(bad.sum())
    share = bad_count / ref.numel()
    max_abs_error = float("inf") if bool(bad_nonfinite.any()) else float(abs_error.max())
    if share <= policy.max_mismatch_share:
        return Comparison(True, None, max_abs_error, share)
    worst = int(torch.where(bad, abs_error.nan_to_num(posinf=1e308) + 1, 0).argmax())
    index = tuple(int(i) for i in torch.unravel_index(torch.tensor(worst), ref.shape))
    detail = (
        f"max abs error {max_abs_error:.4g}; {bad_count} of {ref.numel()} elements "
        f"({share:.2%}) outside |cand - ref| <= {atol:.3g} + {policy.rtol:.3g}*|ref|; "
        f"worst at {index}: reference {float(ref.flatten()[worst]):.6g}, "
        f"candidate {float(cand.flatten()[worst]):.6g}"
    )
    if bool(bad_nonfinite.any()):
        detail = f"NaN/Inf where the reference is finite; {detail}"
    return Comparison(False, f"{where}: {detail}", max_abs_error, share)


def compare_outputs(
    reference: Any, candidate: Any, *, policy: CorrectnessPolicy, shape_id: str
) -> Comparison:
    """Compare a whole output structure (tensor, dict or tuple) with the reference's."""
    problem = _structure_error(reference, candidate)
    if problem:
        return Comparison(False, f"shape {shape_id}: wrong output structure: {problem}")
    result = Comparison(True)
    ref_leaves = _leaves(reference, "out")
    cand_leaves = dict(_leaves(candidate, "out")) if isinstance(candidate, Mapping) else None
    for position, (name, ref_leaf) in enumerate(ref_leaves):
        if cand_leaves is not None:
            cand_leaf = cand_leaves[name]
        else:
            cand_leaf = _leaves(candidate, "out")[position][1]
        where = f"shape {shape_id}, output {name!r}"
        if not isinstance(ref_leaf, torch.Tensor):
            if ref_leaf != cand_leaf:
                return Comparison(False, f"{where}: {cand_leaf!r}, expected {ref_leaf!r}")
            continue
        result = result.merge(compare_tensors(ref_leaf, cand_leaf, policy=policy, where=where))
        if not result.ok:
            return result
    return result


def _storage_span(tensor: torch.Tensor) -> tuple[int, int]:
    storage = tensor.untyped_storage()
    start = storage.data_ptr()
    return start, start + storage.nbytes()


def hygiene_error(
    candidate_output: Any,
    inputs: Mapping[str, Any],
    saved_inputs: Mapping[str, Any],
    *,
    shape_id: str,
) -> str | None:
    """Why the call broke the rules (output aliases an input, input modified), or None."""
    input_spans = {
        name: _storage_span(value)
        for name, value in inputs.items()
        if isinstance(value, torch.Tensor) and value.untyped_storage().nbytes()
    }
    for out_name, leaf in _leaves(candidate_output, "out"):
        if not isinstance(leaf, torch.Tensor) or not leaf.untyped_storage().nbytes():
            continue
        out_start, out_end = _storage_span(leaf)
        for in_name, (in_start, in_end) in input_spans.items():
            if out_start < in_end and in_start < out_end:
                return (
                    f"shape {shape_id}, output {out_name!r} shares memory with input "
                    f"{in_name!r}; return newly allocated tensors"
                )
    for name, saved in saved_inputs.items():
        current = inputs[name]
        if isinstance(saved, torch.Tensor) and not torch.equal(saved, current):
            return (
                f"shape {shape_id}: the candidate modified its input {name!r}; inputs must "
                "be left unchanged"
            )
    return None


@dataclass
class ShapeCorrectness:
    """Correctness of one shape over all its trials."""

    ok: bool
    error: str | None
    max_abs_error: float
    mismatch_share: float
    trials: int


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def call_candidate(model: Callable[..., Any], inputs: Mapping[str, Any], *, shape_id: str) -> Any:
    """Call the candidate; any exception becomes a CandidateError naming the shape."""
    try:
        return model(**inputs)
    except Exception as exc:  # the candidate's failure, whatever it is
        raise CandidateError(f"shape {shape_id}: {type(exc).__name__}: {exc}") from exc


def check_shape(
    *,
    spec: OperatorSpec,
    reference: Callable[..., Any],
    candidate: Callable[..., Any],
    shape_id: str,
    input_kwargs: Mapping[str, Any],
    device: torch.device,
    run_seed: int,
    trials: int | None = None,
    policy: CorrectnessPolicy | None = None,
    call_wrapper: Callable[[Callable[[], Any]], Any] | None = None,
) -> ShapeCorrectness:
    """Run ``trials`` correctness trials of one shape (fresh inputs each); stop at a failure.

    ``call_wrapper(fn)`` runs each candidate call (the fallback monitor uses it to watch
    the very calls whose outputs are checked). Raises CandidateError when the candidate
    raises.
    """
    wrap = call_wrapper or (lambda fn: fn())
    policy = policy or spec.policy
    count = trials if trials is not None else policy.trials
    total = Comparison(True)
    for trial in range(count):
        seed = derive_seed(run_seed, "correctness", spec.slug, shape_id, trial)
        with torch.inference_mode():
            inputs = spec.make_inputs(device=device, seed=seed, **dict(input_kwargs))
            reference_output = reference(**clone_inputs(inputs))
            candidate_inputs = clone_inputs(inputs)
            poison_allocator(device, output_nbytes(reference_output))
            candidate_output = wrap(
                functools.partial(call_candidate, candidate, candidate_inputs, shape_id=shape_id)
            )
            _synchronize(device)
            total = total.merge(
                compare_outputs(
                    reference_output, candidate_output, policy=policy, shape_id=shape_id
                )
            )
            if total.ok:
                problem = hygiene_error(
                    candidate_output, candidate_inputs, inputs, shape_id=shape_id
                )
                if problem:
                    total = Comparison(False, problem, total.max_abs_error, total.mismatch_share)
        if not total.ok:
            return ShapeCorrectness(
                False, total.error, total.max_abs_error, total.mismatch_share, trial + 1
            )
    return ShapeCorrectness(True, None, total.max_abs_error, total.mismatch_share, count)


def names_of(output: Any) -> Sequence[str]:
    """Output leaf names as used in messages ('out', dict keys, 'output[i]')."""
    return [name for name, _ in _leaves(output, "out")]
