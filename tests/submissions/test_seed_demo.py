"""``make demo``'s seeding: the example bundles, written for more operators than the
default suite has, are entered with the default suite's operator files only, evaluated and
published; the H200 results are imported with their provenance."""

from __future__ import annotations

import io
import json
import zipfile

import pytest
from django.core.management import call_command

from evaluator.suite import load_suite
from submissions.demo import EXAMPLE_BUNDLES_DIR, zip_folder
from submissions.models import Submission

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def test_zip_folder_keeps_only_the_suite_operators_and_the_rest():
    names = set(
        zipfile.ZipFile(
            io.BytesIO(
                zip_folder(
                    EXAMPLE_BUNDLES_DIR / "triton-baseline", operators={"rms_norm", "l2_norm"}
                )
            )
        ).namelist()
    )
    assert {"rms_norm.py", "l2_norm.py", "atrex.toml"} <= names
    assert "silu_and_mul.py" not in names and "mrope.py" not in names


def test_seed_demo_publishes_the_examples_on_the_default_board(settings):
    call_command("seed_suite")
    call_command("seed_demo")
    default_ops = set(load_suite(settings.ATREX["DEFAULT_SUITE"]).operator_slugs())
    examples = Submission.objects.filter(owner__username="atrex-examples")
    triton = examples.get(upload_name="triton-baseline.zip")
    assert triton.status == Submission.Status.PUBLISHED, triton.error_message
    assert set(triton.score.operator_scores) == default_ops
    assert triton.score.real_pass_rate == 1.0
    eager = examples.get(upload_name="pytorch-eager.zip")
    assert eager.status == Submission.Status.PUBLISHED and eager.score.fallback_rate == 1.0
    imported = examples.filter(upload_name="").values_list("title", flat=True)
    assert "PyTorch eager (the reference)" in imported
    # The idiomatic eager baselines over v1 on the H200: every shape timed, all PyTorch.
    idiomatic = examples.get(title="PyTorch eager, idiomatic (evaluator/baselines), H200")
    assert idiomatic.status == Submission.Status.PUBLISHED
    assert idiomatic.score.fallback_rate == 1.0
    assert idiomatic.score.run.shape_results.count() == 440
    # The H200 run of the Triton baseline over v1, published with its provenance.
    measured = examples.get(title="Triton baseline (14 memory-bound operators), H200")
    assert measured.status == Submission.Status.PUBLISHED
    assert measured.hardware.slug == "h200-sxm" and "2026-12-02" in measured.notes
    assert "harness 0.2.3" in measured.notes
    scored = {op for op, score in measured.score.operator_scores.items() if score > 0}
    assert {"rms_norm", "silu_and_mul", "reshape_and_cache"} <= scored
    assert len(scored) == 14 and measured.score.fallback_rate == 0.0
    # The H200 torch.compile baseline over v1 (partial): all fallback, and the Triton row
    # gets its speedup over torch.compile from the shapes both timed.
    compiled = examples.get(
        title="torch.compile (the reference, compiled), H200", suite_version__version="v1"
    )
    assert compiled.status == Submission.Status.PUBLISHED
    assert compiled.manifest == {"baseline": "torch.compile"}
    # 315 of the 440 shapes timed in three parts (fallback, as every torch.compile shape),
    # the rest missing (paged_attention_decode and unified_attention, which none reached,
    # among them).
    assert compiled.score.fallback_rate == pytest.approx(315 / 440)
    assert compiled.score.real_pass_rate == 0.0
    measured.score.refresh_from_db()
    assert measured.score.geomean_speedup_compile is not None
    assert measured.score.geomean_speedup_compile > 1.0
    # v0.1 on the H200: the v1 run's 112 shapes of v0.1's three operators (the same shapes).
    compiled_v01 = examples.get(
        title="torch.compile (the reference, compiled), H200",
        suite_version__version="v0.1",
    )
    assert compiled_v01.hardware.slug == "h200-sxm"
    assert compiled_v01.score.fallback_rate == 1.0
    assert compiled_v01.score.run.shape_results.count() == 112
    triton_v01 = examples.get(title="Triton baseline (one row per program), H200")
    triton_v01.score.refresh_from_db()
    assert triton_v01.score.geomean_speedup_compile > 1.0
    # The default (CPU) board: torch.compile measured here, at the smoke shapes the CPU
    # examples ran, and the CPU Triton row's speedup over it.
    compiled_here = examples.get(
        manifest__baseline="torch.compile",
        suite_version=triton.suite_version,
        hardware__device_kind="cpu",
    )
    assert compiled_here.status == Submission.Status.PUBLISHED
    smoke_total = sum(len(load_suite(settings.ATREX["DEFAULT_SUITE"]).shapes_for(op, "smoke"))
                      for op in default_ops)  # fmt: skip
    assert compiled_here.score.run.shape_results.count() == smoke_total
    assert compiled_here.score.fallback_rate == 1.0
    assert "make demo" in compiled_here.notes
    triton.score.refresh_from_db()
    assert triton.score.geomean_speedup_compile is not None
    before = examples.count()
    call_command("seed_demo")  # idempotent: nothing is entered twice
    assert Submission.objects.filter(owner__username="atrex-examples").count() == before


def test_a_run_of_one_suite_stands_for_another_only_where_their_shapes_are_the_same(tmp_path):
    from evaluator.suite import Suite
    from submissions.management.commands.seed_demo import same_shapes_problem

    ops = ["fused_add_rms_norm", "rms_norm", "silu_and_mul"]
    assert same_shapes_problem("atrex-bench-v1", "atrex-bench-v0.1", ops) is None
    assert "l2_norm is not in both" in same_shapes_problem(
        "atrex-bench-v1", "atrex-bench-v0.1", ["l2_norm"]
    )
    data = load_suite("atrex-bench-v0.1").to_dict()
    data.pop("content_hash")
    changed = next(s for s in data["shapes"] if s["operator"] == "rms_norm" and not s.get("smoke"))
    changed["input_kwargs"] = {**changed["input_kwargs"], "token_count": 7}
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(Suite.from_dict(data).to_dict()))
    assert same_shapes_problem(str(edited), "atrex-bench-v0.1", ["silu_and_mul"]) is None
    assert "rms_norm's shapes" in same_shapes_problem(str(edited), "atrex-bench-v0.1", ["rms_norm"])
