"""Demo data: the H200 traces under results/ imported as applications, and a draft suite
version proposed from them (called by ``seed_demo``; see ``demo_traces_load``)."""

from __future__ import annotations

import json
from pathlib import Path

from leaderboard.models import SuiteVersion

from . import services
from .models import Proposal, Trace
from .proposal import Parameters

PROJECT_ROOT = Path(__file__).resolve().parents[1]
DEMO_MANIFEST = PROJECT_ROOT / "results" / "traces" / "manifest.json"


def demo_traces_load(
    *, manifest: Path = DEMO_MANIFEST, base_slug: str = "atrex-bench-v1", label: str = "v1-trace"
) -> Proposal | None:
    """Import the traces a manifest lists ({"traces": [{"file", "application",
    "card_hours", "notes"}]}, files beside it) and propose ``label`` from ``base_slug``.

    Idempotent: a trace already imported (same sha256) is not imported again, an existing
    proposal of that label is returned. None when the manifest or the base is missing.
    """
    if not manifest.is_file():
        return None
    base = next(
        (v for v in SuiteVersion.objects.filter(status="published") if v.slug == base_slug), None
    )
    if base is None:
        return None
    existing = Proposal.objects.filter(draft__name=base.name, draft__version=label).first()
    if existing is not None:
        return existing
    data = json.loads(manifest.read_text(encoding="utf-8"))
    traces = []
    for item in data["traces"]:
        application = services.application_upsert(
            name=item["application"], card_hours=float(item["card_hours"])
        )
        path = manifest.parent / item["file"]
        with path.open("rb") as stream:
            sha = services.upload_digest(stream)[0]
            done = Trace.objects.filter(sha256=sha, status=Trace.Status.IMPORTED).first()
            traces.append(
                done
                or services.trace_upload(
                    upload=stream,
                    name=path.name,
                    application=application,
                    notes=item.get("notes", ""),
                )
            )
    return services.proposal_create(
        base=base,
        traces=traces,
        version_label=label,
        parameters=Parameters(**data.get("parameters", {})),
    )
