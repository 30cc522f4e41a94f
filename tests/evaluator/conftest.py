"""Fixtures of the evaluator tests: paths, bundle builders, a tiny CPU suite."""

from __future__ import annotations

import io
import os
import tarfile
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest

# Candidate Triton code runs in the interpreter on CPU; this must be set before triton
# is first imported in this process (the evaluator's child processes set it themselves).
os.environ.setdefault("TRITON_INTERPRET", "1")

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "bundles"
TRITON_BASELINE = EXAMPLES / "triton-baseline"
PYTORCH_EAGER = EXAMPLES / "pytorch-eager"
KNOWN = ("fused_add_rms_norm", "rms_norm", "silu_and_mul")

TINY_SHAPES = {
    # Non-power-of-two hidden sizes on purpose: the kernels must mask.
    "rms_norm": [{"token_count": 3, "hidden_size": 200}],
    "silu_and_mul": [{"shape": [2, 600]}],
    "fused_add_rms_norm": [{"token_count": 2, "hidden_size": 300}],
}


def write_tree(root: Path, files: dict[str, str | bytes]) -> Path:
    """Create files (relative path -> text or bytes) under ``root``; return ``root``."""
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
    return root


def zip_bytes(files: dict[str, str | bytes]) -> bytes:
    """A zip archive holding ``files``."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, content in files.items():
            archive.writestr(name, content)
    return buffer.getvalue()


def tar_gz_bytes(files: dict[str, str | bytes]) -> bytes:
    """A gzip-compressed tar archive holding ``files``."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, content in files.items():
            data = content.encode() if isinstance(content, str) else content
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def example_files(bundle: Path) -> dict[str, str]:
    """The files of an example bundle, by name."""
    return {p.name: p.read_text() for p in sorted(bundle.iterdir()) if p.is_file()}


@pytest.fixture(scope="session")
def tiny_suite():
    """The v0.1 suite with one tiny shape per operator (fast in the Triton interpreter)."""
    from evaluator.operators import get_operator
    from evaluator.suite import load_suite

    suite = load_suite("atrex-bench-v0.1")
    shapes = []
    for operator in suite.operator_slugs():
        template = suite.shapes_for(operator, "smoke")[0]
        spec = get_operator(operator)
        for index, input_kwargs in enumerate(TINY_SHAPES[operator]):
            work = spec.work(template.init_kwargs, input_kwargs)
            shapes.append(
                replace(
                    template,
                    shape_id=f"t{index}",
                    input_kwargs=input_kwargs,
                    w_flops=work.w_flops,
                    q_read=work.q_read,
                    q_write=work.q_write,
                    smoke=True,
                )
            )
    return replace(suite, shapes=tuple(shapes))


@pytest.fixture
def make_bundle(tmp_path):
    """Build a bundle directory from {relative path: source}."""
    counter = iter(range(1000))

    def build(files: dict[str, str | bytes]) -> Path:
        return write_tree(tmp_path / f"bundle{next(counter)}", files)

    return build
