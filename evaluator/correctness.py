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

import contextlib
import functools
import hashlib
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from evaluator.errors import EvaluationError
from evaluator.operators.base import CorrectnessPolicy, Fp8CodePolicy, OperatorSpec

LeafRule = CorrectnessPolicy | Fp8CodePolicy

_clock = time.perf_counter  # bound at import, before any candidate code runs


class PhaseClock:
    """Adds the wall seconds of named harness phases into a dict (``into[name] += s``).

    On CUDA each phase starts and ends with a device synchronise, so that the work a
    phase queued is counted in it and not in the next one (a few microseconds each).
    Nothing it measures feeds a verdict or a score: the figures go into a shape's
    ``wall_s`` in results.json, for ``bench/where_time_goes.py``.
    """

    def __init__(self, device: torch.device, into: dict[str, float] | None) -> None:
        self.device = device
        self.into = into

    @contextlib.contextmanager
    def __call__(self, name: str) -> Any:
        if self.into is None:
            yield
            return
        _synchronize(self.device)
        started = _clock()
        try:
            yield
        finally:
            _synchronize(self.device)
            self.into[name] = round(self.into.get(name, 0.0) + _clock() - started, 6)


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


def fresh_reference(
    spec: OperatorSpec, init_kwargs: Mapping[str, Any], device: torch.device
) -> Callable[..., Any]:
    """The reference as ``check_shape`` is to call it: the operator's ``Model`` built afresh
    on ``device`` for each call, after the candidate's. An instance that existed while the
    candidate ran is within its reach (the garbage collector lists it) and could have been
    given another forward or hooks of its own."""

    def reference(**inputs: Any) -> Any:
        return spec.build_reference(init_kwargs).to(device)(**inputs)

    return reference


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
    reference: torch.Tensor,
    candidate: Any,
    *,
    policy: LeafRule,
    where: str,
    scales: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> Comparison:
    """Compare one output leaf; ``where`` ('shape 3, output out') prefixes every message.

    ``policy`` is the leaf's rule; a ``CorrectnessPolicy`` given for a ``float8_e4m3fn``
    leaf stands for its rule of that leaf (the fp8 code rule unless it names another).
    ``scales`` is (reference's, candidate's) scale leaf, for an fp8 rule with a scale.
    """
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
    if isinstance(policy, CorrectnessPolicy) and reference.dtype == torch.float8_e4m3fn:
        policy = policy.rule_for(None, reference.dtype)
    check_dtype = policy.check_dtype if isinstance(policy, CorrectnessPolicy) else True
    if check_dtype and candidate.dtype != reference.dtype:
        return Comparison(False, f"{where}: dtype {candidate.dtype}, expected {reference.dtype}")
    if candidate.device != reference.device:
        return Comparison(False, f"{where}: on {candidate.device}, expected {reference.device}")
    if isinstance(policy, Fp8CodePolicy):
        return compare_fp8_codes(reference, candidate, rule=policy, where=where, scales=scales)
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
    result = _compare_floating(reference, candidate, policy=policy, where=where)
    if result.ok and policy.tight is not None:
        tight = _compare_floating(reference, candidate, policy=policy.tight, where=where)
        if not tight.ok:
            return Comparison(
                False,
                f"{tight.error} (this output's tighter rule, which at most "
                f"{policy.tight.max_mismatch_share:.2%} of the elements may miss)",
                result.max_abs_error,
                tight.mismatch_share,
                result.mean_tolerance_used,
            )
        result.mismatch_share = max(result.mismatch_share, tight.mismatch_share)
    return result


# Elements per chunk of a floating comparison: each float64 temporary of a chunk is 128 MiB
# whatever the output's size. In one piece the comparison held about 20 output-sized float64
# temporaries at once: 125 GiB for block_scaled_mm's largest output (704,512 x 2,048 fp32),
# out of GPU memory on the H200 (results/2026-12-01-h200-session7).
FLOAT_CHUNK_ELEMENTS = 1 << 24


def _compare_floating(
    reference: torch.Tensor, candidate: torch.Tensor, *, policy: CorrectnessPolicy, where: str
) -> Comparison:
    total = reference.numel()
    if total == 0:
        return Comparison(True)
    ref_flat = reference.detach().reshape(-1)
    cand_flat = candidate.detach().reshape(-1)
    chunks = [
        slice(start, min(total, start + FLOAT_CHUNK_ELEMENTS))
        for start in range(0, total, FLOAT_CHUNK_ELEMENTS)
    ]
    # The tolerance's scale is the reference's largest finite magnitude, over all chunks.
    scale = 0.0
    for chunk in chunks:
        ref = ref_flat[chunk].to(torch.float64)
        scale = max(scale, float(torch.where(torch.isfinite(ref), ref, 0.0).abs().max()))
    atol = max(policy.atol_floor, policy.atol_scale * scale)
    bad_count = 0
    any_bad_nonfinite = False
    largest_error = 0.0
    used_sum = 0.0
    worst, worst_key = 0, 0.0
    for chunk in chunks:
        ref = ref_flat[chunk].to(torch.float64)
        cand = cand_flat[chunk].to(torch.float64)
        ref_finite = torch.isfinite(ref)
        cand_finite = torch.isfinite(cand)
        # Non-finite reference entries must be matched exactly (same inf, or NaN for NaN).
        same_nonfinite = (torch.isnan(ref) & torch.isnan(cand)) | (~ref_finite & (ref == cand))
        bad_nonfinite = (~cand_finite & ref_finite) | (~ref_finite & ~same_nonfinite)
        safe_ref = torch.where(ref_finite, ref, 0.0)
        abs_error = (torch.where(cand_finite, cand, 0.0) - safe_ref).abs()
        del ref, cand, same_nonfinite
        limit = atol + policy.rtol * safe_ref.abs()
        del safe_ref
        bad = bad_nonfinite | (ref_finite & (abs_error > limit))
        bad_count += int(bad.sum())
        any_bad_nonfinite = any_bad_nonfinite or bool(bad_nonfinite.any())
        largest_error = max(largest_error, float(abs_error.max()))
        # Where the rule is exact (a zero limit), an exact element uses none of it.
        ratio = torch.where(
            limit > 0, abs_error / limit.clamp_min(1e-300), abs_error * float("inf")
        )
        used_sum += float(ratio.nan_to_num(nan=0.0).sum())
        del ratio, limit
        key = torch.where(bad, abs_error.nan_to_num(posinf=1e308) + 1, 0.0)
        index = int(key.argmax())
        if float(key[index]) > worst_key:  # the first of the largest, as one argmax finds
            worst, worst_key = chunk.start + index, float(key[index])
        del key, bad, abs_error, bad_nonfinite, ref_finite, cand_finite
    share = bad_count / total
    max_abs_error = float("inf") if any_bad_nonfinite else largest_error
    used = used_sum / total
    if share <= policy.max_mismatch_share:
        return Comparison(True, None, max_abs_error, share, used)
    index = tuple(int(i) for i in torch.unravel_index(torch.tensor(worst), reference.shape))
    detail = (
        f"max abs error {max_abs_error:.4g}; {bad_count} of {total} elements "
        f"({share:.2%}) outside |cand - ref| <= {atol:.3g} + {policy.rtol:.3g}*|ref|; "
        f"worst at {index}: reference {float(ref_flat[worst]):.6g}, "
        f"candidate {float(cand_flat[worst]):.6g}"
    )
    if any_bad_nonfinite:
        detail = f"NaN/Inf where the reference is finite; {detail}"
    return Comparison(False, f"{where}: {detail}", max_abs_error, share, used)


# Elements per chunk of an fp8 comparison: its int16 and float64 temporaries stay near
# 1 GiB whatever the shape (the largest fp8 outputs have 6.3 G elements).
FP8_CHUNK_ELEMENTS = 1 << 25


def _fp8_grid(codes: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(position on the e4m3fn grid, is NaN) of each code: -0 and +0 are both 0."""
    bits = codes.view(torch.uint8).to(torch.int16)
    magnitude = bits & 0x7F
    return torch.where(bits >= 0x80, -magnitude, magnitude), magnitude == 0x7F


def _scale_blocks(scale: torch.Tensor, shape: torch.Size, where: str) -> tuple[int, ...]:
    """How many elements of a leaf of ``shape`` each scale covers along every dimension."""
    dims = tuple(scale.shape) + (1,) * (len(shape) - scale.dim())
    if len(dims) != len(shape) or any(d == 0 or n % d for n, d in zip(shape, dims, strict=True)):
        raise ValueError(
            f"{where}: scale of shape {tuple(scale.shape)} does not tile the fp8 output of "
            f"shape {tuple(shape)}"
        )
    return tuple(n // d for n, d in zip(shape, dims, strict=True))


def _expand_scale(scale: torch.Tensor, blocks: tuple[int, ...]) -> torch.Tensor:
    """The scale of every element of a chunk, in float64."""
    scale = scale.to(torch.float64).reshape(tuple(scale.shape) + (1,) * (len(blocks) - scale.dim()))
    for dim, block in enumerate(blocks):
        if block > 1:
            scale = scale.repeat_interleave(block, dim=dim)
    return scale


def _same_codes_and_scales(
    ref_chunk: torch.Tensor,
    cand_chunk: torch.Tensor,
    blocks: tuple[int, ...] | None,
    scale_pair: tuple[torch.Tensor, ...] | None,
    rows: slice,
    block_rows: int,
) -> bool:
    """Whether a chunk's candidate codes are the reference's bit for bit and so are the
    scales of its rows' blocks (when the rule has scales): one read of each, where the full
    comparison makes about ten passes, half of them over float64 copies. On the H200 the
    full comparison of per_token_group_quant_fp8's largest output (6.3 G codes) took
    0.6-0.7 s, at each of its three correctness trials and three times in its timing
    (session 18; ``bench/fp8_compare.py`` measures both ways)."""
    if not torch.equal(ref_chunk.view(torch.uint8), cand_chunk.view(torch.uint8)):
        return False
    if blocks is None or scale_pair is None:
        return True
    block_slice = slice(rows.start // block_rows, -(-rows.stop // block_rows))
    ref_scale, cand_scale = scale_pair[0][block_slice], scale_pair[1][block_slice]
    # Equal scales (a NaN scale is unequal to itself: such a chunk is compared in full)
    # give each code the same dequantised value on both sides.
    return ref_scale.dtype == cand_scale.dtype and torch.equal(ref_scale, cand_scale)


def _fp8_value(code: torch.Tensor) -> str:
    return f"0x{int(code.view(torch.uint8)):02x} ({float(code.float()):.6g})"


def compare_fp8_codes(
    reference: torch.Tensor,
    candidate: torch.Tensor,
    *,
    rule: Fp8CodePolicy,
    where: str,
    scales: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> Comparison:
    """Compare two ``float8_e4m3fn`` tensors of one shape code by code (see Fp8CodePolicy).

    ``mismatch_share`` is the share of codes that differ from the reference's,
    ``max_abs_error`` the largest dequantised error (``q * scale`` with each side's own
    scale, or the codes' values without scales), ``mean_tolerance_used`` the mean distance
    in grid steps divided by ``max_steps``. Works in row chunks of about
    FP8_CHUNK_ELEMENTS elements, never on whole float64 copies.
    """
    total = reference.numel()
    if total == 0:
        return Comparison(True)
    shape = reference.shape if reference.dim() >= 2 else torch.Size((1, total))
    ref = reference.reshape(shape)
    cand = candidate.reshape(shape)
    blocks: tuple[int, ...] | None = None
    if scales is not None:
        blocks = _scale_blocks(scales[0], reference.shape, where)
        if reference.dim() < 2:
            blocks = (1, *blocks) if reference.dim() == 1 else (1, 1)
        scale_pair = tuple(
            s.reshape(tuple(n // b for n, b in zip(shape, blocks, strict=True))) for s in scales
        )
    else:
        scale_pair = None
    row_elements = max(1, total // shape[0])
    block_rows = blocks[0] if blocks else 1
    chunk_rows = max(block_rows, FP8_CHUNK_ELEMENTS // row_elements // block_rows * block_rows)
    differing = too_far = nan_bad = 0
    distance_sum = 0.0
    max_abs_error = 0.0
    worst_distance, worst_index = -1, 0
    for start in range(0, shape[0], chunk_rows):
        rows = slice(start, min(shape[0], start + chunk_rows))
        ref_chunk, cand_chunk = ref[rows].contiguous(), cand[rows].contiguous()
        if _same_codes_and_scales(ref_chunk, cand_chunk, blocks, scale_pair, rows, block_rows):
            # An honest candidate's usual chunk: every code and scale as the reference's.
            # What the passes below would find, without them: no code differs, none is
            # farther or NaN against a number, and each element's dequantised error is
            # |q * s - q * s| = 0, which leaves the largest error so far as it is.
            continue
        ref_pos, ref_nan = _fp8_grid(ref_chunk)
        cand_pos, cand_nan = _fp8_grid(cand_chunk)
        nan_mismatch = ref_nan != cand_nan
        distance = torch.where(ref_nan | cand_nan, 0, (cand_pos - ref_pos).abs())
        # A NaN against a number counts as infinitely far; for the worst element, as 1000.
        ranked = torch.where(nan_mismatch, 1000, distance.to(torch.int32))
        differing += int((ranked > 0).sum())
        too_far += int((ranked > rule.max_steps).sum())
        nan_bad += int(nan_mismatch.sum())
        distance_sum += float(distance.sum(dtype=torch.float64))
        chunk_worst = int(ranked.argmax())
        if int(ranked.flatten()[chunk_worst]) > worst_distance:
            worst_distance = int(ranked.flatten()[chunk_worst])
            worst_index = start * row_elements + chunk_worst
        finite = ~(ref_nan | cand_nan)
        ref_values = ref_chunk.to(torch.float64)
        cand_values = cand_chunk.to(torch.float64)
        if blocks is not None:
            block_slice = slice(rows.start // block_rows, -(-rows.stop // block_rows))
            ref_scale = _expand_scale(scale_pair[0][block_slice], blocks)
            cand_scale = _expand_scale(scale_pair[1][block_slice], blocks)
            ref_values = ref_values * ref_scale
            cand_values = cand_values * cand_scale
        error = torch.where(finite, (cand_values - ref_values).abs(), 0.0)
        if bool(finite.any()):
            max_abs_error = max(max_abs_error, float(error.max()))
        del ref_values, cand_values, error
    share = differing / total
    used = float("inf") if nan_bad else distance_sum / total / max(1, rule.max_steps)
    if nan_bad:
        max_abs_error = float("inf")
    if not too_far and share <= rule.max_step_share:
        return Comparison(True, None, max_abs_error, share, used)
    index = tuple(int(i) for i in torch.unravel_index(torch.tensor(worst_index), reference.shape))
    worst = (
        f"worst at {index}: reference code {_fp8_value(reference[index])}, candidate "
        f"{_fp8_value(candidate[index])}"
    )
    if nan_bad:
        problem = (
            f"{nan_bad} of {total} fp8 codes are NaN where the reference's are not (or the "
            "reverse); saturate at +-448 instead"
        )
    elif too_far:
        problem = (
            f"{too_far} of {total} fp8 codes are more than {rule.max_steps} step(s) away from "
            "the reference's on the e4m3fn grid"
        )
    else:
        problem = (
            f"{differing} of {total} fp8 codes ({share:.2%}) differ from the reference's by "
            f"one step; at most {rule.max_step_share:.2%} may"
        )
    detail = f"{problem}; {differing} differ in all ({share:.2%}); {worst}"
    if worst_distance < 1000 and worst_distance > 0:
        detail += f", {worst_distance} step(s) apart"
    return Comparison(False, f"{where}: {detail}", max_abs_error, share, used)


def compare_outputs(
    reference: Any, candidate: Any, *, policy: CorrectnessPolicy, shape_id: str
) -> Comparison:
    """Compare a whole output structure (tensor, dict or tuple) with the reference's.

    Each leaf is compared under its rule (``policy.rule_for``); fp8 leaves whose rule has
    a scale leaf come last, after their scales have been checked.
    """
    problem = _structure_error(reference, candidate)
    if problem:
        return Comparison(False, f"shape {shape_id}: wrong output structure: {problem}")
    result = Comparison(True)
    ref_leaves = dict(_leaves(reference, "out"))
    cand_leaves = dict(_leaves(candidate, "out"))
    rules = {
        name: policy.rule_for(name, leaf.dtype) if isinstance(leaf, torch.Tensor) else policy
        for name, leaf in ref_leaves.items()
    }
    order = sorted(
        ref_leaves,
        key=lambda name: isinstance(rules[name], Fp8CodePolicy) and bool(rules[name].scale_leaf),
    )
    for name in order:
        ref_leaf, cand_leaf, rule = ref_leaves[name], cand_leaves[name], rules[name]
        where = f"shape {shape_id}, output {name!r}"
        if not isinstance(ref_leaf, torch.Tensor):
            if ref_leaf != cand_leaf:
                return Comparison(False, f"{where}: {cand_leaf!r}, expected {ref_leaf!r}")
            continue
        scales = None
        if isinstance(rule, Fp8CodePolicy) and rule.scale_leaf is not None:
            if rule.scale_leaf not in ref_leaves:
                raise ValueError(
                    f"the fp8 rule of output {name!r} names the scale output "
                    f"{rule.scale_leaf!r}, which is not among {sorted(ref_leaves)}"
                )
            scales = (ref_leaves[rule.scale_leaf], cand_leaves[rule.scale_leaf])
        result = result.merge(
            compare_tensors(ref_leaf, cand_leaf, policy=rule, where=where, scales=scales)
        )
        if not result.ok:
            return result
    return result


_SAME_SIZE_INTEGER = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def _unchanged(saved: torch.Tensor, current: torch.Tensor) -> bool:
    """Whether ``current`` holds ``saved``'s values bit for bit. Floating tensors are
    compared as integers of their size (a view: no copy, whatever the strides): an unchanged
    NaN is unchanged, and torch.equal on fp8 takes a slow path on the CPU (71 s of the
    233 s check of the fp8 MoE's real shape on a loaded 2-core host; a ninth of that as
    bytes)."""
    if saved.shape != current.shape or saved.dtype != current.dtype:
        return False
    bits = _SAME_SIZE_INTEGER.get(saved.element_size()) if saved.is_floating_point() else None
    if bits is None:
        return torch.equal(saved, current)
    return torch.equal(saved.view(bits), current.view(bits))


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
        if isinstance(saved, torch.Tensor) and not _unchanged(saved, current):
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


_cuda_synchronize = getattr(torch._C, "_cuda_synchronize", None)
"""The current CUDA device's whole-device synchronise (every stream), bound at import,
before any candidate code runs; None in a torch built without CUDA."""


def _synchronize(device: torch.device) -> None:
    """Wait for all of ``device``'s work. On the current device (a worker's child sees one
    GPU) straight through torch's binding: ``torch.cuda.synchronize(device)`` enters a
    device context each time, about 30 us of host time, and a shape's checks synchronise a
    hundred times (bench/round_profile.py on the H200)."""
    if device.type != "cuda":
        return
    if _cuda_synchronize is not None and device.index in (None, torch.cuda.current_device()):
        _cuda_synchronize()
    else:
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
    phases: dict[str, float] | None = None,
    pool_plan: Sequence[Mapping[str, Any] | None] | None = None,
    fetch_reference: Callable[[str, str], tuple[Any, str | None]] | None = None,
    pool_record: dict[str, Any] | None = None,
    safe_point: Callable[[], None] | None = None,
    settled: Callable[[], bool] | None = None,
) -> ShapeCorrectness:
    """Run ``trials`` correctness trials of one shape (fresh inputs each); stop at a failure.

    Per trial: poison the allocator, call the candidate, synchronise, run ``after_call``
    (the child's tampering and thread checks, which raise), copy the output, and only
    then run the reference. ``call_wrapper(fn)`` runs each candidate call (the fallback
    monitor uses it to watch the very calls whose outputs are checked). Raises
    CandidateError when the candidate raises.

    ``pool_plan`` (``evaluator.reference_pool``): per trial a pool entry (``entry``,
    ``seed``) or None. A pooled trial's inputs come from the entry's seed, and its
    reference output from ``fetch_reference(shape_id, entry)``, asked only after the
    candidate's call (``(output, None)``, or ``(None, why)``: then the reference runs as
    for any trial). ``pool_record`` counts ``pooled`` trials and lists ``recomputed``
    reasons.

    ``safe_point`` (a concurrent run's ``TimingGate.safe_point``) is called before each trial
    after the first and before each reference call, where the device is idle and none of
    the candidate's code runs: another operator's timing may pause this child there.

    ``settled`` is asked after each passing trial; True ends the checks there (the fallback
    monitor's ``ShapeWatch.settled``: the first call decided the shape a fallback, which
    scores 0 whatever later calls return; docs/decisions.md 16). The result's ``trials``
    says how many ran.
    """
    wrap = call_wrapper or (lambda fn: fn())
    pause = safe_point or (lambda: None)
    policy = policy or spec.policy
    count = trials if trials is not None else policy.trials
    total = Comparison(True)
    poison_bytes = 0
    phase = PhaseClock(device, phases)
    for trial in range(count):
        if trial:
            pause()
        slot = pool_plan[trial] if pool_plan and trial < len(pool_plan) else None
        if slot is not None and fetch_reference is None:
            slot = None
        seed = (
            int(slot["seed"])
            if slot is not None
            else derive_seed(run_seed, "correctness", spec.slug, shape_id, trial)
        )
        with torch.inference_mode():
            with phase("inputs"):
                candidate_inputs = spec.make_inputs(device=device, seed=seed, **dict(input_kwargs))
            with phase("hooks"):
                poison_allocator(device, max(poison_bytes, input_nbytes(candidate_inputs)))
            with phase("candidate_first" if trial == 0 else "candidate"):
                candidate_output = wrap(
                    functools.partial(
                        call_candidate, candidate, candidate_inputs, shape_id=shape_id
                    )
                )
                _synchronize(device)
            with phase("hooks"):  # the integrity checks after the call, the output's copy
                if after_call is not None:
                    after_call()
                returned = snapshot_outputs(candidate_output)
            pause()
            # The inputs drawn again from the seed, after the call (so the candidate's own
            # copy is all that existed while it ran): it could reach every tensor alive then
            # and rewrite a copy kept from before, reference and hygiene checks with it.
            with phase("inputs"):
                inputs = spec.make_inputs(device=device, seed=seed, **dict(input_kwargs))
            # The reference runs only now: the answer did not exist while the candidate ran.
            with phase("reference"):
                reference_output = None
                if slot is not None and fetch_reference is not None:
                    reference_output, problem = fetch_reference(shape_id, str(slot["entry"]))
                    if pool_record is not None:
                        if problem is None:
                            pool_record["pooled"] = pool_record.get("pooled", 0) + 1
                        else:
                            pool_record.setdefault("recomputed", []).append(problem)
                if reference_output is None:
                    reference_output = reference(**clone_inputs(inputs))
            poison_bytes = output_nbytes(reference_output)
            with phase("compare"):
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
                        total = Comparison(
                            False, problem, total.max_abs_error, total.mismatch_share
                        )
        if not total.ok:
            return ShapeCorrectness(
                False, total.error, total.max_abs_error, total.mismatch_share, trial + 1
            )
        # Freed before the next trial's call, not when its names are rebound after it: at
        # the largest outputs a trial's tensors are tens of GB.
        del candidate_inputs, candidate_output, returned, inputs, reference_output
        if settled is not None and trial + 1 < count:
            with phase("hooks"):
                decided = settled()
            if decided:
                count = trial + 1
                break
    return ShapeCorrectness(
        True, None, total.max_abs_error, total.mismatch_share, count, total.mean_tolerance_used
    )


def names_of(output: Any) -> Sequence[str]:
    """Output leaf names as used in messages ('out', dict keys, 'output[i]')."""
    return [name for name, _ in _leaves(output, "out")]
