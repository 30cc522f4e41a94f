"""Hidden validation variants (DECISIONS.md 6): what they draw, what they catch, where they
show and where they must not (a public run, an agent's round)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import torch

from evaluator.correctness import check_shape
from evaluator.operators import attention_forward as attention_forward_op
from evaluator.operators import chunk_gated_delta_rule_state as chunk_state_op
from evaluator.operators import fused_qkv_rope as fused_qkv_rope_op
from evaluator.operators import gated_delta_rule_update as gated_update_op
from evaluator.operators import get_operator
from evaluator.operators import mrope as mrope_op
from evaluator.operators import paged_attention_decode as paged_op
from evaluator.operators import reshape_and_cache as reshape_op
from evaluator.operators import unified_attention as unified_op
from evaluator.operators._variants import VARIANTS, variants_for
from evaluator.runner import run_bundle
from evaluator.suite import load_suite
from evaluator.variants import check_variant, failed_variant_error, variant_spec, variants_of

from .conftest import REPO, TRITON_BASELINE
from .exploits.test_corpus import CORPUS
from .test_cli import evaluator_cli

COVERED = {
    "fused_qkv_rope",
    "mrope",
    "attention_forward",
    "paged_attention_decode",
    "unified_attention",
    "reshape_and_cache",
    "chunk_delta_rule_output",
    "chunk_gated_delta_rule_state",
    "gated_delta_rule_update",
}
CPU = torch.device("cpu")


def variant_inputs(slug: str, index: int = 0, seed: int = 7) -> dict[str, torch.Tensor]:
    spec = get_operator(slug)
    variant = variants_for(slug)[index]
    return variant_spec(spec, variant).make_inputs(
        device=CPU, seed=seed, **dict(variant.input_kwargs)
    )


@pytest.mark.parametrize("slug", sorted(COVERED))
def test_every_variant_passes_the_reference_itself(slug):
    spec = get_operator(slug)
    assert variants_for(slug), f"{slug} declares no validation variant"
    names = [variant.name for variant in variants_for(slug)]
    assert len(set(names)) == len(names)
    for variant in variants_for(slug):
        record = check_variant(
            spec=spec, variant=variant, model_class=spec.model_class, device="cpu", run_seed=5
        )
        assert record == {"name": variant.name, "status": "pass", "error": None, "codes": []}


def test_the_operator_sources_agents_are_shown_name_no_variant():
    """An agent's round shows it ``evaluator/operators/<slug>.py`` as the reference source
    (``agents.loop.reference_source``): the variants live elsewhere."""
    assert set(VARIANTS) == COVERED
    for slug, variants in VARIANTS.items():
        source = (REPO / "evaluator" / "operators" / f"{slug}.py").read_text()
        assert "_variants" not in source
        for variant in variants:
            assert variant.name not in source


def test_a_job_gets_variants_only_when_asked_and_only_for_built_in_operators():
    job = {"operator": "fused_qkv_rope", "validation_variants": True}
    assert variants_of(job) == variants_for("fused_qkv_rope")
    assert variants_of({**job, "validation_variants": False}) == ()
    assert variants_of({**job, "operator_source": {"files": {}}}) == ()
    assert variants_of({**job, "operator": "rms_norm"}) == ()


def test_rope_variants_rotate_at_distinct_non_zero_positions():
    positions = variant_inputs("fused_qkv_rope")["positions"]
    assert positions.dtype == torch.int32 and positions.numel() > 1
    assert bool((positions > 0).all()) and positions.unique().numel() == positions.numel()
    assert not torch.equal(positions.sort().values, positions)  # in no order


def test_mrope_variant_tables_come_from_real_angles():
    inputs = variant_inputs("mrope")
    cos, sin = inputs["cos"], inputs["sin"]
    assert torch.allclose(cos * cos + sin * sin, torch.ones_like(cos), atol=1e-5)
    assert float(cos.min()) < -0.5  # the whole circle, not the published small angles
    assert not torch.equal(cos[0], cos[1]) and not torch.equal(cos[1], cos[2])


def test_attention_variants_pack_several_sequences():
    for index in range(len(variants_for("attention_forward"))):
        bounds = variant_inputs("attention_forward", index)["cu_seqlens_q"].tolist()
        lengths = [b - a for a, b in zip(bounds, bounds[1:], strict=False)]
        assert len(lengths) >= 3 and len(set(lengths)) == len(lengths)


def test_unified_variant_shuffles_blocks_without_changing_the_answer():
    spec = get_operator("unified_attention")
    variant = variants_for("unified_attention")[0]
    drawn = spec.make_inputs(device=CPU, seed=3, **dict(variant.input_kwargs))
    shuffled = variant_spec(spec, variant).make_inputs(
        device=CPU, seed=3, **dict(variant.input_kwargs)
    )
    used = drawn["block_table"][drawn["block_table"] != 0]
    assert not torch.equal(shuffled["block_table"][drawn["block_table"] != 0], used)
    model = spec.build_reference({})
    assert torch.equal(model(**drawn), model(**shuffled))


def test_paged_variant_shuffles_blocks_and_varies_lengths():
    inputs = variant_inputs("paged_attention_decode")
    table = inputs["block_tables"]
    assert not torch.equal(table.flatten(), torch.arange(table.numel(), dtype=table.dtype))
    assert inputs["seq_lens"].min() >= 1 and inputs["seq_lens"].max() <= 40


def test_reshape_variant_scatters_over_filled_caches_with_padding_slots():
    inputs = variant_inputs("reshape_and_cache")
    slots = inputs["slot_mapping"]
    assert bool((slots == -1).any())
    valid = slots[slots >= 0]
    assert valid.unique().numel() == valid.numel() and not torch.equal(valid.sort().values, valid)
    assert bool((inputs["key_cache"] != 0).any())


@pytest.mark.parametrize("slug", ["chunk_delta_rule_output", "chunk_gated_delta_rule_state"])
def test_delta_rule_gates_fall_within_every_chunk(slug):
    gates = variant_inputs(slug)["g"]  # (B, T, Hv); chunks of 64, the last one partial
    assert gates.shape[1] == 100 and bool((gates <= 0).all())
    for start in (0, 64):
        chunk = gates[:, start : start + 64]
        assert bool((chunk[:, 1:] <= chunk[:, :-1]).all())
    assert float(gates[:, 64].mean()) > float(gates[:, 63].mean())  # restarts at a chunk


@pytest.mark.parametrize("slug", ["chunk_gated_delta_rule_state", "gated_delta_rule_update"])
def test_state_variant_starts_from_another_pool_slot(slug):
    spec = get_operator(slug)
    (variant,) = [v for v in variants_for(slug) if "slot" in v.name]
    inputs = variant_spec(spec, variant).make_inputs(
        device=CPU, seed=1, **dict(variant.input_kwargs)
    )
    assert bool((inputs["initial_state_indices"] > 0).all())


# Candidates that are right at every published shape and wrong where the published shapes
# do not look. Each is checked at a smoke shape of v1 (passes) and at its variants (fails).


class RopeIgnoringPositions(fused_qkv_rope_op.Model):
    def forward(self, qkv, positions, qkv_bias=None):
        return super().forward(qkv, torch.zeros_like(positions), qkv_bias)


class MropeCosFromSin(mrope_op.Model):
    """Reads only the sin table: cos = sqrt(1 - sin²), right while every angle is small."""

    def forward(self, q, k, cos, sin):
        return super().forward(q, k, torch.sqrt(1 - sin.float() ** 2), sin)


class AttentionOneSequence(attention_forward_op.Model):
    def forward(self, q, k, v, cu_seqlens_q, cu_seqlens_k):
        whole = cu_seqlens_q[[0, -1]]
        return super().forward(q, k, v, whole, whole)


class PagedSequentialBlocks(paged_op.Model):
    def forward(self, query, k_cache, v_cache, block_tables, seq_lens):
        sequential = torch.arange(block_tables.numel(), dtype=torch.int32)
        return super().forward(query, k_cache, v_cache, sequential.view_as(block_tables), seq_lens)


class UnifiedSequentialBlocks(unified_op.Model):
    def forward(self, q, k_cache, v_cache, cu_seqlens_q, seqused_k, block_table):
        seqs, width = block_table.shape
        sequential = torch.arange(seqs * width, dtype=torch.int32).view(seqs, width)
        return super().forward(q, k_cache, v_cache, cu_seqlens_q, seqused_k, sequential)


class ReshapeInOrder(reshape_op.Model):
    def forward(self, key, value, key_cache, value_cache, slot_mapping):
        in_order = torch.arange(slot_mapping.numel(), dtype=torch.int64)
        return super().forward(key, value, key_cache, value_cache, in_order)


class ChunkStateFromSlotZero(chunk_state_op.Model):
    def forward(self, k, w, u, g, initial_state, initial_state_indices):
        zeros = torch.zeros_like(initial_state_indices)
        return super().forward(k, w, u, g, initial_state, zeros)


class UpdateFromSlotZero(gated_update_op.Model):
    def forward(self, A_log, a, dt_bias, q, k, v, b, initial_state, initial_state_indices):
        zeros = torch.zeros_like(initial_state_indices)
        return super().forward(A_log, a, dt_bias, q, k, v, b, initial_state, zeros)


NARROW_CANDIDATES = [
    ("fused_qkv_rope", RopeIgnoringPositions, "smoke-0"),
    ("mrope", MropeCosFromSin, "smoke-0"),
    ("attention_forward", AttentionOneSequence, "smoke-0"),
    ("paged_attention_decode", PagedSequentialBlocks, "smoke-0"),
    ("unified_attention", UnifiedSequentialBlocks, "smoke-0"),
    ("reshape_and_cache", ReshapeInOrder, "smoke-0"),
    ("chunk_gated_delta_rule_state", ChunkStateFromSlotZero, "smoke-1"),
    ("gated_delta_rule_update", UpdateFromSlotZero, "smoke-0"),
]


@pytest.mark.parametrize(
    ("slug", "candidate_class", "shape_id"),
    [pytest.param(*case, id=case[0]) for case in NARROW_CANDIDATES],
)
def test_a_candidate_right_only_where_published_shapes_look_fails_a_variant(
    slug, candidate_class, shape_id
):
    spec = get_operator(slug)
    (shape,) = [
        s for s in load_suite("atrex-bench-v1").shapes_for(slug, "smoke") if s.shape_id == shape_id
    ]
    published = check_shape(
        spec=spec,
        reference=spec.build_reference(shape.init_kwargs),
        candidate=candidate_class(**shape.init_kwargs),
        shape_id=shape_id,
        input_kwargs=shape.input_kwargs,
        device=CPU,
        run_seed=11,
    )
    assert published.ok, published.error
    records = [
        check_variant(
            spec=spec, variant=variant, model_class=candidate_class, device="cpu", run_seed=11
        )
        for variant in variants_for(slug)
    ]
    failed = [record for record in records if record["status"] != "pass"]
    assert failed, records
    for record in failed:
        assert record["status"] == "incorrect"
        assert record["error"].startswith(f"validation variant {record['name']!r}")
        assert "error" in record["error"] or "differs" in record["error"]
    assert failed_variant_error(records) == failed[0]["error"]


def test_a_candidate_that_raises_at_a_variant_is_a_runtime_error_naming_it():
    spec = get_operator("fused_qkv_rope")

    class OneTokenOnly(fused_qkv_rope_op.Model):
        def forward(self, qkv, positions, qkv_bias=None):
            if qkv.shape[0] != 1:
                raise ValueError("only decode")
            return super().forward(qkv, positions, qkv_bias)

    record = check_variant(
        spec=spec,
        variant=variants_for("fused_qkv_rope")[0],
        model_class=OneTokenOnly,
        device="cpu",
        run_seed=2,
    )
    assert record["status"] == "runtime_error"
    assert record["error"] == (
        "validation variant 'rotary at non-zero positions (bf16)': ValueError: only decode"
    )
    assert failed_variant_error([{"name": "a", "status": "pass", "error": None}]) is None


# ----------------------------------------------------------------- through the real runner


def smoke_zero_suite(operators: list[str]):
    suite = load_suite("atrex-bench-v1").restrict(operators)
    return replace(suite, shapes=tuple(s for s in suite.shapes if s.shape_id == "smoke-0"))


needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@pytest.mark.gpu
@needs_cuda
@pytest.mark.parametrize("slug", sorted(COVERED))
def test_every_variant_draws_on_cuda_and_passes_the_reference_there(slug):
    spec = get_operator(slug)
    for variant in variants_for(slug):
        record = check_variant(
            spec=spec, variant=variant, model_class=spec.model_class, device="cuda", run_seed=5
        )
        assert record["status"] == "pass", record


def assert_honest_triton_kernels_pass_every_variant(device: str, hardware: str, tmp_path):
    operators = ["fused_qkv_rope", "mrope", "reshape_and_cache"]
    results = run_bundle(
        bundle_path=TRITON_BASELINE,
        suite=smoke_zero_suite(operators),
        hardware=hardware,
        device=device,
        shape_set="smoke",
        time_budget_s=0.05,
        log_dir=tmp_path / "logs",
    )
    assert results["error"] is None
    for entry in results["operators"]:
        expected = [variant.name for variant in variants_for(entry["operator"])]
        assert [v["name"] for v in entry["variants"]] == expected
        assert all(set(v) == {"name", "status", "error", "codes"} for v in entry["variants"])
        assert [v["status"] for v in entry["variants"]] == ["pass"] * len(expected)
        assert [s["status"] for s in entry["shapes"]] == ["pass"], entry["shapes"]
        assert entry["score"] > 0


@pytest.mark.slow
def test_the_honest_triton_kernels_pass_every_variant_and_results_list_them(tmp_path):
    assert_honest_triton_kernels_pass_every_variant("cpu", "cpu-dev", tmp_path)


@pytest.mark.gpu
@needs_cuda
def test_the_honest_triton_kernels_pass_every_variant_on_cuda(tmp_path):
    assert_honest_triton_kernels_pass_every_variant("cuda", "h200-sxm", tmp_path)


@pytest.mark.slow
def test_a_public_run_neither_runs_nor_shows_variants(tmp_path):
    """An agent's round (``--visibility public``): the rotary-less kernel passes the
    position-0 shape, and nothing in its results or progress names a variant."""
    suite_file = tmp_path / "suite.json"
    suite_file.write_text(smoke_zero_suite(["fused_qkv_rope"]).to_json())
    out, progress = tmp_path / "r.json", tmp_path / "p.jsonl"
    completed = evaluator_cli(
        "run", str(CORPUS / "rope_identity"), "--suite", str(suite_file), "--device", "cpu",
        "--visibility", "public", "--time-budget-s", "0.05", "--out", str(out),
        "--progress", str(progress), tmp_path=tmp_path,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr[-3000:]
    (entry,) = json.loads(out.read_text())["operators"]
    assert entry["variants"] == []
    assert [s["status"] for s in entry["shapes"]] == ["pass"]
    for text in (out.read_text(), progress.read_text(), completed.stdout, completed.stderr):
        assert "validation variant" not in text and "non-zero positions" not in text
