"""A whole agent campaign without the site: the example agent on loopback, the portal's
protocol client and measure-revise loop, and the evaluator on this machine's device.

    python -m examples.agents.tile_search.campaign --device cuda \\
        --operators rms_norm,silu_and_mul,fused_add_rms_norm --rounds 5 \\
        --time-budget-s 0.1 --final --out campaign.json

Needs only torch and triton (no Django): it is what a GPU node runs to show the loop
converge. Each round prints, per operator, the weighted roofline fraction on the public
shapes (0 for a shape that did not pass) and the tile configuration the agent tried;
``--out`` is rewritten after every round, so an interrupted run keeps what it measured.
With ``--final`` the kept kernels are then evaluated as a bundle on the whole suite
(hidden shapes included), as the portal does.
"""

from __future__ import annotations

import argparse
import json
import secrets
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from agents import loop
from agents.protocol import AgentClient, Limits
from agents.ssrf import parse_networks
from evaluator.hardware import get_profile
from evaluator.suite import SUITES_DIR
from submissions.evaluation import EvaluatorJob, run_evaluator

from .server import make_server

DEFAULT_HARDWARE = {"cpu": "cpu-dev", "cuda": "h200-sxm"}
DEFAULT_SHAPE_SET = {"cpu": "smoke", "cuda": "full"}


def _suite_definition(name_or_path: str) -> dict[str, Any]:
    path = Path(name_or_path)
    if not path.is_file():
        path = SUITES_DIR / f"{name_or_path}.json"
    return json.loads(path.read_text(encoding="utf-8"))


def _round_summary(record: loop.RoundRecord) -> dict[str, Any]:
    return {
        "operator": record.operator,
        "round": record.number,
        "status": record.status,
        "score": record.score,
        "all_pass": record.all_pass,
        "agent_s": round(record.agent_s, 3),
        "eval_s": round(record.eval_s, 3),
        "notes": record.notes,
        "error": f"[{record.error_code}] {record.error_message}" if record.error_code else None,
        "shapes": [
            {key: shape.get(key) for key in ("shape_id", "status", "time_ms", "roofline_fraction")}
            for shape in record.feedback.get("shapes") or []
        ],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m examples.agents.tile_search.campaign")
    parser.add_argument("--device", default="cuda", choices=("cpu", "cuda"))
    parser.add_argument("--suite", default="atrex-bench-v0.1")
    parser.add_argument("--hardware", default=None)
    parser.add_argument("--shapes", default=None, choices=("smoke", "full"))
    parser.add_argument("--operators", default="rms_norm,silu_and_mul,fused_add_rms_norm")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--patience", type=int, default=2)
    parser.add_argument("--time-budget-s", type=float, default=None)
    parser.add_argument("--seconds-per-call", type=float, default=60.0)
    parser.add_argument("--timeout-s", type=float, default=1800.0, help="per evaluation")
    parser.add_argument("--final", action="store_true", help="evaluate the kept kernels")
    parser.add_argument(
        "--cold",
        action="store_true",
        help="a python -m evaluator run per round instead of the campaign's evaluator server",
    )
    parser.add_argument("--work-dir", default=None)
    parser.add_argument("--out", default="campaign.json")
    args = parser.parse_args(argv)

    hardware = args.hardware or DEFAULT_HARDWARE[args.device]
    shape_set = args.shapes or DEFAULT_SHAPE_SET[args.device]
    operators = [slug.strip() for slug in args.operators.split(",") if slug.strip()]
    definition = _suite_definition(args.suite)
    secret = secrets.token_urlsafe(32)
    server = make_server(
        host="127.0.0.1", port=0, secret=secret.encode(), prefix="/agent", patience=args.patience
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/agent"
    client = AgentClient(
        base_url=url,
        secret=secret.encode(),
        limits=Limits(seconds_per_call=args.seconds_per_call, max_response_bytes=1 << 20),
        allowed_networks=parse_networks(["127.0.0.1/32"]),
    )
    profile = get_profile(hardware).to_dict()
    spec = loop.CampaignSpec(
        key=str(uuid.uuid4()),
        operators=operators,
        rounds=args.rounds,
        dsl="triton",
        hardware={
            key: profile.get(key) for key in ("slug", "name", "peak_flops", "hbm_bytes_per_s")
        },
        suite_definition=definition,
        shape_set=shape_set,
        seconds_per_call=args.seconds_per_call,
        max_response_bytes=1 << 20,
    )
    work = Path(args.work_dir or tempfile.mkdtemp(prefix="atrex-campaign-"))
    extra = ["--time-budget-s", str(args.time_budget_s)] if args.time_budget_s else []
    evaluate = loop.evaluator_for(
        suite_definition=definition,
        hardware_slug=hardware,
        device=args.device,
        shape_set=shape_set,
        work_root=work / "rounds",
        timeout_s=args.timeout_s,
        extra_args=extra,
        sandbox_args=[],
        warm=not args.cold,
    )
    out = Path(args.out)
    report: dict[str, Any] = {
        "schema": "atrex-agent-campaign/1",
        "agent": "tile-search (examples/agents/tile_search)",
        "device": args.device,
        "hardware": hardware,
        "suite": f"{definition['name']}-{definition['version']}",
        "shape_set": shape_set,
        "visibility": "public",
        "rounds_per_operator": args.rounds,
        "time_budget_s": args.time_budget_s,
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "rounds": [],
        "kept": {},
        "final": None,
    }

    def save() -> None:
        out.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")

    def on_round(record: loop.RoundRecord) -> None:
        report["rounds"].append(_round_summary(record))
        save()
        status = "all public shapes pass" if record.all_pass else "not all pass"
        if record.status != "evaluated":
            status = f"agent error [{record.error_code}] {record.error_message}"
        config = record.notes.split(". ", 1)[0]
        print(
            f"{record.operator:<20} {config:<70} fraction {record.score or 0.0:.4f} "
            f"({status}; agent {record.agent_s:.1f} s, measure {record.eval_s:.1f} s)",
            flush=True,
        )

    started = time.monotonic()
    kept_sources: dict[str, str] = {}
    with evaluate:  # its evaluator server stops with the rounds
        for operator in operators:
            records = loop.run_operator(
                spec, operator=operator, client=client, evaluate=evaluate, on_round=on_round
            )
            best = loop.best_round(records)
            if best is not None:
                kept_sources[operator] = best.source
                report["kept"][operator] = {"round": best.number, "score": best.score}
                first = next((r for r in records if r.status == "evaluated"), None)
                print(
                    f"{operator}: kept round {best.number} ({best.score:.4f}); round 1 gave "
                    f"{(first.score or 0.0) if first else 0.0:.4f}",
                    flush=True,
                )
            else:
                print(f"{operator}: no round passed every public shape", flush=True)
            save()
    report["campaign_wall_s"] = round(time.monotonic() - started, 1)
    if args.final and kept_sources:
        bundle = work / "kept.zip"
        bundle.write_bytes(
            loop.bundle_zip(kept_sources, {"title": "tile-search campaign", "dsl": "triton"})
        )
        outcome = run_evaluator(
            EvaluatorJob(
                bundle_path=bundle,
                suite_definition=definition,
                hardware_slug=hardware,
                device=args.device,
                work_dir=work / "final",
                timeout_s=args.timeout_s,
                sandbox_args=[],
                extra_args=["--operators", ",".join(kept_sources), "--shapes", shape_set, *extra],
            )
        )
        results = outcome.results or {}
        report["final"] = {
            "scores": results.get("scores"),
            "operators": {op["operator"]: op.get("score") for op in results.get("operators", [])},
            "environment": results.get("environment"),
            "error": results.get("error"),
        }
        print(f"final (all shapes of the set, hidden included): {report['final']['operators']}")
    save()
    server.shutdown()
    print(f"wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
