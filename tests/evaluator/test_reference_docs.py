"""The operator page's view of a reference, read without torch: module documentation, the
reference and input generator with their helpers, the policy's definition and its rules in
words. (facts.json is checked against the live operators in test_smoke_shapes.py.)"""

from __future__ import annotations

import pytest

from evaluator import reference_docs
from evaluator.suite import load_suite

SLUGS = load_suite("atrex-bench-v1").operator_slugs()


@pytest.mark.parametrize("slug", SLUGS)
def test_every_operator_has_its_documentation_reference_and_input_generator(slug):
    source = reference_docs.reference_source(slug)
    assert source is not None and source.docstring.startswith(f"``{slug}``")
    assert source.reference is not None and source.reference.text.startswith("class Model(")
    assert source.inputs is not None and source.inputs.text.startswith("def make_inputs(")
    assert source.policy, "the policy's definition is found"
    assert any("POLICY" in block.text for block in source.policy)
    assert reference_docs.operator_facts(slug) is not None


def test_helpers_are_followed_into_the_shared_modules():
    source = reference_docs.reference_source("rms_norm")
    assert source is not None
    helpers = {(block.module, block.title) for block in source.helpers}
    assert ("base", "randn_bf16") in helpers
    assert [(b.module, b.title) for b in source.policy] == [("base", "BF16_POLICY")]
    attention = reference_docs.reference_source("unified_attention")
    assert attention is not None
    assert ("_attention", "attend_fp32_many") in {(b.module, b.title) for b in attention.helpers}
    assert attention.checker_notes.startswith("ATTENTION_POLICY")  # notes joined across modules


def test_the_hidden_variants_module_is_never_read_as_a_reference():
    assert reference_docs.reference_source("_variants") is None
    assert not reference_docs.is_builtin("_variants")
    assert reference_docs.reference_source("no_such_operator") is None
    assert reference_docs.reference_source("../settings") is None


def test_rules_in_words():
    bf16 = reference_docs.describe_rule(
        {
            "kind": "values",
            "rtol": 2.0**-6,
            "atol_scale": 1e-3,
            "atol_floor": 1e-12,
            "max_mismatch_share": 0.0,
            "tight": None,
        }
    )
    assert "rtol = 2^-6" in bf16[0] and "atol = 0.001·max|reference|" in bf16[0]
    assert bf16[1] == "Every element must pass."
    share = reference_docs.describe_rule(
        {
            "kind": "values",
            "rtol": 2.0**-6,
            "atol_scale": 1e-3,
            "atol_floor": 1e-12,
            "max_mismatch_share": 1e-4,
            "tight": None,
        }
    )
    assert share[1] == "At most 0.01% of the elements may fail."
    exact = reference_docs.describe_rule(
        {
            "kind": "values",
            "rtol": 0.0,
            "atol_scale": 0.0,
            "atol_floor": 0.0,
            "max_mismatch_share": 0.0,
            "tight": None,
        }
    )
    assert exact == ["must equal the reference exactly (no tolerance)."]
    fp8 = reference_docs.describe_rule(
        {"kind": "fp8_codes", "max_step_share": 1e-3, "max_steps": 1, "scale_leaf": "scales"}
    )
    assert "at most 1 grid step(s)" in fp8[0] and "0.1% of the codes" in fp8[0]
    assert "The scales (scales) are checked first" in fp8[0]
    assert reference_docs.describe_rule({"kind": "exact"})[0].startswith("must equal")
    scales = reference_docs.describe_rule(
        {
            "kind": "values",
            "rtol": 2.0**-7,
            "atol_scale": 0.0,
            "atol_floor": 0.0,
            "max_mismatch_share": 0.0,
            "tight": {
                "kind": "values",
                "rtol": 1e-6,
                "atol_scale": 0.0,
                "atol_floor": 0.0,
                "max_mismatch_share": 0.01,
            },
        }
    )
    assert scales[0] == (
        "each element passes when |candidate − reference| ≤ rtol·|reference| with rtol = 2^-7."
    )
    assert scales[2] == (
        "It must also pass a tighter rule, |candidate − reference| ≤ rtol·|reference| with "
        "rtol = 10^-6, on all but at most 1% of the elements."
    )
