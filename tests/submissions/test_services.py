"""The submission state machine and bundle validation, against the real database."""

from __future__ import annotations

import io
import zipfile

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from leaderboard.selectors import leaderboard_rows
from submissions import services, shards
from submissions.models import EvaluationRun, Submission

pytestmark = pytest.mark.django_db

Status = Submission.Status


def _zip(files: dict[str, str], name: str = "bundle.zip") -> SimpleUploadedFile:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for path, text in files.items():
            archive.writestr(path, text)
    return SimpleUploadedFile(name, buffer.getvalue(), "application/zip")


GOOD_MODULE = (
    "import torch\n"
    "class Model(torch.nn.Module):\n"
    "    def forward(self, x, weight):\n"
    "        return x\n"
)


def test_valid_bundle_is_queued_with_its_manifest_and_a_run(catalogue, user):
    submission = services.submission_create(
        owner=user,
        upload=_zip({"rms_norm.py": GOOD_MODULE, "atrex.toml": 'title = "Mine"\ndsl = "triton"\n'}),
    )
    assert submission.status == Status.QUEUED
    assert submission.manifest["operators"] == {"rms_norm": "rms_norm.py"}
    assert submission.title == "Mine" and submission.dsl == "triton"
    run = submission.runs.get()
    assert run.status == EvaluationRun.Status.QUEUED and run.queue == "eval.cpu-dev"
    assert [h.to_status for h in submission.history.all()] == ["received", "validating", "queued"]


BAD_UPLOADS = [
    ("empty", SimpleUploadedFile("empty.zip", b""), "bundle:empty", "empty"),
    (
        "not an archive",
        SimpleUploadedFile("kernels.zip", b"\x89PNG\r\n\x1a\n not a zip at all"),
        "bundle:not-an-archive",
        "zip",
    ),
    (
        "no operators",
        _zip({"README.md": "hello", "helpers.py": "x = 1\n"}),
        "bundle:no-operators",
        "rms_norm",
    ),
    (
        "syntax error",
        _zip({"rms_norm.py": "class Model(:\n"}),
        "bundle:syntax-error",
        "rms_norm.py",
    ),
    (
        "no Model",
        _zip({"rms_norm.py": "class Kernel:\n    pass\n"}),
        "bundle:missing-model",
        "class Model",
    ),
    (
        "unknown operator",
        _zip({"flash_decoding.py": GOOD_MODULE, "helpers.py": "x = 1\n"}),
        "bundle:unknown-operator",
        "flash_decoding",
    ),
]


@pytest.mark.parametrize(
    ("label", "upload", "code", "hint"), BAD_UPLOADS, ids=[b[0] for b in BAD_UPLOADS]
)
def test_bad_upload_is_rejected_with_a_clear_reason_and_kept(
    catalogue, user, label, upload, code, hint
):
    upload.seek(0)
    submission = services.submission_create(owner=user, upload=upload)
    submission.refresh_from_db()
    assert submission.status == Status.REJECTED
    assert submission.error_code == code
    assert hint in submission.error_message
    assert not submission.runs.exists()
    # Nothing lost: the row, the original name and (when there were bytes) the file itself.
    assert submission.upload_name == upload.name
    if upload.size:
        with submission.upload.open("rb") as handle:
            upload.seek(0)
            assert handle.read() == upload.read()
    assert [h.to_status for h in submission.history.all()] == ["received", "validating", "rejected"]


def test_oversized_upload_is_rejected_without_storing_it(catalogue, user, settings):
    settings.ATREX = {**settings.ATREX, "MAX_UPLOAD_BYTES": 100}
    submission = services.submission_create(
        owner=user, upload=_zip({"rms_norm.py": GOOD_MODULE * 10})
    )
    assert submission.status == Status.REJECTED
    assert submission.error_code == "bundle:too-large"
    assert "limit is 100 bytes" in submission.error_message


def test_transition_is_compare_and_set(catalogue, user):
    submission = services.submission_create(owner=user, upload=_zip({"rms_norm.py": GOOD_MODULE}))
    stale = Submission.objects.get(pk=submission.pk)
    assert services.submission_transition(
        submission=submission, from_status=Status.QUEUED, to_status=Status.RUNNING
    )
    # A second worker holding the old status loses the race and changes nothing.
    assert not services.submission_transition(
        submission=stale, from_status=Status.QUEUED, to_status=Status.RUNNING
    )
    assert submission.history.filter(to_status=Status.RUNNING).count() == 1


def test_illegal_transition_raises(catalogue, user):
    submission = services.submission_create(owner=user, upload=_zip({"rms_norm.py": GOOD_MODULE}))
    with pytest.raises(services.IllegalTransition):
        services.submission_transition(
            submission=submission, from_status=Status.QUEUED, to_status=Status.PUBLISHED
        )


@pytest.mark.slow
def test_triton_bundle_is_evaluated_scored_and_published(catalogue, user, example_zip):
    submission = services.submission_create(
        owner=user, upload=example_zip("triton-baseline", only=["rms_norm.py", "atrex.toml"])
    )
    run = shards.run_execute(run_id=submission.runs.get().pk)
    submission.refresh_from_db()
    assert submission.status == Status.PUBLISHED, submission.error_message
    run.refresh_from_db()
    assert run.status == EvaluationRun.Status.SUCCEEDED
    assert run.shapes_total == run.shapes_done == 9
    rms = run.shape_results.filter(operator="rms_norm")
    assert rms.count() == 3 and all(s.status == "pass" for s in rms)
    assert all(s.roofline_fraction > 0 and s.own_kernel_share >= 0.8 for s in rms)
    assert set(run.shape_results.exclude(operator="rms_norm").values_list("status", flat=True)) == {
        "missing"
    }
    score = submission.score
    assert 0 < score.aggregate < 1
    assert score.operator_scores["rms_norm"] > 0 and score.operator_scores["silu_and_mul"] == 0
    assert list(leaderboard_rows(suite=submission.suite_version, hardware=submission.hardware)) == [
        score
    ]
    # Idempotent: a redelivered message for the same run (or its shard) changes nothing.
    shards.run_execute(run_id=run.pk)
    shards.shard_execute(shard_id=run.shards.get().pk)
    assert submission.history.filter(to_status=Status.PUBLISHED).count() == 1


@pytest.mark.slow
def test_pure_pytorch_bundle_is_flagged_as_fallback_and_scores_zero(catalogue, user, example_zip):
    submission = services.submission_create(
        owner=user, upload=example_zip("pytorch-eager", only=["silu_and_mul.py"])
    )
    shards.run_execute(run_id=submission.runs.get().pk)
    submission.refresh_from_db()
    assert submission.status == Status.PUBLISHED, submission.error_message
    statuses = set(
        submission.runs.get()
        .shape_results.filter(operator="silu_and_mul")
        .values_list("status", flat=True)
    )
    assert statuses == {"fallback"}
    assert submission.score.aggregate == 0
    assert submission.score.fallback_rate > 0 and submission.score.real_pass_rate == 0


@pytest.mark.slow
def test_private_submission_never_reaches_the_public_board(catalogue, user, example_zip):
    submission = services.submission_create(
        owner=user,
        upload=example_zip("triton-baseline", only=["silu_and_mul.py"]),
        visibility=Submission.Visibility.PRIVATE,
    )
    shards.run_execute(run_id=submission.runs.get().pk)
    submission.refresh_from_db()
    assert submission.status == Status.PUBLISHED
    assert not leaderboard_rows(
        suite=submission.suite_version, hardware=submission.hardware
    ).exists()
