"""The sandbox from the site's side: hidden paths and mode passed to the evaluator, unsafe
uploads refused at once, and a real Celery worker that goes on to the next submission
after a hostile one."""

from __future__ import annotations

import io
import os
import zipfile
from pathlib import Path

import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile

from submissions import evaluation, services
from submissions.models import Submission
from tests.conftest import wait_for_status

HOSTILE = Path(__file__).resolve().parents[1] / "evaluator" / "hostile"
MODEL = "import torch\n\n\nclass Model(torch.nn.Module):\n    pass\n"


def zip_upload(files: dict[str, str | bytes], name: str = "bundle.zip") -> SimpleUploadedFile:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for path, content in files.items():
            archive.writestr(path, content)
    return SimpleUploadedFile(name, buffer.getvalue(), "application/zip")


def test_evaluator_is_told_to_hide_the_site_and_which_mode():
    options = evaluation.sandbox_options()
    assert options[:2] == ["--sandbox", settings.ATREX["SANDBOX"]]
    hidden = {options[i + 1] for i, value in enumerate(options) if value == "--hide"}
    for path in (settings.VAR_DIR, settings.BASE_DIR / "atrex_site" / "settings"):
        assert str(path) in hidden
    for path in (settings.MEDIA_ROOT, settings.ATREX["RUNS_DIR"]):
        assert str(path) in hidden or not Path(path).exists()


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("files", "code", "named"),
    [
        ({"rms_norm.py": MODEL, "build/kernel.so": b"\x7fELF"}, "file-type", "build/kernel.so"),
        ({"rms_norm.py": MODEL, "notes.txt": b"caf\xe9"}, "encoding", "notes.txt"),
        ({"rms_norm.py": MODEL, "../escape.py": "x = 1"}, "unsafe-entry", "../escape.py"),
    ],
)
def test_unsafe_upload_is_rejected_at_once_naming_the_entry(catalogue, user, files, code, named):
    submission = services.submission_create(owner=user, upload=zip_upload(files))
    submission.refresh_from_db()
    assert submission.status == Submission.Status.REJECTED
    assert submission.error_code == f"bundle:{code}"
    assert named in submission.error_message


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(os.geteuid() != 0, reason="the full sandbox needs root")
def test_worker_evaluates_the_next_submission_after_a_hostile_one(
    catalogue, user, example_zip, celery_worker_process
):
    hostile = services.submission_create(
        owner=user,
        upload=zip_upload({"rms_norm.py": (HOSTILE / "segfault" / "rms_norm.py").read_text()}),
    )
    honest = services.submission_create(
        owner=user, upload=example_zip("triton-baseline", only=["fused_add_rms_norm.py"])
    )
    assert hostile.status == honest.status == Submission.Status.QUEUED
    worker_log = celery_worker_process
    wait_for_status(hostile, Submission.FINAL_STATUSES)
    wait_for_status(honest, Submission.FINAL_STATUSES)
    log = worker_log.read_text(errors="replace")[-3000:]
    # The hostile submission is evaluated to the end: its crash is its operator's result.
    assert hostile.status == Submission.Status.PUBLISHED, (hostile.error_message, log)
    run = hostile.runs.get()
    crashed = run.operator_results.get(operator="rms_norm")
    assert crashed.status == "runtime_error" and "segmentation fault" in crashed.error
    sandbox = run.environment["sandbox"]
    assert {"network", "mounts", "user"} <= set(sandbox["active"]), sandbox
    assert sandbox["limits"]["hidden_paths"] >= 3
    # The next submission on the same worker is evaluated normally.
    assert honest.status == Submission.Status.PUBLISHED, (honest.error_message, log)
    passed = honest.runs.get().shape_results.filter(operator="fused_add_rms_norm", status="pass")
    assert passed.count() == 3
