"""Every operator the mapping derives shapes for yields kwargs that the evaluator's
references and work models accept: a proposal on atrex-bench v1 from the recorded vLLM-named
and plain traces publishes (validate-suite checks each new shape in a child process)."""

from __future__ import annotations

import pytest

from catalogue import services as curation
from traces import services
from traces.proposal import Parameters


@pytest.mark.slow
@pytest.mark.django_db
def test_a_v1_proposal_from_both_recordings_publishes(vllm_moe_trace, plain_trace, user):
    from evaluator.suite import load_suite

    curation.hardware_profiles_sync()
    v1 = curation.suite_version_import(suite=load_suite("atrex-bench-v1"))
    traces = []
    for name, path, hours in (("moe", vllm_moe_trace, 300.0), ("plain", plain_trace, 100.0)):
        application = services.application_upsert(name=name, card_hours=hours)
        with path.open("rb") as stream:
            traces.append(
                services.trace_upload(upload=stream, name=path.name, application=application)
            )
    proposal = services.proposal_create(
        base=v1,
        traces=traces,
        version_label="v1-trace",
        parameters=Parameters(coverage=1.0),
        actor=user,
    )
    summary = proposal.summary
    assert not summary["skipped"] and not summary["not_in_base"]
    added = {s["operator"] for s in summary["added"]}
    assert added >= {
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
        "attention_forward",
    }
    published = curation.suite_version_publish(draft=proposal.draft, actor=user)
    assert published.is_published
