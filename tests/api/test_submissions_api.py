"""Submissions over the API: detail, per-shape pages, progress, visibility, errors."""

from __future__ import annotations

import io
import zipfile

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from accounts.services import api_token_create
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


def _zip(files: dict[str, str]) -> SimpleUploadedFile:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for path, text in files.items():
            archive.writestr(path, text)
    return SimpleUploadedFile("bundle.zip", buffer.getvalue(), "application/zip")


def test_published_submission_detail_has_scores_and_operators(api, publish, schema_check):
    submission = publish(fraction=0.25)
    body = api.get(f"/api/submissions/{submission.pk}/").json()
    schema_check("SubmissionDetail", body)
    assert body["status"] == "published" and body["progress"]["final"] is True
    assert body["scores"]["aggregate"] == pytest.approx(0.25)
    assert body["aggregate"] == pytest.approx(0.25)
    assert {row["status"] for row in body["operators"]} == {"ok"}
    assert [step["to_status"] for step in body["history"]][-1] == "published"


def test_shape_results_are_a_paginated_sub_resource(api, publish, schema_check):
    submission = publish(fraction=0.5)
    total = submission.runs.get().shape_results.count()
    page = api.get(f"/api/submissions/{submission.pk}/shapes/", {"page_size": 7}).json()
    schema_check("PaginatedShapeResultList", page)
    assert page["count"] == total and len(page["results"]) == 7 and page["next"]
    one_operator = api.get(
        f"/api/submissions/{submission.pk}/shapes/", {"operator": "rms_norm", "page_size": 200}
    ).json()
    assert one_operator["results"] and {r["operator"] for r in one_operator["results"]} == {
        "rms_norm"
    }


def test_private_submission_is_served_to_owner_and_staff_only(api, publish, user):
    submission = publish(fraction=0.5, visibility="private")
    urls = [f"/api/submissions/{submission.pk}/{tail}" for tail in ("", "progress/", "shapes/")]
    for url in urls:
        assert api.get(url).status_code == 404
    api.force_authenticate(UserFactory())
    for url in urls:
        assert api.get(url).json() == {"detail": "Not found.", "code": "not_found"}
    assert submission.pk not in [r["id"] for r in api.get("/api/submissions/").json()["results"]]
    api.force_authenticate(user)
    assert all(api.get(url).status_code == 200 for url in urls)
    mine = api.get("/api/submissions/", {"mine": "1"}).json()["results"]
    assert [r["id"] for r in mine] == [submission.pk]
    api.force_authenticate(UserFactory(is_staff=True))
    assert all(api.get(url).status_code == 200 for url in urls)


def test_submission_list_is_paginated(api, publish, schema_check):
    for index in range(3):
        publish(fraction=0.1 * (index + 1), title=f"k{index}")
    page = api.get("/api/submissions/", {"page_size": 2}).json()
    schema_check("PaginatedSubmissionList", page)
    assert page["count"] == 3 and len(page["results"]) == 2 and page["next"]
    assert page["results"][0]["title"] == "k2"  # newest first


def test_upload_answers_201_queued_then_progress_polls(api, catalogue, user, schema_check):
    api.credentials(HTTP_AUTHORIZATION=f"Token {api_token_create(user=user).secret}")
    module = (
        "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x\n"
    )
    response = api.post(
        "/api/submissions/",
        {"bundle": _zip({"rms_norm.py": module}), "title": "t", "hardware": "cpu-dev"},
        format="multipart",
    )
    assert response.status_code == 201, response.content
    schema_check("SubmissionDetail", response.json())
    progress = api.get(f"/api/submissions/{response.json()['id']}/progress/").json()
    schema_check("SubmissionProgress", progress)
    assert progress["status"] == "queued" and progress["final"] is False


def test_rejected_upload_answers_422_with_detail_and_code(api, catalogue, user, schema_check):
    api.credentials(HTTP_AUTHORIZATION=f"Token {api_token_create(user=user).secret}")
    response = api.post(
        "/api/submissions/", {"bundle": _zip({"rms_norm.py": "def broken(:\n"})}, format="multipart"
    )
    assert response.status_code == 422
    body = response.json()
    schema_check("SubmissionRejected", body)
    assert body["code"] == "bundle:syntax-error" and "rms_norm.py" in body["detail"]
    assert body["status"] == "rejected"


def test_bad_fields_answer_400_with_field_errors(api, catalogue, user, schema_check):
    api.force_authenticate(user)
    response = api.post(
        "/api/submissions/",
        {"bundle": _zip({"rms_norm.py": "x = 1\n"}), "suite": "no-such-suite"},
        format="multipart",
    )
    assert response.status_code == 400
    body = response.json()
    schema_check("ValidationError", body)
    assert body["code"] == "invalid" and "suite" in body["errors"]
    assert body["detail"].startswith("suite: No published suite version")


def test_anonymous_upload_answers_401_with_the_error_body(api, catalogue, schema_check):
    response = api.post("/api/submissions/", {"bundle": _zip({"rms_norm.py": "x=1\n"})})
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Token"
    schema_check("Error", response.json())
    assert response.json()["code"] == "not_authenticated"
