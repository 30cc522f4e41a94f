"""Correctness of a candidate against the reference, per shape, under the operator's policy.

Every trial draws fresh inputs from a seed derived from the run's secret seed; the
reference and the candidate each get their own copy; outputs are compared in float64.
Besides the values, a candidate must return the same structure, shapes, dtypes and
device as the reference, plain ``torch.Tensor`` objects that do not share memory with
the inputs, and it must leave its inputs unchanged.

Within a trial the candidate runs first, on memory poisoned with NaN, and the reference
after it: while the candidate runs, the right answer exists nowhere in the process (not
in a local of the harness, not in freed memory) for it to find. Its output is copied as
soon as the call returns and must still hold the same values after the reference has
run: an output that a leftover thread fills in later shows up.
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
    mean_tolerance_used: float = 0.0
    """Mean of |cand - ref| / (atol + rtol*|ref|) over the elements (1.0 = at the limit):
    steadier than the maximum, so a growing error shows against an honest kernel's noise."""

    def merge(self, other: Comparison) -> Comparison:
        """The worse of two outcomes, keeping the first failure's message."""
        return Comparison(
            ok=self.ok and other.ok,
            error=self.error if not self.ok else other.error,
            max_abs_error=max(self.max_abs_error, other.max_abs_error),
            mismatch_share=max(self.mismatch_share, other.mismatch_share),
            mean_tolerance_used=max(self.mean_tolerance_used, other.mean_tolerance_used),
        )


def derive_seed(run_seed: int, *parts: object) -> int:
    """A 31-bit seed from the run's seed and a purpose (``'correctness', op, shape, trial``)."""
    text = "|".join(str(part) for part in (run_seed, *parts))
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "big") & 0x7FFFFFFF


def clone_inputs(inputs: Mapping[str, Any]) -> dict[str, Any]:
    """A deep copy of named inputs (tensors cloned with their strides, others as they are)."""
    return {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}


def poison_allocator(device: torch.device, nbytes: int) -> None:
    """Free NaN-filled memory of ``nbytes`` just before a candidate call.

    CUDA's caching allocator hands the block out again to the next allocation of a
    similar size; on CPU the C allocator's free lists do the same for small blocks (large
    ones go back to the system and come back zeroed). Either way an output that the
    candidate allocated but never wrote reads as NaN or zeros, never as an old answer.
    """
    if nbytes <= 0:
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
    used = float((abs_error / (atol + policy.rtol * safe_ref.abs())).mean())
    if share <= policy.max_mismatch_share:
        return Comparison(True, None, max_abs_error, share, used)
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
    return Comparison(False, f"{where}: {detail}", max_abs_error, share, used)


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


def echo_error(
    candidate_output: Any, reference_output: Any, inputs: Mapping[str, Any], *, shape_id: str
) -> str | None:
    """Why an output that is one of the inputs, unchanged, is no answer (or None).

    Where the operator's answer really is an input (the reference's output equals it too)
    there is nothing wrong; elsewhere a copy of an input that happens to land within the
    tolerance is not a computed result.
    """
    references = dict(_leaves(reference_output, "out"))
    for out_name, leaf in _leaves(candidate_output, "out"):
        if type(leaf) is not torch.Tensor:
            continue
        for in_name, value in inputs.items():
            if (
                isinstance(value, torch.Tensor)
                and value.shape == leaf.shape
                and value.dtype == leaf.dtype
                and value.device == leaf.device
                and torch.equal(value, leaf)
            ):
                expected = references.get(out_name)
                if isinstance(expected, torch.Tensor) and expected.shape == value.shape:
                    if torch.equal(expected, value):
                        continue
                return (
                    f"shape {shape_id}, output {out_name!r} is input {in_name!r} unchanged; "
                    "that is not this operator's answer"
                )
    return None


def snapshot_outputs(output: Any) -> Any:
    """A copy of an output taken as the call returns (plain tensors cloned, others as is)."""
    if isinstance(output, Mapping):
        return {key: snapshot_outputs(value) for key, value in output.items()}
    if isinstance(output, list | tuple):
        return type(output)(snapshot_outputs(value) for value in output)
    if type(output) is torch.Tensor:
        return output.detach().clone()
    return output


def _same_bits(first: torch.Tensor, second: torch.Tensor) -> bool:
    if first.shape != second.shape or first.dtype != second.dtype:
        return False
    flat_first = first.detach().reshape(-1).contiguous().view(torch.uint8)
    return torch.equal(flat_first, second.detach().reshape(-1).contiguous().view(torch.uint8))


def changed_after_return_error(snapshot: Any, output: Any, *, shape_id: str) -> str | None:
    """Why the output changed after the call had returned (deferred work), or None."""
    taken = dict(_leaves(snapshot, "out"))
    for name, leaf in _leaves(output, "out"):
        before = taken.get(name)
        if type(leaf) is torch.Tensor and type(before) is torch.Tensor:
            if not _same_bits(before, leaf):
                return (
                    f"shape {shape_id}, output {name!r} changed after the call had returned: "
                    "work that finishes after the call (a thread, another stream) is not "
                    "allowed"
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
    mean_tolerance_used: float = 0.0
    """The largest mean share of the tolerance used by a trial's output: the error level of
    the first, closely checked calls, against which later calls' error is compared."""


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def call_candidate(model: Callable[..., Any], inputs: Mapping[str, Any], *, shape_id: str) -> Any:
    """Call the candidate; any exception (SystemExit too) becomes a CandidateError."""
    try:
        return model(**inputs)
    except SystemExit as exc:  # sys.exit() in a kernel: the shape fails, the run goes on
        raise CandidateError(
            f"shape {shape_id}: the candidate called sys.exit({exc.code!r}) (SystemExit); "
            "a Model must return its outputs"
        ) from exc
    except Exception as exc:  # the candidate's failure, whatever it is
        raise CandidateError(f"shape {shape_id}: {type(exc).__name__}: {exc}") from exc


def input_nbytes(inputs: Mapping[str, Any]) -> int:
    """Total bytes of the tensors among named inputs."""
    return sum(v.numel() * v.element_size() for v in inputs.values() if isinstance(v, torch.Tensor))


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
    after_call: Callable[[], None] | None = None,
) -> ShapeCorrectness:
    """Run ``trials`` correctness trials of one shape (fresh inputs each); stop at a failure.

    Per trial: poison the allocator, call the candidate, synchronise, run ``after_call``
    (the child's tampering and thread checks, which raise), copy the output, and only
    then run the reference. ``call_wrapper(fn)`` runs each candidate call (the fallback
    monitor uses it to watch the very calls whose outputs are checked). Raises
    CandidateError when the candidate raises.
    """
    wrap = call_wrapper or (lambda fn: fn())
    policy = policy or spec.policy
    count = trials if trials is not None else policy.trials
    total = Comparison(True)
    poison_bytes = 0
    for trial in range(count):
        seed = derive_seed(run_seed, "correctness", spec.slug, shape_id, trial)
        with torch.inference_mode():
            inputs = spec.make_inputs(device=device, seed=seed, **dict(input_kwargs))
            candidate_inputs = clone_inputs(inputs)
            poison_allocator(device, max(poison_bytes, input_nbytes(inputs)))
            candidate_output = wrap(
                functools.partial(call_candidate, candidate, candidate_inputs, shape_id=shape_id)
            )
            _synchronize(device)
            if after_call is not None:
                after_call()
            returned = snapshot_outputs(candidate_output)
            # The reference runs only now: the answer did not exist while the candidate ran.
            reference_output = reference(**clone_inputs(inputs))
            poison_bytes = output_nbytes(reference_output)
            total = total.merge(
                compare_outputs(reference_output, returned, policy=policy, shape_id=shape_id)
            )
            if total.ok:
                _synchronize(device)
                problem = (
                    hygiene_error(candidate_output, candidate_inputs, inputs, shape_id=shape_id)
                    or echo_error(returned, reference_output, inputs, shape_id=shape_id)
                    or changed_after_return_error(returned, candidate_output, shape_id=shape_id)
                )
                if problem:
                    total = Comparison(False, problem, total.max_abs_error, total.mismatch_share)
        if not total.ok:
            return ShapeCorrectness(
                False, total.error, total.max_abs_error, total.mismatch_share, trial + 1
            )
    return ShapeCorrectness(
        True, None, total.max_abs_error, total.mismatch_share, count, total.mean_tolerance_used
    )


def names_of(output: Any) -> Sequence[str]:
    """Output leaf names as used in messages ('out', dict keys, 'output[i]')."""
    return [name for name, _ in _leaves(output, "out")]
