"""Results measured on a GPU elsewhere become a published baseline row, honestly labelled."""

from __future__ import annotations

import json

import pytest
from django.core.management import call_command

from catalogue.models import HardwareProfile
from catalogue.services import hardware_profiles_sync, suite_version_import
from evaluator.errors import UserError
from evaluator.suite import load_suite
from leaderboard.selectors import leaderboard_rows
from submissions.models import Submission
from submissions.result_import import submission_import_results
from tests.release import REPO_ROOT

pytestmark = pytest.mark.django_db

EAGER_REPORT = REPO_ROOT / "results" / "2026-11-29-h200" / "reference-baseline-v1-h200.json"


@pytest.fixture
def v1(db):
    hardware_profiles_sync()
    return suite_version_import(suite=load_suite("atrex-bench-v1"))


def test_the_h200_eager_baseline_is_published_as_all_fallback_with_score_zero(v1, user):
    h200 = HardwareProfile.objects.get(slug="h200-sxm")
    submission = submission_import_results(
        owner=user,
        report=json.loads(EAGER_REPORT.read_text()),
        suite_version=v1,
        hardware=h200,
        title="PyTorch eager",
        provenance_note="H200, 2026-11-29",
    )
    assert submission.status == Submission.Status.PUBLISHED
    run = submission.runs.get()
    assert run.shape_results.count() == 440
    assert set(run.shape_results.values_list("status", flat=True)) == {"fallback"}
    assert run.environment["device_name"] == "NVIDIA H200"
    score = submission.score
    assert score.aggregate == 0 and score.fallback_rate == 1 and score.real_pass_rate == 0
    assert list(leaderboard_rows(suite=v1, hardware=h200)) == [score]
    history = list(submission.history.values_list("to_status", "note"))
    assert history[1] == ("scoring", "imported results: H200, 2026-11-29")


def test_a_baseline_that_did_not_reach_every_operator_counts_the_rest_as_missing(v1, user):
    report = json.loads(EAGER_REPORT.read_text())
    kept = report["operators"][:2]
    kept[1]["shapes"][0]["status"] = "not_run"  # a deadline stopped it there
    report["operators"] = kept
    submission = submission_import_results(
        owner=user,
        report=report,
        suite_version=v1,
        hardware=HardwareProfile.objects.get(slug="h200-sxm"),
        title="PyTorch eager, cut short",
        provenance_note="H200, 2026-11-29, two operators",
    )
    assert submission.status == Submission.Status.PUBLISHED
    run = submission.runs.get()
    timed = sum(len(op["shapes"]) for op in kept) - 1
    assert run.shape_results.count() == 440  # the whole suite, not the two operators
    assert run.shape_results.filter(status="fallback").count() == timed
    assert run.shape_results.filter(status="missing").count() == 440 - timed
    assert submission.score.fallback_rate == pytest.approx(timed / 440)


def test_results_of_another_suite_are_refused(catalogue, user):
    report = json.loads(EAGER_REPORT.read_text())  # v1 shapes, not in v0.1
    with pytest.raises(UserError, match="not in atrex-bench-v0.1"):
        submission_import_results(
            owner=user,
            report=report,
            suite_version=catalogue,
            hardware=HardwareProfile.objects.get(slug="h200-sxm"),
            title="wrong suite",
            provenance_note="",
        )
    assert not Submission.objects.exists()


def test_the_command_refuses_a_file_that_is_not_results(v1, tmp_path):
    bogus = tmp_path / "x.json"
    bogus.write_text('{"hello": 1}')
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="Not an evaluator results file"):
        call_command(
            "import_results", str(bogus), suite="atrex-bench-v1", hardware="h200-sxm", title="x"
        )


TRITON_V01 = REPO_ROOT / "results" / "2026-11-29-h200" / "triton-baseline-v0.1-h200.json"


def _compile_report_at(factor: float, *, idiomatic: bool = False) -> dict:
    """A torch.compile baseline report (or, ``idiomatic``, an eager baseline report of
    ``bench/reference_baseline.py --mode baseline``) whose every shape took ``factor`` times
    the Triton baseline's measured time (so the speedup over it is exactly ``factor``)."""
    triton = json.loads(TRITON_V01.read_text())
    return {
        "what": (
            "Eager baseline of every operator (evaluator/baselines), timed by the evaluator's timer"
            if idiomatic
            else "torch.compile of the PyTorch reference of every operator, timed by the "
            "evaluator's timer"
        ),
        "mode": "baseline" if idiomatic else "compile",
        "suite": triton["suite"],
        "environment": triton["environment"],
        "operators": [
            {
                "operator": op["operator"],
                "shapes": [
                    {
                        "shape_id": shape["shape_id"],
                        "weight": shape["weight"],
                        "status": "pass",
                        "time_ms": shape["time_ms"] * factor,
                        "t_sol_ms": shape["t_sol_ms"],
                        "roofline_fraction": shape["roofline_fraction"] / factor,
                    }
                    for shape in op["shapes"]
                ],
            }
            for op in triton["operators"]
        ],
    }


@pytest.mark.parametrize("compile_first", [True, False])
def test_speedup_over_torch_compile_joins_the_compile_baseline(catalogue, user, compile_first):
    h200 = HardwareProfile.objects.get(slug="h200-sxm")

    def load(report, title):
        return submission_import_results(
            owner=user, report=report, suite_version=catalogue, hardware=h200,
            title=title, provenance_note="test",
        )  # fmt: skip

    imports = [
        (lambda: load(_compile_report_at(2.5), "torch.compile")),
        (lambda: load(json.loads(TRITON_V01.read_text()), "triton")),
    ]
    if not compile_first:
        imports.reverse()
    for run_import in imports:
        run_import()
    compiled = Submission.objects.get(title="torch.compile")
    triton = Submission.objects.get(title="triton")
    assert compiled.manifest == {"baseline": "torch.compile"}
    assert compiled.score.aggregate == 0 and compiled.score.fallback_rate == 1
    assert compiled.score.geomean_speedup_compile is None  # no passing shape of its own
    assert triton.score.geomean_speedup_compile == pytest.approx(2.5, rel=1e-9)
    assert triton.score.geomean_speedup_eager == pytest.approx(
        triton.runs.get().results["scores"]["geomean_speedup_eager"]
    )


@pytest.mark.parametrize("harness", ["0.2.3", "0.3.4"])
def test_older_results_divide_their_speedups_by_the_boards_idiomatic_baseline(
    catalogue, user, harness
):
    """Results of a harness before 0.3.4 divided by the reference's eager time: imported
    onto a board with an idiomatic eager baseline row, they divide by that row (decisions
    17); results of 0.3.4 on, which timed the baseline themselves, are kept as they are."""
    h200 = HardwareProfile.objects.get(slug="h200-sxm")
    baseline = submission_import_results(
        owner=user, report=_compile_report_at(3.0, idiomatic=True), suite_version=catalogue,
        hardware=h200, title="eager, idiomatic", provenance_note="test",
    )  # fmt: skip
    assert baseline.manifest == {"baseline": "idiomatic"}
    report = json.loads(TRITON_V01.read_text())
    report["harness_version"] = harness
    triton = submission_import_results(
        owner=user, report=report, suite_version=catalogue, hardware=h200,
        title="triton", provenance_note="test.",
    )  # fmt: skip
    measured = report["scores"]["geomean_speedup_eager"]
    assert measured is not None and abs(measured - 3.0) > 0.1
    rows = triton.runs.get().shape_results.filter(status="pass", time_ms__gt=0)
    assert rows.exists()
    if harness == "0.2.3":
        assert triton.score.geomean_speedup_eager == pytest.approx(3.0, rel=1e-9)
        for row in rows:
            assert row.reference_time_ms == pytest.approx(3.0 * row.time_ms, rel=1e-9)
        assert "idiomatic eager baseline row" in triton.notes
    else:
        assert triton.score.geomean_speedup_eager == pytest.approx(measured, rel=1e-9)
        assert "idiomatic" not in triton.notes


def test_a_baseline_measured_on_the_smoke_shapes_is_padded_with_smoke_shapes_only(catalogue, user):
    """A CPU board's torch.compile row (measured at ``make demo`` on the smoke shapes): an
    operator it did not reach is missing at its smoke shapes, and the suite's scored shapes,
    which no CPU evaluation runs, are not entered."""
    suite = load_suite("atrex-bench-v0.1")
    operators = list(suite.operator_slugs())
    smoke = {op: suite.shapes_for(op, "smoke") for op in operators}
    report = {
        "what": "torch.compile of the PyTorch reference of every operator, timed by the "
        "evaluator's timer",
        "mode": "compile",
        "suite": {"slug": suite.slug, "hash": suite.content_hash, "shape_set": "smoke"},
        "environment": {"device": "cpu", "harness_version": "0.2.3"},
        "operators": [
            {
                "operator": op,
                "shapes": [
                    {
                        "shape_id": s.shape_id,
                        "weight": s.weight,
                        "status": "pass",
                        "time_ms": 0.1,
                        "t_sol_ms": 0.001,
                        "roofline_fraction": 0.01,
                    }
                    for s in smoke[op]
                ],
            }  # fmt: skip
            for op in operators[1:]  # the first operator not reached
        ],
    }
    submission = submission_import_results(
        owner=user,
        report=report,
        suite_version=catalogue,
        hardware=HardwareProfile.objects.get(slug="cpu-dev"),
        title="torch.compile, CPU",
        provenance_note="this machine",
    )
    run = submission.runs.get()
    total = sum(len(shapes) for shapes in smoke.values())
    assert run.shape_results.count() == total
    missing = run.shape_results.filter(status="missing")
    assert set(missing.values_list("operator", flat=True)) == {operators[0]}
    assert missing.count() == len(smoke[operators[0]])
    assert run.shape_results.filter(status="fallback").count() == total - missing.count()


ROUND_MEASUREMENT = {"kind": "round", "trials": 2, "min_reps": 5, "target_rel_se": 0.01}


def test_results_measured_with_an_agent_rounds_policy_are_refused(catalogue, user):
    """A round's figures (fewer trials, a lighter timing rule) are an agent's feedback: the
    board refuses to import them, and creates nothing."""
    from tests.leaderboard.results_factory import smoke_results

    report = smoke_results(catalogue)
    report["environment"]["measurement"] = ROUND_MEASUREMENT
    with pytest.raises(UserError) as refused:
        submission_import_results(
            owner=user,
            report=report,
            suite_version=catalogue,
            hardware=HardwareProfile.objects.get(slug="cpu-dev"),
            title="a round",
            provenance_note="an agent campaign's round",
        )
    assert refused.value.code == "import:round-measurement"
    assert not Submission.objects.exists()
    report["environment"]["measurement"] = {**ROUND_MEASUREMENT, "kind": "full"}
    submission = submission_import_results(
        owner=user,
        report=report,
        suite_version=catalogue,
        hardware=HardwareProfile.objects.get(slug="cpu-dev"),
        title="a full evaluation",
        provenance_note="the same figures, measured in full",
    )
    assert submission.status == Submission.Status.PUBLISHED


def test_a_run_whose_results_are_a_rounds_is_never_published(catalogue, user):
    """Whatever brings them to scoring (a worker's run, merged shards), round figures fail
    the run and its submission; no score, nothing on the board."""
    from django.utils import timezone

    from leaderboard.selectors import leaderboard_rows
    from submissions import services
    from submissions.models import EvaluationRun
    from tests.leaderboard.results_factory import smoke_results

    cpu = HardwareProfile.objects.get(slug="cpu-dev")
    submission = Submission.objects.create(
        owner=user, title="rounds", suite_version=catalogue, hardware=cpu, upload_name=""
    )
    Submission.objects.filter(pk=submission.pk).update(status=Submission.Status.SCORING)
    run = EvaluationRun.objects.create(
        submission=submission,
        status=EvaluationRun.Status.RUNNING,
        queue=cpu.queue,
        started_at=timezone.now(),
    )
    results = smoke_results(catalogue)
    results["environment"]["shards"] = [
        {"index": 0, "environment": {"measurement": {**ROUND_MEASUREMENT, "kind": "full"}}},
        {"index": 1, "environment": {"measurement": ROUND_MEASUREMENT}},
    ]
    services.evaluation_run_score_and_publish(run=run, results=results)
    run.refresh_from_db()
    submission.refresh_from_db()
    assert run.status == EvaluationRun.Status.FAILED
    assert run.error_code == submission.error_code == "platform:round-measurement"
    assert submission.status == Submission.Status.FAILED
    assert not run.shape_results.exists()
    assert list(leaderboard_rows(suite=catalogue, hardware=cpu)) == []
