"""A campaign's rounds run without the compute-sanitizer pass, warm or cold; the full
evaluation of the kept kernels (a submission's run, sharded or not) keeps it."""

from __future__ import annotations

import json
from pathlib import Path

from agents import loop
from evaluator import sanitizer
from evaluator.cli import build_parser
from evaluator.suite import SUITES_DIR
from submissions import evaluation, shards

SUITE = json.loads((SUITES_DIR / "atrex-bench-v0.1.json").read_text())


def sanitizer_tools(subcommand: str, arguments: list[str]) -> tuple[str, ...]:
    """The tools a run with these arguments on CUDA calls (the runner's default when none
    are named)."""
    head = [subcommand, "bundle"] if subcommand == "run" else [subcommand]
    args = build_parser().parse_args([*head, *arguments])
    return sanitizer.parse_tools(args.sanitizer_tools)


def campaign(tmp_path: Path, *, warm: bool) -> loop.CampaignEvaluator:
    return loop.evaluator_for(
        suite_definition=SUITE,
        hardware_slug="h200-sxm",
        device="cuda",
        shape_set="full",
        work_root=tmp_path,
        timeout_s=60,
        extra_args=["--time-budget-s", "0.5"],
        sandbox_args=[],
        warm=warm,
    )


def test_a_warm_campaigns_server_runs_its_rounds_without_the_sanitizer(tmp_path, monkeypatch):
    started: list[list[str]] = []

    class Server:
        alive = True

        def __init__(self, subcommand: str, arguments: list[str], **_: object) -> None:
            started.append([subcommand, *arguments])

        def request(self, message: dict, **_: object) -> dict:
            Path(message["out"]).write_text("{}")
            return {"exit": 0}

        def close(self, **_: object) -> None:
            self.alive = False

    monkeypatch.setattr(evaluation, "EvaluatorServer", Server)
    with campaign(tmp_path, warm=True) as evaluate:
        evaluate("rms_norm", "source", 1)
    [(subcommand, *arguments)] = started
    assert subcommand == "serve"
    assert sanitizer_tools("serve", arguments) == ()


def test_a_cold_round_runs_without_the_sanitizer(tmp_path, monkeypatch):
    started: list[list[str]] = []

    def run_command(subcommand: str, arguments: list[str], **_: object) -> object:
        started.append([subcommand, *arguments])
        out = arguments[arguments.index("--out") + 1]
        Path(out).write_text("{}")
        return type("Finished", (), {"returncode": 0})()

    monkeypatch.setattr(evaluation, "run_evaluator_command", run_command)
    campaign(tmp_path, warm=False)("rms_norm", "source", 1)
    [(subcommand, _bundle, *arguments)] = started
    assert subcommand == "run"
    assert sanitizer_tools("run", arguments) == ()


def test_the_kept_kernels_full_evaluation_keeps_the_sanitizer_on_cuda(settings):
    settings.ATREX = {**settings.ATREX, "TIME_BUDGET_S": 1.0}
    tools = sanitizer_tools("run", [*shards._evaluator_options(), "--device", "cuda"])
    assert tools == sanitizer.DEFAULT_TOOLS
    assert tools  # memcheck at least: the verdict check of a submission
