"""On a GPU (marker ``gpu``): a trace recorded with CUDA activity is charged by kernel time
to the engine ops that launched the kernels. Needs only torch and pytest:

    python3 -m pytest -m gpu tests/traces/test_gpu_recording.py -p no:django \
        --confcutdir=tests/traces

(the file, not the folder: the folder's other modules import Django models).
"""

from __future__ import annotations

import pytest
import torch

from tests.traces.conftest import record
from traces.parsing import parse_trace

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]


def test_a_cuda_recording_is_weighted_by_the_kernels_of_each_engine_op(tmp_path):
    path = record(
        tmp_path / "moe-cuda.json.gz", model="qwen3-30b-a3b", engine="vllm", device="cuda"
    )
    parsed = parse_trace(path.open("rb"), name=path.name)
    assert parsed.time_basis == "gpu-kernels"
    assert parsed.metadata["device_activities"] > 0
    assert parsed.metadata["recording"]["device"] == "cuda"
    operators = {row.operator for row in parsed.rows}
    assert {
        "rms_norm",
        "fused_add_rms_norm",
        "fused_moe",
        "moe_sum_reduce",
        "unified_attention",
        "paged_attention_decode",
    } <= operators
    # The projections (aten::linear, cuBLAS) are real GPU time that no rule maps.
    linear = [u for u in parsed.unmapped if u.name == "aten::linear"]
    assert linear and linear[0].time_us > 0
    assert 0 < parsed.mapped_time_us < parsed.total_time_us
