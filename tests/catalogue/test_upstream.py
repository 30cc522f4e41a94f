"""Reading operators in the upstream Atrex-Bench format (no Django, nothing executed)."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import pytest

from evaluator.suite import load_suite
from evaluator.upstream import (
    UpstreamFormatError,
    definition_sources,
    read_operator_dir,
    read_operator_zip,
    read_release,
    suite_definition,
    version_content_hash,
)
from tests.release import require_release

FIXTURES = Path(__file__).parent / "fixtures" / "upstream"
SCALED_ADD = FIXTURES / "scaled_add"


def _files(**changes: str | None) -> dict[str, bytes]:
    files = {path.name: path.read_bytes() for path in SCALED_ADD.iterdir() if path.is_file()}
    for name, text in changes.items():
        name = name.replace("_py", ".py").replace("_json", ".json")
        if text is None:
            files.pop(name, None)
        else:
            files[name] = text.encode()
    return files


def _zip(files: dict[str, bytes], folder: str = "scaled_add") -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in files.items():
            archive.writestr(f"{folder}/{name}" if folder else name, data)
    return buffer.getvalue()


def test_fixture_operator_reads_as_entry_shapes_and_sources():
    operator = read_operator_dir(SCALED_ADD, source="test", require_sources=True)
    assert operator.entry.slug == "scaled_add" and operator.entry.dtype == "bf16"
    assert operator.entry.atrex_id == "atrex_901" and operator.entry.importance_raw == 0.05
    full = [s for s in operator.shapes if not s.smoke]
    assert [s.shape_id for s in full] == ["0", "1", "3"]
    shape0 = full[0]
    assert shape0.init_kwargs == {}  # null in shapes.json
    assert shape0.input_kwargs == {"rows": 4, "cols": 64}
    assert (shape0.w_flops, shape0.q_read, shape0.q_write) == ({"bf16": 512}, 1024, 512)
    assert full[1].init_kwargs == {"alpha": 0.5}
    smoke = [s for s in operator.shapes if s.smoke]
    assert [s.shape_id for s in smoke] == ["smoke-0", "smoke-1", "smoke-3"]
    assert smoke[0].w_flops == shape0.w_flops
    assert set(operator.sources) == {"reference.py", "input.py"}
    assert "class Model" in operator.sources["reference.py"]


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"input_py": None}, "input.py is missing"),
        ({"shapes_json": "{not json"}, "shapes.json is not valid JSON"),
        ({"reference_py": "class Model(:\n"}, "reference.py has a syntax error at line 1"),
        ({"reference_py": "class Kernel:\n    pass\n"}, "defines no top-level class 'Model'"),
        (
            {"roofline_json": json.dumps({"shapes": {"0": {}, "1": {}, "3": {}}})},
            "shape 0 lacks W/Q",
        ),
        (
            {
                "roofline_json": json.dumps(
                    {
                        "shapes": {
                            sid: {
                                "semantic_W_flops": {"bf16": 1},
                                "semantic_Q_read_bytes": 1,
                                "semantic_Q_write_bytes": 1,
                            }
                            for sid in ("0", "1", "7")
                        }
                    }
                )
            },
            "shape id(s) 3 of shapes.json have no W/Q in roofline.json",
        ),
        ({"metadata_json": json.dumps({"dtype": "bf16"})}, "metadata.json lacks 'id'"),
    ],
)
def test_bad_upload_names_the_file_and_the_problem(changes, expected):
    with pytest.raises(UpstreamFormatError) as caught:
        read_operator_zip(_zip(_files(**changes)), source="test")
    assert expected in caught.value.message


def test_zip_that_is_not_a_zip_or_has_no_folder_name_is_refused():
    with pytest.raises(UpstreamFormatError, match="not a zip archive"):
        read_operator_zip(b"PK not really", source="test")
    with pytest.raises(UpstreamFormatError, match="name the operator"):
        read_operator_zip(_zip(_files(), folder=""), source="test")
    assert read_operator_zip(_zip(_files(), folder=""), source="t", slug="scaled_add").slug == (
        "scaled_add"
    )


def test_sources_are_part_of_the_version_hash_and_checked_on_load():
    release = read_release(FIXTURES, name="t", version="v1", source="test")
    assert set(release.sources) == {"scaled_add"}
    definition = suite_definition(release.suite, release.sources)
    assert definition_sources(definition) == release.sources
    with_sources = version_content_hash(release.suite, release.sources)
    assert with_sources != release.suite.content_hash
    changed = {"scaled_add": {**release.sources["scaled_add"], "input.py": "x = 1\n"}}
    assert version_content_hash(release.suite, changed) != with_sources
    tampered = {**definition, "operator_sources": changed}
    with pytest.raises(Exception, match="do not match their stored hash"):
        definition_sources(tampered)


def test_release_data_reads_as_the_shipped_v1_shapes():
    data_dir = require_release()
    release = read_release(data_dir, name="atrex-bench", version="check")
    shipped = load_suite("atrex-bench-v1")
    assert release.sources == {}  # every release operator is built in
    ours = {(s.operator, s.shape_id): s for s in release.suite.shapes}
    theirs = {(s.operator, s.shape_id): s for s in shipped.shapes}
    assert sum(not s.smoke for s in ours.values()) == 440
    assert ours.keys() == theirs.keys()
    for key, shape in ours.items():
        other = theirs[key]
        assert (shape.init_kwargs, shape.input_kwargs) == (other.init_kwargs, other.input_kwargs)
        assert (shape.w_flops, shape.q_read, shape.q_write) == (
            other.w_flops,
            other.q_read,
            other.q_write,
        ), key
    assert release.suite.importance() == pytest.approx(shipped.importance(), abs=1e-12)
