"""Mapping of profiler events to suite operators: name patterns and shape extractors.

A rule says which profiler operator names (a regular expression, matched against the
whole name) or which run of consecutive sibling operators (a decomposition, e.g. the
``aten::pow, aten::mean, aten::add, aten::rsqrt, aten::mul`` of a plain PyTorch RMSNorm)
is an instance of a suite operator, and how its shape kwargs follow from the recorded
input dimensions, dtypes and scalar arguments (``record_shapes=True``).

Rules are plain data (``DEFAULT_RULES``; an admin may pass a JSON file of rules of the
same form); the extractors they name are the functions in ``EXTRACTORS``. Tier
``engine`` (a serving engine's own custom op, e.g. vLLM's ``_C::rms_norm``) wins over tier
``framework`` (aten ops and decompositions) when both enclose a kernel, whatever the
nesting; inside one tier the innermost match wins (vLLM's fused-experts op launches
``_moe_C::moe_sum`` and ``_moe_C::moe_align_block_size`` inside it, and their kernels
belong to those operators).

No Django and no torch here.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from evaluator.errors import UserError

TIERS = ("engine", "framework")


class ShapeUnknown(Exception):
    """The event is an instance of the operator, but its shape cannot be derived."""


class RulesError(UserError):
    """A rules file that cannot be used (code ``trace:bad-rules``)."""

    code = "trace:bad-rules"


@dataclass(frozen=True)
class OpCall:
    """What the profiler recorded about one operator call (``record_shapes=True``)."""

    name: str
    dims: tuple[tuple[int, ...] | None, ...]
    types: tuple[str, ...]
    concrete: tuple[str, ...]

    def tensor(self, index: int) -> tuple[int, ...]:
        """The dimensions of the tensor argument at ``index`` (ShapeUnknown if absent)."""
        if index >= len(self.dims) or self.dims[index] is None:
            raise ShapeUnknown(f"{self.name}: argument {index} has no recorded dimensions")
        dims = self.dims[index]
        if not dims or not self._is_tensor(index):
            raise ShapeUnknown(f"{self.name}: argument {index} is not a tensor with dimensions")
        return dims

    def _is_tensor(self, index: int) -> bool:
        kind = self.types[index] if index < len(self.types) else ""
        return kind not in ("", "Scalar", "ScalarList", "TensorList", "GenericList")

    def dtype(self, index: int) -> str:
        return self.types[index] if index < len(self.types) else ""

    def scalar(self, index: int) -> float:
        """The scalar argument at ``index`` (from the profiler's "Concrete Inputs")."""
        text = self.concrete[index] if index < len(self.concrete) else ""
        try:
            value = float(text)
        except ValueError:
            raise ShapeUnknown(
                f"{self.name}: scalar argument {index} was not recorded (torch.profiler writes "
                'scalars as "Concrete Inputs" from torch 2.1 on)'
            ) from None
        if not math.isfinite(value):
            raise ShapeUnknown(f"{self.name}: scalar argument {index} is {text}")
        return value


@dataclass(frozen=True)
class Derived:
    """The shape of one operator instance: init and input kwargs, and how they were found."""

    operator: str
    init_kwargs: dict[str, Any]
    input_kwargs: dict[str, Any]
    note: str = ""


def _rows(dims: Sequence[int]) -> int:
    return int(math.prod(dims[:-1])) if len(dims) > 1 else 1


def _eps(call: OpCall, index: int | None, default: float) -> float:
    if index is None:
        return default
    try:
        value = call.scalar(index)
    except ShapeUnknown:
        return default
    # The profiler prints doubles in full (9.9999999999999995e-07); the suite writes 1e-06.
    return float(f"{value:.6g}")


_DTYPES = {"c10::BFloat16": "bf16", "c10::Half": "fp16", "float": "fp32"}
_FLOATING = set(_DTYPES)


# --------------------------------------------------------------------------- extractors
# Each takes the matched calls (one for a name rule, the run for a sequence rule) and the
# rule's parameters, and returns a Derived (or raises ShapeUnknown saying what is missing).


def rows_hidden(calls: Sequence[OpCall], params: Mapping[str, Any]) -> Derived:
    """(T, H) operators (rms_norm, fused_add_rms_norm, quantisation): rows x last axis."""
    call = calls[int(params.get("call", 0))]
    dims = call.tensor(int(params.get("arg", 0)))
    kwargs = {
        params.get("rows_key", "token_count"): _rows(dims),
        params.get("hidden_key", "hidden_size"): int(dims[-1]),
    }
    init: dict[str, Any] = {}
    if "eps_default" in params:
        init["eps"] = _eps(call, params.get("eps_arg"), float(params["eps_default"]))
    if "group_size_arg" in params:
        init["group_size"] = int(call.scalar(int(params["group_size_arg"])))
    return Derived(params["operator"], init, kwargs)


def gated_rows(calls: Sequence[OpCall], params: Mapping[str, Any]) -> Derived:
    """silu_and_mul: ``shape`` [rows, 2d] from the gate/up input (or 2x the SiLU input's
    last axis for the aten decomposition ``silu(gate) * up``)."""
    call = calls[int(params.get("call", 0))]
    dims = call.tensor(int(params.get("arg", 0)))
    last = int(dims[-1]) * int(params.get("last_factor", 1))
    return Derived(params["operator"], {}, {"shape": [_rows(dims), last]})


def layer_norm(calls: Sequence[OpCall], params: Mapping[str, Any]) -> Derived:
    call = calls[0]
    dims = call.tensor(int(params.get("arg", 0)))
    return Derived(params["operator"], {}, {"shape": [int(d) for d in dims]})


def kv_cache_write(calls: Sequence[OpCall], params: Mapping[str, Any]) -> Derived:
    """reshape_and_cache: key (T, H, D); block size from the key cache's layout."""
    call = calls[0]
    key = call.tensor(int(params.get("key_arg", 0)))
    cache = call.tensor(int(params.get("cache_arg", 2)))
    if len(key) != 3:
        raise ShapeUnknown(f"{call.name}: key has {len(key)} dimensions, expected (T, H, D)")
    block_axis = int(params.get("block_axis", 1))
    if block_axis >= len(cache):
        raise ShapeUnknown(f"{call.name}: the key cache has {len(cache)} dimensions")
    return Derived(
        params["operator"],
        {},
        {"shape": [int(d) for d in key], "block_size": int(cache[block_axis])},
    )


def moe_experts(calls: Sequence[OpCall], params: Mapping[str, Any]) -> Derived:
    """fused_moe: hidden (T, H), w1 (E, 2I, H), w2 (E, H, I), topk_ids (T, k)."""
    call = calls[0]
    hidden = call.tensor(int(params.get("hidden_arg", 0)))
    w1 = call.tensor(int(params.get("w1_arg", 1)))
    ids = call.tensor(int(params.get("topk_ids_arg", 4)))
    if len(w1) != 3 or len(ids) != 2:
        raise ShapeUnknown(f"{call.name}: expected w1 (E, 2I, H) and topk_ids (T, k)")
    if _DTYPES.get(call.dtype(int(params.get("w1_arg", 1)))) is None:
        raise ShapeUnknown(
            f"{call.name}: expert weights are {call.dtype(1)}, not bf16/fp16 (quantised MoE "
            "has its own operators)"
        )
    experts, intermediate, top_k = int(w1[0]), int(w1[1]) // 2, int(ids[1])
    init = {"intermediate_size": intermediate, "num_experts": experts, "top_k": top_k}
    return Derived(
        params["operator"],
        init,
        {**init, "hidden_size": int(hidden[-1]), "token_count": _rows(hidden)},
    )


def moe_gating(calls: Sequence[OpCall], params: Mapping[str, Any]) -> Derived:
    """moe_topk_gating_softmax: logits (T, E); k from the top-k output or the scalar."""
    logits_call = calls[int(params.get("logits_call", 0))]
    if params.get("logits_arg") == "last_float":
        # vLLM passes (weights, ids, token_expert_indices, logits), SGLang (weights, ids,
        # logits, ...): the logits are the last floating 2-D tensor argument.
        index = next(
            (
                i
                for i in range(len(logits_call.dims) - 1, -1, -1)
                if logits_call.dtype(i) in _FLOATING
                and logits_call.dims[i] is not None
                and len(logits_call.dims[i]) == 2
            ),
            None,
        )
        if index is None:
            raise ShapeUnknown(f"{logits_call.name}: no 2-D floating argument (the logits)")
        logits = logits_call.tensor(index)
    else:
        logits = logits_call.tensor(int(params.get("logits_arg", 3)))
    if "k_arg" in params:
        k_call = calls[int(params.get("k_call", 0))]
        top_k = int(k_call.scalar(int(params["k_arg"])))
    else:
        top_k = int(calls[0].tensor(int(params.get("weights_arg", 0)))[-1])
    return Derived(
        params["operator"],
        {"top_k": top_k},
        {"num_experts": int(logits[-1]), "token_count": _rows(logits)},
    )


def moe_align(calls: Sequence[OpCall], params: Mapping[str, Any]) -> Derived:
    call = calls[0]
    ids = call.tensor(int(params.get("topk_ids_arg", 0)))
    experts = int(call.scalar(int(params.get("experts_arg", 1))))
    block = int(call.scalar(int(params.get("block_arg", 2))))
    return Derived(
        params["operator"],
        {"block_size": block, "num_experts": experts},
        {"num_experts": experts, "token_count": _rows(ids), "top_k": int(ids[-1])},
    )


def moe_sum(calls: Sequence[OpCall], params: Mapping[str, Any]) -> Derived:
    call = calls[0]
    dims = call.tensor(int(params.get("arg", 0)))
    if len(dims) != 3:
        raise ShapeUnknown(f"{call.name}: expected expert outputs (T, k, H)")
    factor = 1.0
    if "factor_arg" in params:
        factor = call.scalar(int(params["factor_arg"]))
    return Derived(
        params["operator"],
        {"routed_scaling_factor": factor},
        {"hidden_size": int(dims[2]), "token_count": int(dims[0]), "top_k": int(dims[1])},
    )


def paged_decode(calls: Sequence[OpCall], params: Mapping[str, Any]) -> Derived:
    """paged_attention_decode: query (S, Hq, D), key cache (NB, Hkv, D/x, bs, x), the
    longest context (max_seq_len scalar) as ctx_len."""
    call = calls[0]
    query_arg = int(params.get("query_arg", 1))
    query = call.tensor(query_arg)
    cache = call.tensor(int(params.get("key_cache_arg", 2)))
    if len(query) != 3 or len(cache) != 5:
        raise ShapeUnknown(f"{call.name}: expected query (S, Hq, D) and a 5-D key cache")
    dtype = _DTYPES.get(call.dtype(query_arg))
    if dtype not in ("bf16", "fp16"):
        raise ShapeUnknown(f"{call.name}: query dtype {call.dtype(query_arg)} is not bf16/fp16")
    return Derived(
        params["operator"],
        {},
        {
            "block_size": int(cache[3]),
            "ctx_len": int(call.scalar(int(params.get("max_len_arg", 9)))),
            "dtype": dtype,
            "head_size": int(query[2]),
            "num_kv_heads": int(cache[1]),
            "num_query_heads": int(query[1]),
            "num_seqs": int(query[0]),
        },
        note="ctx_len is the batch's longest context (max_seq_len)",
    )


def _heads(dims: Sequence[int], head_size: int | None, what: str, name: str) -> tuple[int, int]:
    if len(dims) == 3:
        return int(dims[1]), int(dims[2])
    if len(dims) == 2 and head_size:
        return int(dims[1]) // head_size, head_size
    raise ShapeUnknown(f"{name}: {what} dimensions {list(dims)} do not give heads and head size")


def packed_prefill(calls: Sequence[OpCall], params: Mapping[str, Any]) -> Derived:
    """unified_attention: query (T, Hq, D), key (T, Hkv, D). The op's arguments hold the
    batch's tokens, not its sequences: with a cu_seqlens argument (S+1,) the T tokens are
    split evenly over S sequences, otherwise they are taken as one sequence (the upper
    bound of the attention work); the shape's note says which."""
    call = calls[0]
    key = call.tensor(int(params.get("key_arg", 1)))
    kv_heads, head_size = _heads(key, None, "key", call.name)
    query = call.tensor(int(params.get("query_arg", 0)))
    q_heads, _ = _heads(query, head_size, "query", call.name)
    tokens = int(query[0])
    sequences, note = 1, "seq_lens: the batch's tokens taken as one sequence (not recorded)"
    if "cu_seqlens_arg" in params:
        arg = int(params["cu_seqlens_arg"])
        try:
            if call.dtype(arg) in ("int", "long int"):
                sequences = max(1, int(call.tensor(arg)[0]) - 1)
                note = "seq_lens: the batch's tokens split evenly over its sequences"
        except ShapeUnknown:
            pass
    base, extra = divmod(tokens, sequences)
    seq_lens = [base + (1 if i < extra else 0) for i in range(sequences)]
    return Derived(
        params["operator"],
        {},
        {
            "block_size": int(params.get("block_size", 16)),
            "head_size": head_size,
            "num_kv_heads": kv_heads,
            "num_query_heads": q_heads,
            "num_seqs": sequences,
            "seq_lens": seq_lens,
        },
        note=note,
    )


def sdpa(calls: Sequence[OpCall], params: Mapping[str, Any]) -> Derived:
    """attention_forward from aten SDPA: q (B, H, S, D) -> B sequences of S tokens."""
    call = calls[0]
    query = call.tensor(0)
    key = call.tensor(1)
    if len(query) != 4:
        raise ShapeUnknown(f"{call.name}: expected q (B, H, S, D)")
    if len(key) == 4 and (key[1] != query[1] or key[2] != query[2]):
        raise ShapeUnknown(
            f"{call.name}: q and k differ in heads or length ({list(query)} vs {list(key)}); "
            "attention_forward is self-attention with as many key heads as query heads"
        )
    return Derived(
        params["operator"],
        {},
        {
            "head_dim": int(query[3]),
            "num_heads": int(query[1]),
            "seq_lens": [int(query[2])] * int(query[0]),
        },
        note="from aten SDPA (attention_forward is non-causal; a causal mask is not told apart)",
    )


EXTRACTORS: dict[str, Callable[[Sequence[OpCall], Mapping[str, Any]], Derived]] = {
    "rows_hidden": rows_hidden,
    "gated_rows": gated_rows,
    "layer_norm": layer_norm,
    "kv_cache_write": kv_cache_write,
    "moe_experts": moe_experts,
    "moe_gating": moe_gating,
    "moe_align": moe_align,
    "moe_sum": moe_sum,
    "paged_decode": paged_decode,
    "packed_prefill": packed_prefill,
    "sdpa": sdpa,
}


# --------------------------------------------------------------------------- rules


def _op(pattern: str, operator: str, extractor: str, tier: str = "engine", **params: Any) -> dict:
    return {
        "pattern": pattern,
        "operator": operator,
        "extractor": extractor,
        "tier": tier,
        "params": params,
    }


def _seq(names: list[str], operator: str, extractor: str, **params: Any) -> dict:
    return {
        "sequence": names,
        "operator": operator,
        "extractor": extractor,
        "tier": "framework",
        "params": params,
    }


# The names vLLM (``_C``, ``_C_cache_ops``, ``_moe_C``, ``vllm``) and SGLang
# (``sgl_kernel``) register their ops under, with the argument positions of their schemas,
# then the aten ops and decompositions of a plain PyTorch model.
DEFAULT_RULES: list[dict[str, Any]] = [
    _op(r"_C::rms_norm", "rms_norm", "rows_hidden", arg=1, eps_arg=3, eps_default=1e-6),
    _op(r"sgl_kernel::rmsnorm", "rms_norm", "rows_hidden", arg=1, eps_arg=3, eps_default=1e-6),
    _op(
        r"(_C::fused_add_rms_norm|sgl_kernel::fused_add_rmsnorm)",
        "fused_add_rms_norm",
        "rows_hidden",
        arg=0,
        eps_arg=3,
        eps_default=1e-6,
    ),
    _op(r"(_C|sgl_kernel)::silu_and_mul", "silu_and_mul", "gated_rows", arg=1),
    _op(
        r"_C_cache_ops::reshape_and_cache_flash",
        "reshape_and_cache",
        "kv_cache_write",
        key_arg=0,
        cache_arg=2,
        block_axis=1,
    ),
    _op(
        r"_C_cache_ops::reshape_and_cache",
        "reshape_and_cache",
        "kv_cache_write",
        key_arg=0,
        cache_arg=2,
        block_axis=3,
    ),
    _op(r"vllm::(inplace|outplace)_fused_experts", "fused_moe", "moe_experts"),
    _op(
        r"(_moe_C|sgl_kernel)::topk_softmax",
        "moe_topk_gating_softmax",
        "moe_gating",
        logits_arg="last_float",
        weights_arg=0,
    ),
    _op(r"(_moe_C|sgl_kernel)::moe_align_block_size", "moe_align_block_size", "moe_align"),
    _op(r"_moe_C::moe_sum", "moe_sum_reduce", "moe_sum", arg=0),
    _op(r"sgl_kernel::moe_sum_reduce", "moe_sum_reduce", "moe_sum", arg=0, factor_arg=2),
    _op(
        r"_C::paged_attention_v1",
        "paged_attention_decode",
        "paged_decode",
        query_arg=1,
        key_cache_arg=2,
        max_len_arg=9,
    ),
    _op(
        r"_C::paged_attention_v2",
        "paged_attention_decode",
        "paged_decode",
        query_arg=4,
        key_cache_arg=5,
        max_len_arg=12,
    ),
    _op(
        r"vllm::unified_attention(_with_output)?",
        "unified_attention",
        "packed_prefill",
        query_arg=0,
        key_arg=1,
        cu_seqlens_arg=5,
    ),
    _op(
        r"_C::dynamic_per_token_scaled_fp8_quant",
        "fp8_dynamic_per_token_quant",
        "rows_hidden",
        arg=1,
    ),
    _op(
        r"(_C::per_token_group_fp8_quant|sgl_kernel::sgl_per_token_group_quant_fp8)",
        "per_token_group_quant_fp8",
        "rows_hidden",
        arg=0,
        group_size_arg=3,
    ),
    # A plain PyTorch model: aten ops, then the decompositions of RMSNorm, SwiGLU, the router.
    _op(
        r"aten::(rms_norm|_fused_rms_norm)",
        "rms_norm",
        "rows_hidden",
        tier="framework",
        arg=0,
        eps_arg=3,
        eps_default=1e-6,
    ),
    _op(r"aten::layer_norm", "layer_norm", "layer_norm", tier="framework", arg=0),
    _op(r"aten::scaled_dot_product_attention", "attention_forward", "sdpa", tier="framework"),
    _seq(
        [
            "aten::to?",
            "aten::pow",
            "aten::mean",
            "aten::add",
            "aten::rsqrt",
            "aten::mul",
            "aten::to?",
            "aten::mul?",
        ],
        "rms_norm",
        "rows_hidden",
        arg=0,
        eps_default=1e-6,
    ),
    _seq(["aten::silu", "aten::mul"], "silu_and_mul", "gated_rows", arg=0, last_factor=2),
    _seq(
        ["aten::softmax", "aten::topk"],
        "moe_topk_gating_softmax",
        "moe_gating",
        logits_call=0,
        logits_arg=0,
        k_call=1,
        k_arg=1,
    ),
]


@dataclass
class Rule:
    """One compiled rule (see the module docstring)."""

    index: int
    operator: str
    extractor: Callable[[Sequence[OpCall], Mapping[str, Any]], Derived]
    extractor_name: str
    tier: int
    params: dict[str, Any]
    pattern: re.Pattern[str] | None = None
    sequence: list[tuple[str, bool]] = field(default_factory=list)

    def describe(self) -> str:
        if self.pattern is not None:
            return self.pattern.pattern
        return " → ".join(name + ("?" if optional else "") for name, optional in self.sequence)


@dataclass
class RuleSet:
    """Compiled rules: name rules by first match, sequence rules by their first name."""

    rules: list[Rule]

    def __post_init__(self) -> None:
        names = [r.pattern.pattern for r in self.rules if r.pattern is not None]
        firsts = {name for r in self.rules for name, _ in r.sequence}
        names += [re.escape(name) for name in sorted(firsts)]
        self._any = re.compile("|".join(f"(?:{n})" for n in names)) if names else None
        self._cache: dict[str, Rule | None] = {}

    def interesting(self, name: str) -> bool:
        """Whether an op of this name can take part in any rule (its args are kept)."""
        return self._any is not None and self._any.fullmatch(name) is not None

    def name_rule(self, name: str) -> Rule | None:
        if name not in self._cache:
            self._cache[name] = next(
                (r for r in self.rules if r.pattern is not None and r.pattern.fullmatch(name)),
                None,
            )
        return self._cache[name]

    def sequence_rules(self) -> list[Rule]:
        return [r for r in self.rules if r.sequence]

    def table(self) -> list[dict[str, str]]:
        """The rules as rows for a page: what is matched, the operator, tier, extractor."""
        return [
            {
                "match": r.describe(),
                "operator": r.operator,
                "tier": TIERS[r.tier],
                "extractor": r.extractor_name,
            }
            for r in self.rules
        ]


def compile_rules(rules: Sequence[Mapping[str, Any]] | None = None) -> RuleSet:
    """Check and compile rules (default: DEFAULT_RULES); RulesError lists every problem."""
    problems: list[str] = []
    compiled: list[Rule] = []
    for index, raw in enumerate(DEFAULT_RULES if rules is None else rules):
        where = f"rule {index + 1}"
        if not isinstance(raw, Mapping):
            problems.append(f"{where}: must be an object")
            continue
        extractor = EXTRACTORS.get(str(raw.get("extractor")))
        if extractor is None:
            problems.append(
                f"{where}: extractor {raw.get('extractor')!r} is unknown; known: "
                f"{', '.join(sorted(EXTRACTORS))}"
            )
        tier = raw.get("tier", "engine")
        if tier not in TIERS:
            problems.append(f"{where}: tier {tier!r} must be one of {', '.join(TIERS)}")
        operator = raw.get("operator")
        if not isinstance(operator, str) or not operator:
            problems.append(f"{where}: operator (a suite operator slug) is required")
        params = raw.get("params", {})
        if not isinstance(params, Mapping):
            problems.append(f"{where}: params must be an object")
            params = {}
        pattern = None
        sequence: list[tuple[str, bool]] = []
        if "pattern" in raw:
            try:
                pattern = re.compile(str(raw["pattern"]))
            except re.error as exc:
                problems.append(f"{where}: pattern {raw['pattern']!r} is not a regex: {exc}")
        elif isinstance(raw.get("sequence"), list) and raw["sequence"]:
            sequence = [(str(n).rstrip("?"), str(n).endswith("?")) for n in raw["sequence"]]
            if all(optional for _, optional in sequence):
                problems.append(f"{where}: a sequence needs at least one required name")
        else:
            problems.append(f"{where}: needs a pattern or a non-empty sequence")
        if extractor is None or tier not in TIERS or not operator:
            continue
        compiled.append(
            Rule(
                index=index,
                operator=str(operator),
                extractor=extractor,
                extractor_name=str(raw["extractor"]),
                tier=TIERS.index(tier),
                params={**dict(params), "operator": str(operator)},
                pattern=pattern,
                sequence=sequence,
            )
        )
    if problems:
        raise RulesError("The mapping rules cannot be used: " + "; ".join(problems) + ".")
    return RuleSet(compiled)


def load_rules(text: str) -> RuleSet:
    """Rules from a JSON document: a list of rules, or {"rules": [...]}."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RulesError(f"The rules file is not JSON: {exc}.") from None
    if isinstance(data, Mapping):
        data = data.get("rules")
    if not isinstance(data, list):
        raise RulesError('The rules file must be a JSON list of rules, or {"rules": [...]}.')
    return compile_rules(data)
