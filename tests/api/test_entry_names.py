"""An archive entry whose name is not UTF-8 is refused with its own code, and the kept
upload stays readable: its API detail and admin page answer for every reader (such a name
was once stored with surrogate characters and made both answer 500)."""

from __future__ import annotations

import io
import tarfile
import zipfile

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from accounts.services import api_token_create
from evaluator.bundle import inspect_bundle
from evaluator.errors import BundleError
from tests.factories import UserFactory

MODEL = "import torch\n\nclass Model(torch.nn.Module):\n    pass\n"
BAD_NAME = b"notes-\xff\xfe.txt"


def _tar_gz(*, bad: bool) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", format=tarfile.GNU_FORMAT) as archive:
        for name, data in (("rms_norm.py", MODEL.encode()), ("notes.txt", b"hello")):
            if bad and name == "notes.txt":
                name = BAD_NAME.decode(
                    "utf-8", "surrogateescape"
                )  # the raw bytes, as tar keeps them
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _zip_flagged_utf8_with_bad_bytes() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("rms_norm.py", MODEL)
        archive.writestr("n\u00e9\u00e9.txt", b"hello")  # non-ASCII: stored with the UTF-8 flag
    good = "n\u00e9\u00e9.txt".encode()
    return buffer.getvalue().replace(good, b"n\xff\xfe\xff\xfe.txt"[: len(good)])


@pytest.mark.parametrize(
    "data, shown",
    [(_tar_gz(bad=True), "notes-\\xff\\xfe.txt"), (_zip_flagged_utf8_with_bad_bytes(), "n\\xff")],
)
def test_an_entry_name_that_is_not_utf8_is_refused_with_its_own_code(data, shown):
    with pytest.raises(BundleError) as caught:
        inspect_bundle(data, known_operators=["rms_norm"])
    assert caught.value.code == "bundle:name-encoding"
    assert shown in caught.value.message and "UTF-8" in caught.value.message


def test_the_same_archive_with_a_utf8_name_is_accepted():
    manifest = inspect_bundle(_tar_gz(bad=False), known_operators=["rms_norm"])
    assert manifest.operators == {"rms_norm": "rms_norm.py"}


@pytest.mark.django_db
def test_the_refused_upload_stays_readable_in_the_api_and_the_admin(api, client, catalogue, user):
    api.credentials(HTTP_AUTHORIZATION=f"Token {api_token_create(user=user).secret}")
    upload = SimpleUploadedFile("bundle.tar.gz", _tar_gz(bad=True), "application/gzip")
    response = api.post("/api/submissions/", {"bundle": upload}, format="multipart")
    assert response.status_code == 422
    body = response.json()
    assert body["code"] == "bundle:name-encoding" and body["status"] == "rejected"
    detail = api.get(f"/api/submissions/{body['id']}/")
    assert detail.status_code == 200 and detail.json()["status"] == "rejected"
    client.force_login(UserFactory(is_staff=True, is_superuser=True))
    page = client.get(f"/admin/submissions/submission/{body['id']}/change/")
    assert page.status_code == 200 and b"name-encoding" in page.content
