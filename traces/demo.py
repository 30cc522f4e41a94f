"""Demo data: the traces recorded on the H200 (results/traces/), imported as two
applications, and a draft of atrex-bench v1 proposed from them.

The applications' card-hours are illustrative (the demo has no production fleet); the
traces are real recordings by scripts/record_trace.py, whose own metadata (model, batches,
GPU, torch) travels inside each file.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from catalogue.models import SuiteVersion

from . import services
from .models import Proposal, Trace
from .proposal import Parameters

PROJECT_ROOT = Path(__file__).resolve().parents[1]
DEMO_DIR = PROJECT_ROOT / "results" / "traces"
DEMO_TRACES: list[dict[str, Any]] = [
    {
        "file": "h200-llama3-8b.json.gz",
        "application": "chat (Llama-3-8B shaped)",
        "card_hours": 1200.0,
    },
    {
        "file": "h200-qwen3-30b-a3b.json.gz",
        "application": "MoE chat (Qwen3-30B-A3B shaped)",
        "card_hours": 2000.0,
    },
]
DEMO_NOTES = (
    "Recorded on an NVIDIA H200 by scripts/record_trace.py (torch.profiler, record_shapes, "
    "random weights, a mix of prefill and decode batches); card-hours illustrative."
)


def demo_traces_load(
    *,
    directory: Path = DEMO_DIR,
    traces: Sequence[dict[str, Any]] = DEMO_TRACES,
    base_slug: str = "atrex-bench-v1",
    label: str = "v1-trace",
    parameters: Parameters | None = None,
) -> Proposal | None:
    """Import the demo traces (once: an upload with the same sha256 is reused) and propose
    ``label`` from ``base_slug``; the existing proposal of that label if there is one.

    None when a trace file or the base version is missing (nothing is imported then).
    """
    paths = [directory / item["file"] for item in traces]
    if not all(path.is_file() for path in paths):
        return None
    base = next(
        (v for v in SuiteVersion.objects.filter(status="published") if v.slug == base_slug), None
    )
    if base is None:
        return None
    existing = Proposal.objects.filter(draft__name=base.name, draft__version=label).first()
    if existing is not None:
        return existing
    imported = []
    for item, path in zip(traces, paths, strict=True):
        application = services.application_upsert(
            name=item["application"], card_hours=float(item["card_hours"])
        )
        with path.open("rb") as stream:
            sha256, _ = services.upload_digest(stream)
            done = Trace.objects.filter(sha256=sha256, status=Trace.Status.IMPORTED).first()
            imported.append(
                done
                or services.trace_upload(
                    upload=stream, name=path.name, application=application, notes=DEMO_NOTES
                )
            )
    return services.proposal_create(
        base=base, traces=imported, version_label=label, parameters=parameters or Parameters()
    )
