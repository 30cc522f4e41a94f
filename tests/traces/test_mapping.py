"""Mapping profiler events to suite operators: vLLM's op names, aten ops and
decompositions, the engine-over-framework rule, kernels linked by External id."""

from __future__ import annotations

import gzip
import io
import json

import pytest

from traces.mapping import RulesError, compile_rules, load_rules
from traces.parsing import parse_trace


def parse_data(data: dict, rules=None):
    return parse_trace(io.BytesIO(json.dumps(data).encode()), name="t", rules=rules)


def by_operator(parsed) -> dict[str, list]:
    found: dict[str, list] = {}
    for row in parsed.rows:
        found.setdefault(row.operator, []).append(row)
    return found


def shapes(rows) -> list:
    return sorted(
        (json.dumps(r.init_kwargs, sort_keys=True), json.dumps(r.input_kwargs, sort_keys=True))
        for r in rows
    )


def test_vllm_op_names_map_to_their_operators_with_shapes_from_the_dims(vllm_moe_trace):
    parsed = parse_trace(vllm_moe_trace.open("rb"), name="moe")
    assert parsed.time_basis == "cpu-ops"
    ops = by_operator(parsed)
    assert set(ops) == {
        "rms_norm",
        "fused_add_rms_norm",
        "silu_and_mul",
        "reshape_and_cache",
        "unified_attention",
        "paged_attention_decode",
        "fused_moe",
        "moe_topk_gating_softmax",
        "moe_align_block_size",
        "moe_sum_reduce",
    }
    # The tiny Qwen3-MoE: hidden 256, 4/2 heads of 64, 8 experts top-2, expert width 128;
    # batches: prefill [16, 8], decode 4 x 32, prefill [24], decode 2 x 48.
    assert {r.input_kwargs["token_count"] for r in ops["rms_norm"]} == {24, 4, 2}
    assert all(
        r.init_kwargs == {"eps": 1e-6} and r.input_kwargs["hidden_size"] == 256
        for r in ops["rms_norm"]
    )
    moe = {r.input_kwargs["token_count"]: r for r in ops["fused_moe"]}
    assert moe[24].init_kwargs == {"intermediate_size": 128, "num_experts": 8, "top_k": 2}
    assert moe[24].calls == 2  # the two prefill batches of 24 tokens
    assert {
        r.input_kwargs["num_seqs"]: r.input_kwargs["ctx_len"] for r in ops["paged_attention_decode"]
    } == {4: 32, 2: 48}
    assert {tuple(r.input_kwargs["seq_lens"]) for r in ops["unified_attention"]} == {
        (12, 12),
        (24,),
    }
    align = ops["moe_align_block_size"][0]
    assert align.init_kwargs == {"block_size": 128, "num_experts": 8}
    # moe_sum and silu_and_mul run inside the fused-experts op: the innermost engine op
    # gets their time, with the (tokens x top_k) rows of the expert intermediate.
    assert {r.input_kwargs["token_count"] for r in ops["moe_sum_reduce"]} == {24, 4, 2}
    assert [48, 256] in [r.input_kwargs["shape"] for r in ops["silu_and_mul"]]
    assert {r.input_kwargs["block_size"] for r in ops["reshape_and_cache"]} == {16}
    unmapped = {u.name for u in parsed.unmapped}
    assert {"aten::linear", "_C::rotary_embedding"} <= unmapped
    assert 0 < parsed.mapped_time_us < parsed.total_time_us


def test_aten_ops_and_decompositions_of_a_plain_model_are_mapped(plain_trace):
    parsed = parse_trace(plain_trace.open("rb"), name="plain")
    ops = by_operator(parsed)
    assert {"rms_norm", "silu_and_mul", "attention_forward"} <= set(ops)
    norm = {r.input_kwargs["token_count"]: r for r in ops["rms_norm"]}
    assert set(norm) == {24, 4, 2}
    assert "aten::pow + aten::mean + aten::add + aten::rsqrt + aten::mul" in next(
        iter(norm[24].sources)
    )
    assert {tuple(r.input_kwargs["shape"]) for r in ops["silu_and_mul"]} == {
        (24, 1024),
        (4, 1024),
        (2, 1024),
    }
    assert {tuple(r.input_kwargs["seq_lens"]) for r in ops["attention_forward"]} == {
        (16,),
        (8,),
        (24,),
    }
    # Decode SDPA (1 query against the cache) is not attention_forward: reported, with why.
    reasons = [u.reason for u in parsed.unmapped if u.name == "aten::scaled_dot_product_attention"]
    assert reasons and "q and k differ" in reasons[0]


def _ops(data: dict) -> list[dict]:
    return [e for e in data["traceEvents"] if e.get("cat") == "cpu_op"]


def _kernel(external, dur: float, name: str = "kernel") -> dict:
    return {
        "ph": "X",
        "cat": "kernel",
        "name": name,
        "pid": 0,
        "tid": 7,
        "ts": 0.0,
        "dur": dur,
        "args": {"External id": external, "correlation": 1},
    }


def _inside(ops: list[dict], outer: str, inner_prefix: str = "aten::") -> dict:
    """An aten op nested in the first ``outer`` op (by time, on the same thread)."""
    host = next(o for o in ops if o["name"] == outer)
    end = host["ts"] + host["dur"]
    return next(
        o
        for o in ops
        if o["name"].startswith(inner_prefix)
        and o["tid"] == host["tid"]
        and host["ts"] < o["ts"]
        and o["ts"] + o["dur"] <= end
    )


def test_kernels_are_charged_to_the_engine_op_that_launched_them(vllm_moe_trace):
    """A GPU trace's time is its kernels': each is charged through its External id to the
    innermost engine op around the aten op that launched it (taken from a real recording,
    with device events added where its ops would have launched kernels)."""
    data = json.loads(gzip.decompress(vllm_moe_trace.read_bytes()))
    ops = _ops(data)
    in_moe_sum = _inside(ops, "_moe_C::moe_sum")
    in_experts = _inside(ops, "vllm::outplace_fused_experts", "aten::mm")
    in_sdpa = _inside(
        ops, "vllm::unified_attention_with_output", "aten::scaled_dot_product_attention"
    )
    linear = next(o for o in ops if o["name"] == "aten::linear")
    data["traceEvents"] += [
        _kernel(in_moe_sum["args"]["External id"], 5.0, "moe_sum_kernel"),
        _kernel(in_experts["args"]["External id"], 100.0, "gemm"),
        _kernel(in_sdpa["args"]["External id"], 40.0, "flash_fwd"),
        _kernel(linear["args"]["External id"], 300.0, "gemm"),
        _kernel(None, 2.0, "ncclKernel_AllReduce"),
    ]
    parsed = parse_data(data)
    assert parsed.time_basis == "gpu-kernels"
    time = {op: sum(r.time_us for r in rows) for op, rows in by_operator(parsed).items()}
    assert time == {"moe_sum_reduce": 5.0, "fused_moe": 100.0, "unified_attention": 40.0}
    unmapped = {(u.name, u.reason): u.time_us for u in parsed.unmapped}
    assert unmapped == {
        ("aten::linear", "no rule for this operator"): 300.0,
        ("ncclKernel_AllReduce", "device activity without a launching operator"): 2.0,
    }
    assert parsed.total_time_us == 447.0


def test_a_rules_file_can_add_a_name_and_bad_rules_are_refused(vllm_moe_trace):
    rules = load_rules(
        json.dumps(
            {
                "rules": [
                    {
                        "pattern": r"_C::rotary_embedding",
                        "operator": "rms_norm",
                        "extractor": "rows_hidden",
                        "params": {"arg": 1},
                    },
                ]
            }
        )
    )
    parsed = parse_trace(vllm_moe_trace.open("rb"), name="moe", rules=rules)
    assert {r.operator for r in parsed.rows} == {"rms_norm"}
    assert {tuple(r.sources)[0] for r in parsed.rows} == {"_C::rotary_embedding"}
    with pytest.raises(RulesError) as caught:
        compile_rules([{"pattern": "(", "operator": "x", "extractor": "nope", "tier": "top"}])
    message = caught.value.message
    assert "extractor 'nope' is unknown" in message and "tier 'top'" in message


def derive(name: str, dims, types, concrete=()):
    from traces.mapping import OpCall

    rule = compile_rules().name_rule(name)
    assert rule is not None, name
    call = OpCall(name=name, dims=tuple(dims), types=tuple(types), concrete=tuple(concrete))
    return rule.extractor([call], rule.params)


def test_sglang_argument_orders_are_read_where_sglang_puts_them():
    gating = derive(
        "sgl_kernel::topk_softmax",
        [(512, 8), (512, 8), (512, 128), ()],
        ["float", "int", "float", "Scalar"],
        ["", "", "", "False"],
    )
    assert (gating.operator, gating.init_kwargs, gating.input_kwargs) == (
        "moe_topk_gating_softmax",
        {"top_k": 8},
        {"num_experts": 128, "token_count": 512},
    )
    norm = derive(
        "sgl_kernel::rmsnorm",
        [(7, 4096), (7, 4096), (4096,), (), ()],
        ["c10::BFloat16"] * 3 + ["Scalar", "Scalar"],
        ["", "", "", "9.9999999999999995e-07", "False"],
    )
    assert norm.input_kwargs == {"token_count": 7, "hidden_size": 4096}
    assert norm.init_kwargs == {"eps": 1e-6}
    reduce = derive(
        "sgl_kernel::moe_sum_reduce",
        [(33, 8, 2048), (33, 2048), ()],
        ["c10::BFloat16", "c10::BFloat16", "Scalar"],
        ["", "", "2.5"],
    )
    assert reduce.init_kwargs == {"routed_scaling_factor": 2.5}
    assert reduce.input_kwargs == {"hidden_size": 2048, "token_count": 33, "top_k": 8}
