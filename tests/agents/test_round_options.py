"""A campaign's rounds run without the compute-sanitizer pass and with the round measurement
policy, warm or cold, timing the eager baseline into a folder of the campaign's own; the
full evaluation of the kept kernels (a submission's run, sharded or not) keeps the
sanitizer and the full policy. The feedback names the policy."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agents import loop
from evaluator import sanitizer
from evaluator.cli import build_parser, measurement_policy, timings_settings
from evaluator.suite import SUITES_DIR
from submissions import evaluation, shards

SUITE = json.loads((SUITES_DIR / "atrex-bench-v0.1.json").read_text())


def parsed(subcommand: str, arguments: list[str]):
    head = [subcommand, "bundle"] if subcommand == "run" else [subcommand]
    return build_parser().parse_args([*head, *arguments])


def sanitizer_tools(subcommand: str, arguments: list[str]) -> tuple[str, ...]:
    """The tools a run with these arguments on CUDA calls (the runner's default when none
    are named)."""
    return sanitizer.parse_tools(parsed(subcommand, arguments).sanitizer_tools)


def fake_evaluator(monkeypatch) -> list[list[str]]:
    """The campaign's evaluator, warm (``serve``) and cold (``run``), replaced by fakes that
    write empty results; each start is recorded as [subcommand, *arguments], the bundle of
    a ``run`` left out."""
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

    def run_command(subcommand: str, arguments: list[str], **_: object) -> object:
        started.append([subcommand, *arguments[1:]])
        Path(arguments[arguments.index("--out") + 1]).write_text("{}")
        return type("Finished", (), {"returncode": 0})()

    monkeypatch.setattr(evaluation, "EvaluatorServer", Server)
    monkeypatch.setattr(evaluation, "run_evaluator_command", run_command)
    return started


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
    started = fake_evaluator(monkeypatch)
    with campaign(tmp_path, warm=True) as evaluate:
        evaluate("rms_norm", "source", 1)
    [(subcommand, *arguments)] = started
    assert subcommand == "serve"
    assert sanitizer_tools("serve", arguments) == ()


def test_a_cold_round_runs_without_the_sanitizer(tmp_path, monkeypatch):
    started = fake_evaluator(monkeypatch)
    campaign(tmp_path, warm=False)("rms_norm", "source", 1)
    [(subcommand, *arguments)] = started
    assert subcommand == "run"
    assert sanitizer_tools("run", arguments) == ()


def test_the_kept_kernels_full_evaluation_keeps_the_sanitizer_on_cuda(settings):
    settings.ATREX = {**settings.ATREX, "TIME_BUDGET_S": 1.0}
    tools = sanitizer_tools("run", [*shards._evaluator_options(), "--device", "cuda"])
    assert tools == sanitizer.DEFAULT_TOOLS
    assert tools  # memcheck at least: the verdict check of a submission


def test_rounds_measure_with_the_round_policy_and_the_kept_kernels_with_the_full_one(settings):
    round_args = parsed("serve", list(loop.ROUND_OPTIONS))
    policy = measurement_policy(round_args)
    assert policy.kind == "round"
    assert (policy.trials, policy.min_reps, policy.target_rel_se) == (2, 5, 0.01)
    settings.ATREX = {**settings.ATREX, "TIME_BUDGET_S": 1.0}
    full = parsed("run", [*shards._evaluator_options(), "--device", "cuda"])
    assert measurement_policy(full).kind == "full"


@pytest.mark.parametrize("warm", [True, False])
def test_a_campaigns_rounds_share_one_reference_timings_folder_of_its_own(
    tmp_path, monkeypatch, warm
):
    """Warm or cold, every round of a campaign names the same eager-timings folder under
    the campaign's working folder, never timed again at random, and the round policy."""
    started = fake_evaluator(monkeypatch)
    with campaign(tmp_path / "one", warm=warm) as evaluate:
        evaluate("rms_norm", "source", 1)
        evaluate("rms_norm", "source", 2)
    campaign(tmp_path / "two", warm=False)("rms_norm", "source", 1)
    folders = []
    for subcommand, *arguments in started:
        args = parsed(subcommand, arguments)
        assert timings_settings(args).refresh_probability == 0.0
        assert measurement_policy(args).kind == "round"
        folders.append(Path(args.reference_timings))
    *ours, other = folders
    assert set(ours) == {(tmp_path / "one").resolve() / "reference-timings"}
    assert other == (tmp_path / "two").resolve() / "reference-timings"


def test_the_feedback_names_the_rounds_measurement_policy():
    results = {
        "environment": {
            "measurement": {"kind": "round", "trials": 2, "min_reps": 5, "target_rel_se": 0.01}
        },
        "operators": [{"operator": "rms_norm", "status": "ok", "score": 0.5, "shapes": []}],
    }
    feedback = loop.feedback_from_results(results, "rms_norm")
    assert feedback["measurement"] == {
        "kind": "round",
        "trials": 2,
        "min_reps": 5,
        "target_rel_se": 0.01,
        "note": loop.ROUND_MEASUREMENT_NOTE,
    }
    full = {**results, "environment": {"measurement": {"kind": "full", "trials": None}}}
    assert loop.feedback_from_results(full, "rms_norm")["measurement"]["note"] == ""
