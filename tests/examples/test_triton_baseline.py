"""The Triton baseline's kernels against the references in-process (Triton interpreter on
CPU), on shapes larger than the smoke ones and on the variants the published shapes leave
out: bias and non-zero positions in fused_qkv_rope, GPT-J pairs and the interleaved axis
map in mrope, partial rotary widths, shuffled and negative cache slots."""

from __future__ import annotations

import pytest
import torch

from evaluator.correctness import compare_outputs
from evaluator.operators import get_operator

from .conftest import TRITON_BASELINE, load_model_module

MEDIUM_SHAPES = [
    ("l2_norm", {"hidden_size": 2048}, {"num_tokens": 9, "hidden_size": 2048}),
    ("layer_norm", {}, {"shape": [40, 1, 1152]}),
    # several rows a program (8 at hidden 128, 2 at 300): a last program half full
    ("rms_norm", {"eps": 1e-6}, {"token_count": 13, "hidden_size": 128}),
    ("rms_norm", {"eps": 1e-5}, {"token_count": 7, "hidden_size": 300}),
    ("gated_rms_norm", {}, {"rows": 300, "hidden_size": 128}),
    (
        "gated_rms_norm",
        {"norm_before_gate": False, "activation": "sigmoid"},
        {"rows": 45, "hidden_size": 384},
    ),
    (
        "fused_qk_rmsnorm",
        {"head_num": 40, "kv_head_num": 8},
        {"num_tokens": 2, "head_num": 40, "kv_head_num": 8, "dtype": "fp16"},
    ),
    (
        "moe_sum_reduce",
        {"routed_scaling_factor": 2.5},
        {"token_count": 9, "top_k": 8, "hidden_size": 2048},
    ),
    (
        "fused_qkv_rope",
        {"num_heads": 8, "num_kv_heads": 2, "head_dim": 128, "rope_dim": 64},
        {
            "total_tokens": 6,
            "num_heads": 8,
            "num_kv_heads": 2,
            "head_dim": 128,
            "with_bias": True,
            "dtype": "bf16",
        },
    ),
    (
        "fused_qkv_rope",
        {"num_heads": 4, "num_kv_heads": 1, "head_dim": 128, "rope_dim": 128},
        {
            "total_tokens": 40,
            "num_heads": 4,
            "num_kv_heads": 1,
            "head_dim": 128,
            "with_bias": True,
            "dtype": "fp16",
        },
    ),
    (
        "mrope",
        {
            "head_size": 128,
            "rotary_dim": 64,
            "mrope_section": [8, 12, 12],
            "mrope_interleaved": True,
            "is_neox_style": False,
        },
        {
            "token_count": 5,
            "num_query_heads": 4,
            "num_kv_heads": 2,
            "head_size": 128,
            "rotary_dim": 64,
        },
    ),
    (
        "mrope",
        {"head_size": 128, "rotary_dim": 128, "mrope_section": [16, 24, 24]},
        {
            "token_count": 9,
            "num_query_heads": 16,
            "num_kv_heads": 4,
            "head_size": 128,
            "rotary_dim": 128,
        },
    ),
]


def reference_and_candidate(operator, init_kwargs, inputs):
    spec = get_operator(operator)
    reference = spec.build_reference(init_kwargs)(**{k: v.clone() for k, v in inputs.items()})
    model = load_model_module(TRITON_BASELINE, operator).Model(**init_kwargs)
    return spec, reference, model(**inputs)


@pytest.mark.parametrize(
    ("operator", "init_kwargs", "input_kwargs"),
    MEDIUM_SHAPES,
    ids=[f"{op}-{i}" for i, (op, _, _) in enumerate(MEDIUM_SHAPES)],
)
def test_kernel_matches_the_reference_beyond_the_smoke_shapes(operator, init_kwargs, input_kwargs):
    spec = get_operator(operator)
    inputs = spec.make_inputs(device="cpu", seed=20261129, **input_kwargs)
    spec, reference, candidate = reference_and_candidate(operator, init_kwargs, inputs)
    result = compare_outputs(reference, candidate, policy=spec.policy, shape_id="medium")
    assert result.ok, result.error


def test_rotary_variants_really_rotate():
    """The variants above test something: at non-zero positions the output is no copy."""
    operator, init_kwargs, input_kwargs = next(
        entry for entry in MEDIUM_SHAPES if entry[0] == "fused_qkv_rope"
    )  # the biased one, 8 heads
    inputs = get_operator(operator).make_inputs(device="cpu", seed=3, **input_kwargs)
    _, reference, (q, _, _) = reference_and_candidate(operator, init_kwargs, inputs)
    biased = (inputs["qkv"].float() + inputs["qkv_bias"].float()).to(torch.bfloat16)
    unrotated = biased[:, : 8 * 128].reshape(6, 8, 128)
    assert not torch.allclose(q[1:].float(), unrotated[1:].float(), atol=1e-2)
    assert torch.allclose(q[1:].float(), reference[0][1:].float(), atol=2e-2, rtol=2**-6)


def test_reshape_and_cache_follows_a_shuffled_slot_mapping_and_skips_negative_slots():
    spec = get_operator("reshape_and_cache")
    inputs = spec.make_inputs(device="cpu", seed=11, shape=[37, 2, 128], block_size=16)
    generator = torch.Generator().manual_seed(4)
    cache_slots = inputs["key_cache"].shape[0] * inputs["key_cache"].shape[1]
    slots = torch.randperm(cache_slots, generator=generator)[:37]
    slots[::5] = -1
    inputs["slot_mapping"] = slots
    inputs["key_cache"].normal_(generator=generator)  # untouched slots must be copied
    spec, reference, candidate = reference_and_candidate("reshape_and_cache", {}, inputs)
    for name in ("key_cache", "value_cache"):
        assert torch.equal(candidate[name], reference[name]), name


@pytest.mark.parametrize(
    ("operator", "init_kwargs", "input_kwargs"),
    [
        ("fp8_dynamic_per_token_quant", {}, {"token_count": 20, "hidden_size": 7168}),
        (
            "per_token_group_quant_fp8",
            {"group_size": 128},
            {"token_count": 33, "hidden_size": 2048},
        ),
        ("fused_rmsnorm_quant", {}, {"token_count": 24, "hidden_size": 4096}),
    ],
)
def test_fp8_codes_match_the_reference_codes(operator, init_kwargs, input_kwargs):
    """The portal's fp8 rule: at most 0.1% of the codes may differ, scales to fp32 rounding.

    The interpreter's own fp32 -> fp8 cast truncates (about 1% of codes off), so this
    fails if the kernels' round-to-nearest-even step is lost.
    """
    inputs = get_operator(operator).make_inputs(device="cpu", seed=77, **input_kwargs)
    _, reference, candidate = reference_and_candidate(operator, init_kwargs, inputs)
    if isinstance(reference, dict):
        reference, candidate = list(reference.values()), [candidate[k] for k in reference]
    for ref, cand in zip(reference, candidate, strict=True):
        assert cand.dtype == ref.dtype and cand.shape == ref.shape
        if ref.dtype == torch.float8_e4m3fn:
            differing = (cand.view(torch.uint8) != ref.view(torch.uint8)).double().mean()
            assert differing <= 1e-3, f"{float(differing):.3%} of the fp8 codes differ"
            assert (ref.float().abs() == 448).any()  # every row's maximum maps to 448
        else:
            torch.testing.assert_close(cand, ref, rtol=1e-6, atol=0)
