"""The correctness policy: honest kernels pass, wrong answers and rule breaks fail."""

from __future__ import annotations

import pytest
import torch

from evaluator.correctness import (
    CandidateError,
    call_candidate,
    changed_after_return_error,
    check_shape,
    compare_outputs,
    derive_seed,
    hygiene_error,
    snapshot_outputs,
)
from evaluator.operators import get_operator

CPU = torch.device("cpu")
RMS = get_operator("rms_norm")


@pytest.fixture(scope="module")
def reference_output():
    inputs = RMS.make_inputs(device=CPU, seed=11, token_count=32, hidden_size=256)
    return RMS.build_reference({"eps": 1e-6})(**inputs)


def one_ulp_toward_zero(tensor: torch.Tensor, share: float = 0.5, seed: int = 0):
    """What the Triton CPU interpreter does: truncate instead of rounding to nearest."""
    bits = tensor.view(torch.int16).clone()
    chosen = torch.rand(tensor.shape, generator=torch.Generator().manual_seed(seed)) < share
    chosen &= (bits & 0x7FFF) != 0
    bits[chosen] -= 1
    return bits.view(torch.bfloat16)


def compare(reference, candidate):
    return compare_outputs(reference, candidate, policy=RMS.policy, shape_id="7")


def test_honest_answer_one_bf16_step_off_on_half_the_elements_passes(reference_output):
    candidate = one_ulp_toward_zero(reference_output)
    assert (candidate != reference_output).float().mean() > 0.4
    result = compare(reference_output, candidate)
    assert result.ok, result.error
    assert result.max_abs_error > 0


def test_exact_answer_passes(reference_output):
    result = compare(reference_output, reference_output.clone())
    assert result.ok and result.max_abs_error == 0.0 and result.mismatch_share == 0.0


@pytest.mark.parametrize(
    "make_wrong",
    [
        pytest.param(lambda ref: torch.zeros_like(ref), id="all-zeros"),
        pytest.param(lambda ref: torch.full_like(ref, float(ref.float().mean())), id="constant"),
        pytest.param(
            lambda ref: torch.full_like(ref, float(ref.float().abs().mean())),
            id="constant-mean-magnitude",
        ),
        pytest.param(lambda ref: (ref.float() * 1.02).to(ref.dtype), id="scaled-1.02"),
        pytest.param(lambda ref: (ref.float() * 0.98).to(ref.dtype), id="scaled-0.98"),
    ],
)
def test_wrong_answers_fail(reference_output, make_wrong):
    result = compare(reference_output, make_wrong(reference_output))
    assert not result.ok
    assert "shape 7" in result.error and "'out'" in result.error
    assert "max abs error" in result.error


def test_one_percent_corrupted_elements_fail(reference_output):
    corrupted = reference_output.clone().flatten()
    generator = torch.Generator().manual_seed(5)
    index = torch.randperm(corrupted.numel(), generator=generator)[: corrupted.numel() // 100]
    corrupted[index] = torch.randn(len(index), generator=generator).to(corrupted.dtype)
    result = compare(reference_output, corrupted.view_as(reference_output))
    assert not result.ok
    assert 0 < result.mismatch_share <= 0.01
    assert "elements" in result.error and "%" in result.error


def test_nan_where_the_reference_is_finite_fails(reference_output):
    candidate = reference_output.clone()
    candidate[3, 4] = float("nan")
    result = compare(reference_output, candidate)
    assert not result.ok and "NaN/Inf" in result.error and "(3, 4)" in result.error


@pytest.mark.parametrize(
    ("candidate", "expected"),
    [
        (lambda ref: {"out": ref}, "expected one tensor"),
        (lambda ref: ref.float(), "dtype torch.float32"),
        (lambda ref: ref[:-1], "shape (31, 256)"),
        (lambda ref: torch.empty_like(ref, device="meta"), "on meta"),
        (lambda ref: torch.nn.Parameter(ref.clone(), requires_grad=False), "plain torch.Tensor"),
        (lambda ref: ref.tolist(), "expected one tensor, got list"),
        (lambda ref: ref.float().numpy(), "plain torch.Tensor"),
    ],
)
def test_structure_dtype_shape_device_and_type_must_match(reference_output, candidate, expected):
    result = compare(reference_output, candidate(reference_output))
    assert not result.ok and expected in result.error and "shape 7" in result.error


def test_dict_outputs_need_the_same_keys():
    ref = {"out": torch.ones(2, dtype=torch.bfloat16), "residual": torch.ones(2)}
    result = compare_outputs(ref, {"out": ref["out"]}, policy=RMS.policy, shape_id="0")
    assert not result.ok and "keys" in result.error
    wrong = {"out": ref["out"], "residual": ref["residual"] * 3}
    result = compare_outputs(ref, wrong, policy=RMS.policy, shape_id="0")
    assert not result.ok and "output 'residual'" in result.error


def test_tuple_outputs_need_the_same_length():
    ref = (torch.ones(2), torch.ones(3))
    result = compare_outputs(ref, (ref[0],), policy=RMS.policy, shape_id="0")
    assert not result.ok and "tuple of 2" in result.error


def test_integer_outputs_must_be_exact():
    ref = torch.arange(10, dtype=torch.int32)
    assert compare_outputs(ref, ref.clone(), policy=RMS.policy, shape_id="0").ok
    off = ref.clone()
    off[2] += 1
    result = compare_outputs(ref, off, policy=RMS.policy, shape_id="0")
    assert not result.ok and "exactly" in result.error


def test_output_aliasing_an_input_is_rejected():
    x = torch.ones(4, 4)
    error = hygiene_error(x[1:], {"x": x}, {"x": x.clone()}, shape_id="2")
    assert error and "shares memory with input 'x'" in error and "shape 2" in error


def test_modified_input_is_rejected():
    x = torch.ones(4)
    saved = x.clone()
    x[0] = 5
    error = hygiene_error(torch.zeros(4), {"x": x}, {"x": saved}, shape_id="1")
    assert error and "modified its input 'x'" in error


def test_inputs_are_compared_bit_for_bit_fp8_and_nan_included():
    codes = torch.linspace(-2, 2, 16).to(torch.float8_e4m3fn).reshape(4, 4).t()  # strided
    changed = codes.clone()
    changed[1, 2] = 0.5
    error = hygiene_error(torch.zeros(4), {"w": changed}, {"w": codes.clone()}, shape_id="3")
    assert error and "modified its input 'w'" in error
    assert hygiene_error(torch.zeros(4), {"w": codes}, {"w": codes.clone()}, shape_id="3") is None
    # An input holding a NaN that the call left alone was not modified (NaN != NaN).
    x = torch.tensor([1.0, float("nan")])
    assert hygiene_error(torch.zeros(2), {"x": x}, {"x": x.clone()}, shape_id="4") is None
    x[1] = 0.0
    assert hygiene_error(torch.zeros(2), {"x": x}, {"x": x.clone().fill_(1)}, shape_id="4")


class InPlaceRmsNorm(torch.nn.Module):
    """Right values, but written over its input."""

    def forward(self, x, weight):
        x.copy_(RMS.build_reference({"eps": 1e-6})(x=x, weight=weight))
        return x


class StatefulRmsNorm(torch.nn.Module):
    """Right on the first call, then serves the cached answer."""

    cached = None

    def forward(self, x, weight):
        if self.cached is None:
            self.cached = RMS.build_reference({"eps": 1e-6})(x=x, weight=weight)
        return self.cached.clone()


class Raising(torch.nn.Module):
    def forward(self, x, weight):
        raise ValueError("kaboom")


def run_check(candidate, trials=3):
    return check_shape(
        spec=RMS,
        reference=RMS.build_reference({"eps": 1e-6}),
        candidate=candidate,
        shape_id="5",
        input_kwargs={"token_count": 4, "hidden_size": 64},
        device=CPU,
        run_seed=99,
        trials=trials,
    )


class RewritesTheKeptInputs(torch.nn.Module):
    """Returns zeros, and zeros every tensor of the input's shape in its callers' frames (in
    an evaluation child no frames are given; this is the layer under that)."""

    def forward(self, x, weight):
        import sys

        frame = sys._getframe(1)
        while frame is not None:
            for value in list(frame.f_locals.values()):
                for t in value.values() if isinstance(value, dict) else [value]:
                    if isinstance(t, torch.Tensor) and t.shape == x.shape and t is not x:
                        t.zero_()
            frame = frame.f_back
        x.zero_()
        return torch.zeros_like(x)


def test_inputs_are_drawn_again_after_the_call_not_kept_from_before_it():
    # The reference of a kept copy the candidate zeroed would be zeros, and match it.
    result = run_check(RewritesTheKeptInputs())
    assert not result.ok and "max abs error" in result.error


def test_check_shape_passes_the_reference_itself():
    result = run_check(RMS.build_reference({"eps": 1e-6}))
    assert result.ok and result.trials == 3


def test_check_shape_adds_where_its_time_went_to_phases():
    # Seconds go into a phases dict the caller owns (a shape's wall_s in results.json);
    # the first call is apart from the others (Triton compiles there).
    phases = {"inputs": 1.0}
    result = check_shape(
        spec=RMS,
        reference=RMS.build_reference({"eps": 1e-6}),
        candidate=RMS.build_reference({"eps": 1e-6}),
        shape_id="1",
        input_kwargs={"token_count": 2, "hidden_size": 32},
        device=CPU,
        run_seed=1,
        phases=phases,
    )
    assert result.ok
    assert set(phases) == {
        "inputs", "candidate_first", "candidate", "reference", "compare", "hooks"
    }  # fmt: skip
    assert phases["inputs"] > 1.0  # added to, not replaced
    assert all(seconds > 0 for seconds in phases.values())


def test_check_shape_rejects_an_in_place_kernel():
    result = run_check(InPlaceRmsNorm())
    assert not result.ok and "shares memory" in result.error


def test_fresh_inputs_each_trial_catch_a_cached_answer():
    result = run_check(StatefulRmsNorm())
    assert not result.ok and result.trials == 2 and "shape 5" in result.error


def test_candidate_exception_names_the_shape():
    with pytest.raises(CandidateError) as caught:
        run_check(Raising())
    assert "shape 5" in caught.value.message and "kaboom" in caught.value.message


def test_derived_seeds_are_stable_and_distinct():
    assert derive_seed(1, "correctness", "rms_norm", "0", 0) == derive_seed(
        1, "correctness", "rms_norm", "0", 0
    )
    seeds = {derive_seed(1, "correctness", "rms_norm", "0", trial) for trial in range(50)}
    assert len(seeds) == 50 and all(0 <= s < 2**31 for s in seeds)
    assert derive_seed(1, "x") != derive_seed(2, "x")


class LooksForTheAnswer(torch.nn.Module):
    """Searches its callers' frames for a tensor holding the right answer, and copies it."""

    def forward(self, x, weight):
        import sys

        answer = RMS.build_reference({"eps": 1e-6})(x=x.clone(), weight=weight.clone())
        frame = sys._getframe(1)
        while frame is not None:
            for value in list(frame.f_locals.values()):
                if type(value) is torch.Tensor and value.shape == x.shape:
                    if value.data_ptr() != x.data_ptr() and torch.equal(value, answer):
                        return value.clone()
            frame = frame.f_back
        return torch.zeros_like(x)


def test_the_reference_answer_does_not_exist_while_the_candidate_runs():
    result = run_check(LooksForTheAnswer())
    assert not result.ok and result.trials == 1 and "max abs error" in result.error


class EchoesItsInput(torch.nn.Module):
    def forward(self, x, weight):
        return x.clone()


def test_an_input_returned_unchanged_is_no_answer_even_within_tolerance():
    nearly_identity = lambda x, weight: (x.float() * 1.01).to(x.dtype)  # noqa: E731
    result = check_shape(
        spec=RMS,
        reference=nearly_identity,
        candidate=EchoesItsInput(),
        shape_id="4",
        input_kwargs={"token_count": 4, "hidden_size": 64},
        device=CPU,
        run_seed=3,
    )
    assert not result.ok and "is input 'x' unchanged" in result.error


def test_an_input_returned_unchanged_passes_where_that_is_the_answer():
    result = check_shape(
        spec=RMS,
        reference=lambda x, weight: x.clone(),
        candidate=EchoesItsInput(),
        shape_id="4",
        input_kwargs={"token_count": 4, "hidden_size": 64},
        device=CPU,
        run_seed=3,
    )
    assert result.ok, result.error


def test_after_call_hook_runs_after_every_candidate_call():
    calls = []

    def hook():
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("second call flagged")

    with pytest.raises(RuntimeError, match="second call flagged"):
        check_shape(
            spec=RMS,
            reference=RMS.build_reference({"eps": 1e-6}),
            candidate=RMS.build_reference({"eps": 1e-6}),
            shape_id="1",
            input_kwargs={"token_count": 2, "hidden_size": 32},
            device=CPU,
            run_seed=1,
            after_call=hook,
        )


def test_an_output_changed_after_the_call_returned_is_reported():
    returned = torch.ones(4, dtype=torch.bfloat16)
    snapshot = snapshot_outputs({"out": returned})
    assert changed_after_return_error(snapshot, {"out": returned}, shape_id="2") is None
    returned[1] = 7
    error = changed_after_return_error(snapshot, {"out": returned}, shape_id="2")
    assert error and "changed after the call had returned" in error and "'out'" in error


def test_sys_exit_in_a_kernel_is_a_candidate_error_naming_it():
    class Exits(torch.nn.Module):
        def forward(self, x):
            raise SystemExit(0)

    with pytest.raises(CandidateError) as caught:
        call_candidate(Exits(), {"x": torch.ones(1)}, shape_id="3")
    assert "sys.exit(0)" in caught.value.message and "shape 3" in caught.value.message


def test_mean_tolerance_use_separates_rounding_from_a_drift(reference_output):
    honest = compare(reference_output, one_ulp_toward_zero(reference_output))
    drifted = compare(reference_output, (reference_output.float() * 1.012).to(torch.bfloat16))
    assert honest.ok and drifted.ok
    assert honest.mean_tolerance_used < 0.3 < drifted.mean_tolerance_used


def _with_flaws(reference: torch.Tensor) -> torch.Tensor:
    """A float32 answer with rounding noise, a few large errors (the largest twice, so the
    worst element is a tie that the first occurrence wins), a NaN and an infinity."""
    noise = torch.randn(reference.shape, generator=torch.Generator().manual_seed(5))
    candidate = reference * (1 + 1e-4 * noise)
    flat = candidate.view(-1)
    flat[3] += 5.0
    flat[[40, 77]] = reference.view(-1)[[40, 77]] + 9.0  # exactly 9 off: the reference is 0
    flat[50] = float("nan")
    flat[61] = float("inf")
    return candidate


@pytest.mark.parametrize("flawed", [False, True])
def test_a_floating_comparison_in_chunks_equals_one_in_a_piece(monkeypatch, flawed):
    # Chunked so that an output of any size compares in bounded memory; the verdict, the
    # error figures and the worst element named must not depend on the chunk size.
    from evaluator import correctness

    reference = torch.randn((9, 11), generator=torch.Generator().manual_seed(4))
    reference.view(-1)[[0, 20]] = torch.tensor([float("inf"), float("nan")])  # matched below
    reference.view(-1)[[40, 77]] = 0.0
    candidate = _with_flaws(reference) if flawed else reference.clone()
    candidate.view(-1)[[0, 20]] = reference.view(-1)[[0, 20]]
    policy = correctness.CorrectnessPolicy(rtol=2.0**-8, atol_scale=1e-3, max_mismatch_share=0.01)
    results = []
    for chunk in (1 << 24, 7, 1):
        monkeypatch.setattr(correctness, "FLOAT_CHUNK_ELEMENTS", chunk)
        results.append(compare_outputs(reference, candidate, policy=policy, shape_id="c"))
    whole = results[0]
    assert whole.ok is (not flawed)
    if flawed:
        assert "NaN/Inf where the reference is finite" in whole.error
        assert "worst at (3, 7)" in whole.error  # flat index 40: the first of the two 9.0s
        assert whole.max_abs_error == float("inf")
    for chunked in results[1:]:
        assert (chunked.ok, chunked.error, chunked.max_abs_error) == (
            whole.ok,
            whole.error,
            whole.max_abs_error,
        )
        assert chunked.mismatch_share == whole.mismatch_share
        assert chunked.mean_tolerance_used == pytest.approx(whole.mean_tolerance_used, rel=1e-12)
