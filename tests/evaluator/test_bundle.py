"""Bundle validation without execution, and safe extraction."""

from __future__ import annotations

import io
import os
import sys
import tarfile
import zipfile

import pytest

from evaluator.bundle import extract_bundle, inspect_bundle
from evaluator.errors import BundleError
from evaluator.suite import load_suite

from .conftest import KNOWN, PYTORCH_EAGER, TRITON_BASELINE, example_files, tar_gz_bytes, zip_bytes

# The Triton example covers more operators than the three of KNOWN; check it against v1's.
V1_OPERATORS = tuple(load_suite("atrex-bench-v1").operator_slugs())
BASELINE_OPERATORS = {path.stem for path in TRITON_BASELINE.glob("*.py")}

MODEL = (
    "import torch\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x\n"
)


def inspect(data, filename="bundle.zip", **kwargs):
    return inspect_bundle(data, filename=filename, known_operators=KNOWN, **kwargs)


def error_of(data, filename="bundle.zip", **kwargs) -> BundleError:
    with pytest.raises(BundleError) as caught:
        inspect(data, filename, **kwargs)
    return caught.value


# ----------------------------------------------------------------------------- accepted


def test_zip_of_the_triton_example_lists_operators_and_metadata():
    manifest = inspect_bundle(
        zip_bytes(example_files(TRITON_BASELINE)),
        filename="bundle.zip",
        known_operators=V1_OPERATORS,
    )
    assert manifest.operators == {op: f"{op}.py" for op in BASELINE_OPERATORS}
    assert manifest.kind == "zip"
    assert manifest.metadata["dsl"] == "triton"
    assert manifest.metadata["title"].startswith("Triton baseline")
    assert "atrex.toml" in manifest.files


def test_type_is_detected_by_content_not_extension():
    data = tar_gz_bytes(example_files(PYTORCH_EAGER))
    manifest = inspect(data, filename="misnamed.zip")
    assert manifest.kind == "tar" and set(manifest.operators) == set(KNOWN)


def test_single_top_folder_is_stripped():
    manifest = inspect(zip_bytes({"my-kernels/rms_norm.py": MODEL, "my-kernels/util.py": "X=1"}))
    assert manifest.operators == {"rms_norm": "rms_norm.py"} and manifest.root == "my-kernels"


def test_directory_bundle():
    manifest = inspect_bundle(TRITON_BASELINE, known_operators=V1_OPERATORS)
    assert manifest.kind == "directory" and set(manifest.operators) == BASELINE_OPERATORS


def test_single_python_file_named_after_its_operator():
    manifest = inspect(MODEL.encode(), filename="silu_and_mul.py")
    assert manifest.operators == {"silu_and_mul": "silu_and_mul.py"} and manifest.kind == "py"


def test_upstream_generated_kernel_in_an_operator_folder():
    manifest = inspect(zip_bytes({"rms_norm/generated_kernel.py": MODEL}))
    assert manifest.operators == {"rms_norm": "rms_norm/generated_kernel.py"}


def test_lone_generated_kernel_needs_an_operator_hint():
    manifest = inspect(MODEL.encode(), filename="generated_kernel.py", operator_hint="rms_norm")
    assert manifest.operators == {"rms_norm": "generated_kernel.py"}
    error = error_of(MODEL.encode(), filename="generated_kernel.py")
    assert error.code == "bundle:no-operators"
    assert "generated_kernel.py needs its operator" in error.message


def test_unknown_metadata_keys_are_warnings():
    manifest = inspect(zip_bytes({"rms_norm.py": MODEL, "atrex.toml": 'title = "t"\ncolour = 1'}))
    assert manifest.metadata == {"title": "t"}
    assert any("colour" in w for w in manifest.warnings)


def test_model_may_be_imported_or_assigned():
    assign = "from helpers import Kernel\nModel = Kernel\n"
    manifest = inspect(zip_bytes({"rms_norm.py": assign, "helpers.py": "class Kernel: pass"}))
    assert manifest.operators == {"rms_norm": "rms_norm.py"}


# ----------------------------------------------------------------------------- rejected


def test_empty_upload():
    error = error_of(b"")
    assert error.code == "bundle:empty" and "0 bytes" in error.message


def test_binary_that_is_not_an_archive():
    error = error_of(b"\x89PNG\r\n\x1a\n\x00\x00binary", filename="kernel.zip")
    assert error.code == "bundle:not-an-archive"
    assert ".zip" in error.message and ".tar.gz" in error.message


def test_corrupt_zip_is_not_an_archive():
    error = error_of(b"PK\x03\x04" + b"\x00" * 40)
    assert error.code == "bundle:not-an-archive"


def test_no_operator_files_lists_files_and_known_operators():
    error = error_of(zip_bytes({"kernel.py": "x = 1", "README.md": "hi"}))
    assert error.code == "bundle:no-operators"
    assert "kernel.py" in error.message and "README.md" in error.message
    assert all(op in error.message for op in KNOWN)


def test_syntax_error_names_file_and_line_and_shows_the_line_with_a_caret():
    error = error_of(zip_bytes({"rms_norm.py": "import torch\n\n    def broken(:\n    pass\n"}))
    assert error.code == "bundle:syntax-error"
    assert "rms_norm.py" in error.message and "line 3" in error.message
    lines = error.message.splitlines()
    shown = next(i for i, line in enumerate(lines) if line.strip() == "def broken(:")
    caret = lines[shown + 1]
    assert caret.strip() == "^"
    assert lines[shown][caret.index("^")] in "def broken(:"  # under a character of the line


def test_syntax_error_caret_points_at_the_column_python_reports():
    error = error_of(zip_bytes({"rms_norm.py": "x = (1,\ny = 2\n"}))
    lines = error.message.splitlines()
    assert any(line.strip() == "^" for line in lines)
    assert "Fix the Python syntax" in lines[-1]


def test_an_empty_archive_is_empty():
    assert error_of(zip_bytes({})).code == "bundle:empty"
    assert error_of(tar_gz_bytes({}), filename="b.tar.gz").code == "bundle:empty"
    assert error_of(zip_bytes({"__MACOSX/._x": "junk"})).code == "bundle:empty"


def test_model_defined_inside_module_level_if_else_or_try_is_found():
    picked = (
        "import torch\nif torch.cuda.is_available():\n    class Model(torch.nn.Module):\n"
        "        pass\nelse:\n    from fallback_impl import Model\n"
    )
    guarded = "try:\n    from fast import Model\nexcept ImportError:\n    Model = None\n"
    for source in (picked, guarded):
        assert inspect(zip_bytes({"rms_norm.py": source})).operators == {"rms_norm": "rms_norm.py"}


def test_model_defined_only_inside_a_function_is_still_missing():
    source = "def build():\n    class Model:\n        pass\n    return Model\n"
    assert error_of(zip_bytes({"rms_norm.py": source})).code == "bundle:missing-model"


def test_missing_model_class():
    error = error_of(zip_bytes({"silu_and_mul.py": "class Kernel:\n    pass\n"}))
    assert error.code == "bundle:missing-model"
    assert "silu_and_mul.py" in error.message and "class Model" in error.message


def test_lenient_mode_records_per_operator_problems():
    data = zip_bytes({"rms_norm.py": "def f(:\n", "silu_and_mul.py": MODEL})
    manifest = inspect(data, strict=False)
    assert set(manifest.operators) == {"rms_norm", "silu_and_mul"}
    assert manifest.problems["rms_norm"]["code"] == "bundle:syntax-error"
    assert "silu_and_mul" not in manifest.problems


def test_a_model_file_the_suite_lacks_is_skipped_with_a_warning_and_the_rest_kept():
    manifest = inspect(zip_bytes({"rms_norm.py": MODEL, "rmsnorm.py": MODEL}))
    assert manifest.operators == {"rms_norm": "rms_norm.py"}
    (warning,) = [w for w in manifest.warnings if "rmsnorm.py" in w]
    assert warning.startswith("Skipped 1 kernel file for operators this suite does not have")


def test_a_bundle_with_only_model_files_the_suite_lacks_is_refused_naming_them():
    error = error_of(zip_bytes({"rmsnorm.py": MODEL, "swiglu.py": MODEL}))
    assert error.code == "bundle:unknown-operator"
    assert "'rmsnorm'" in error.message and "swiglu.py" in error.message
    assert all(op in error.message for op in KNOWN)


def test_the_triton_example_against_a_smaller_suite_keeps_that_suites_operators():
    manifest = inspect_bundle(TRITON_BASELINE, known_operators=KNOWN)
    assert set(manifest.operators) == set(KNOWN) & BASELINE_OPERATORS
    (skipped,) = [w for w in manifest.warnings if w.startswith("Skipped")]
    others = sorted(BASELINE_OPERATORS - set(KNOWN))
    assert f"Skipped {len(others)} kernel files" in skipped
    assert ", ".join(f"{slug}.py" for slug in others) in skipped


def test_helper_without_model_is_not_an_unknown_operator():
    manifest = inspect(zip_bytes({"rms_norm.py": MODEL, "common.py": "def helper(): pass"}))
    assert "common.py" in manifest.files


@pytest.mark.parametrize(
    "name",
    ["/etc/rms_norm.py", "../rms_norm.py", "a/../../x.py", "C:/rms_norm.py", "a\\rms_norm.py"],
)
def test_unsafe_paths_in_zip(name):
    error = error_of(zip_bytes({"rms_norm.py": MODEL, name: "x"}))
    assert error.code == "bundle:unsafe-entry"
    assert "unsafe path" in error.message


def test_symlink_in_zip():
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("rms_norm.py", MODEL)
        link = zipfile.ZipInfo("secret.py")
        link.external_attr = 0o120777 << 16
        archive.writestr(link, "/etc/passwd")
    error = error_of(buffer.getvalue())
    assert error.code == "bundle:unsafe-entry" and "link" in error.message


@pytest.mark.parametrize("kind", [tarfile.SYMTYPE, tarfile.LNKTYPE, tarfile.CHRTYPE])
def test_links_and_devices_in_tar(kind):
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        data = MODEL.encode()
        info = tarfile.TarInfo("rms_norm.py")
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))
        special = tarfile.TarInfo("evil")
        special.type = kind
        special.linkname = "/etc/passwd"
        archive.addfile(special)
    error = error_of(buffer.getvalue(), filename="b.tar.gz")
    assert error.code == "bundle:unsafe-entry"
    assert "evil" in error.message


def test_symlink_in_directory(tmp_path):
    (tmp_path / "rms_norm.py").write_text(MODEL)
    os.symlink("/etc/passwd", tmp_path / "passwd")
    with pytest.raises(BundleError) as caught:
        inspect_bundle(tmp_path, known_operators=KNOWN)
    assert caught.value.code == "bundle:unsafe-entry"


def test_upload_over_the_size_limit():
    error = error_of(zip_bytes({"rms_norm.py": MODEL}), max_bytes=100)
    assert error.code == "bundle:too-large" and "MiB" in error.message


def test_too_many_entries():
    files = {f"helper{i}.py": "x = 1" for i in range(12)} | {"rms_norm.py": MODEL}
    error = error_of(zip_bytes(files), max_entries=10)
    assert error.code == "bundle:too-large" and "more than 10 entries" in error.message


def test_declared_unpacked_size_over_the_limit():
    data = zip_bytes({"rms_norm.py": MODEL, "blob.txt": b"\x00" * 200_000})
    error = error_of(data, max_total_bytes=100_000)
    assert error.code == "bundle:too-large" and "unpacks" in error.message


@pytest.mark.parametrize("name", ["kernel.so", "weights.pt", "Makefile", "lib/build.ninja"])
def test_files_of_other_types_are_refused_by_name(name):
    error = error_of(zip_bytes({"rms_norm.py": MODEL, name: "x"}))
    assert error.code == "bundle:file-type"
    assert repr(name) in error.message and ".cu" in error.message


def test_every_allowed_type_is_accepted():
    files = {f"extra/notes{suffix}": "ok" for suffix in (".cu", ".cuh", ".cpp", ".h", ".md")}
    files |= {"extra/a.json": "{}", "extra/b.txt": "t", "rms_norm.py": MODEL}
    manifest = inspect(zip_bytes(files))
    assert set(files) <= set(manifest.files)


def test_source_that_is_not_utf8_is_refused_by_name():
    data = zip_bytes({"rms_norm.py": MODEL, "kernels/fast.cu": b"// caf\xe9\n"})
    error = error_of(data)
    assert error.code == "bundle:encoding"
    assert "'kernels/fast.cu'" in error.message and "UTF-8" in error.message


def test_control_characters_in_names_are_unsafe():
    error = error_of(zip_bytes({"rms_norm.py": MODEL, "a\nb.py": "x = 1"}))
    assert error.code == "bundle:unsafe-entry"


def test_an_entry_that_appears_twice_is_refused():
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive, pytest.warns(UserWarning):
        archive.writestr("rms_norm.py", MODEL)
        archive.writestr("rms_norm.py", "import os")
    error = error_of(buffer.getvalue())
    assert error.code == "bundle:unsafe-entry" and "appears twice" in error.message


def test_encrypted_zip_entry_is_refused():
    data = bytearray(zip_bytes({"rms_norm.py": MODEL}))
    # Set the "encrypted" bit of the central directory entry (zipfile never writes it).
    central = data.index(b"PK\x01\x02")
    data[central + 8] |= 0x1
    error = error_of(bytes(data))
    assert "encrypted" in error.message and "'rms_norm.py'" in error.message


def test_sparse_tar_member_is_refused():
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", format=tarfile.GNU_FORMAT) as archive:
        info = tarfile.TarInfo("rms_norm.py")
        info.size = len(MODEL)
        archive.addfile(info, io.BytesIO(MODEL.encode()))
        sparse = tarfile.TarInfo("holes.txt")
        sparse.type = tarfile.GNUTYPE_SPARSE
        archive.addfile(sparse)
    error = error_of(buffer.getvalue(), filename="b.tar.gz")
    assert error.code == "bundle:unsafe-entry" and "sparse" in error.message


def test_fifo_in_directory_bundle_is_refused(tmp_path):
    (tmp_path / "rms_norm.py").write_text(MODEL)
    os.mkfifo(tmp_path / "pipe.txt")
    with pytest.raises(BundleError) as caught:
        inspect_bundle(tmp_path, known_operators=KNOWN)
    assert caught.value.code == "bundle:unsafe-entry" and "pipe.txt" in caught.value.message


def _bomb_zip(size: int) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("rms_norm.py", MODEL)
        archive.writestr("padding.txt", b" " * size)
    return buffer.getvalue()


def test_zip_bomb_is_stopped_by_the_bytes_actually_unpacked(monkeypatch):
    data = _bomb_zip(8 * 1024 * 1024)
    assert len(data) < 64 * 1024  # a small upload...
    import evaluator.bundle as bundle_module

    # ...whose headers are not trusted: the streamed count alone must stop it.
    monkeypatch.setattr(bundle_module, "_check_counts", lambda *a, **k: None)
    error = error_of(data, max_total_bytes=1024 * 1024)
    assert error.code == "bundle:too-large" and "unpacks to more than 1 MiB" in error.message


def test_tar_gz_bomb_is_stopped(monkeypatch):
    data = tar_gz_bytes({"rms_norm.py": MODEL, "padding.txt": b" " * (8 * 1024 * 1024)})
    assert len(data) < 64 * 1024
    assert error_of(data, filename="b.tgz", max_total_bytes=1024 * 1024).code == "bundle:too-large"
    import evaluator.bundle as bundle_module

    monkeypatch.setattr(bundle_module, "_check_counts", lambda *a, **k: None)
    error = error_of(data, filename="b.tgz", max_total_bytes=1024 * 1024)
    assert error.code == "bundle:too-large"


def test_worker_checks_again_before_writing_anything(tmp_path):
    data = zip_bytes({"rms_norm.py": MODEL, "build/kernel.so": b"\x7fELF"})
    with pytest.raises(BundleError) as caught:
        extract_bundle(data, tmp_path / "out", known_operators=KNOWN)
    assert caught.value.code == "bundle:file-type" and "build/kernel.so" in caught.value.message
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


# ----------------------------------------------------------------------------- extraction


def test_extract_strips_the_top_folder_and_returns_the_manifest(tmp_path):
    data = zip_bytes({"k/rms_norm.py": MODEL, "k/lib/util.py": "X = 1", "k/__MACOSX/._x": "j"})
    archive = tmp_path / "upload.bin"
    archive.write_bytes(data)
    manifest = extract_bundle(archive, tmp_path / "out", known_operators=KNOWN)
    assert (tmp_path / "out" / "rms_norm.py").read_text() == MODEL
    assert (tmp_path / "out" / "lib" / "util.py").exists()
    assert not (tmp_path / "out" / "__MACOSX").exists()
    assert manifest.operators == {"rms_norm": "rms_norm.py"} and manifest.root == ""


def test_extract_tar_gz_and_single_file(tmp_path):
    tar = tmp_path / "b.tgz"
    tar.write_bytes(tar_gz_bytes(example_files(TRITON_BASELINE)))
    manifest = extract_bundle(tar, tmp_path / "t", known_operators=V1_OPERATORS)
    assert set(manifest.operators) == BASELINE_OPERATORS
    single = extract_bundle(
        MODEL.encode(), tmp_path / "s", filename="rms_norm.py", known_operators=KNOWN
    )
    assert single.operators == {"rms_norm": "rms_norm.py"}


def test_extract_caps_actual_bytes_even_when_headers_lie(tmp_path, monkeypatch):
    # A compressible blob: small upload, large when unpacked.
    data = zip_bytes({"rms_norm.py": MODEL, "blob.txt": b"\x00" * 3_000_000})
    import evaluator.bundle as bundle_module

    # Pretend the headers were trusted by the inspection (a lying archive).
    monkeypatch.setattr(bundle_module, "_check_counts", lambda *a, **k: None)
    with pytest.raises(BundleError) as caught:
        extract_bundle(data, tmp_path / "out", known_operators=KNOWN, max_total_bytes=1_000_000)
    assert caught.value.code == "bundle:too-large"


def test_bundle_module_is_pure_stdlib():
    import subprocess

    code = (
        "import sys, evaluator.bundle, evaluator.results, evaluator.runner, evaluator.cli; "
        "bad = [m for m in ('torch', 'triton', 'numpy', 'django') if m in sys.modules]; "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    from .conftest import REPO

    completed = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
