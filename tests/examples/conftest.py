"""Fixtures of the example-bundle tests: where the bundles are, how to load one file."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

import pytest

# The Triton kernels run in the interpreter on CPU; this must be set before triton is first
# imported in this process (the evaluator's child processes set it themselves).
os.environ.setdefault("TRITON_INTERPRET", "1")

REPO = Path(__file__).resolve().parents[2]
BUNDLES = REPO / "examples" / "bundles"
TRITON_BASELINE = BUNDLES / "triton-baseline"
TORCH_COMPILE = BUNDLES / "torch-compile"
"""The torch.compile bundle's committed part (README, atrex.toml); its operator files are
generated (the ``torch_compile_bundle`` fixture)."""


def operators_of(bundle: Path) -> set[str]:
    """The operators a bundle folder has a kernel file for (``_``-named files are helpers)."""
    return {path.stem for path in bundle.glob("*.py") if not path.stem.startswith("_")}


def load_model_module(bundle: Path, operator: str) -> ModuleType:
    """Import ``<bundle>/<operator>.py`` under a name of its own, the bundle's folder on
    ``sys.path`` for its helper modules (as the evaluator's child does)."""
    if str(bundle) not in sys.path:
        sys.path.insert(0, str(bundle))
    name = f"example_{bundle.name.replace('-', '_')}_{operator}"
    spec = importlib.util.spec_from_file_location(name, bundle / f"{operator}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def suite_v1():
    from evaluator.suite import load_suite

    return load_suite("atrex-bench-v1")


def load_bundle_generator() -> ModuleType:
    """``scripts/make_torch_compile_bundle.py`` as a module (scripts/ is not a package)."""
    name = "make_torch_compile_bundle"
    if name not in sys.modules:
        path = REPO / "scripts" / f"{name}.py"
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses look their module up while it runs
        spec.loader.exec_module(module)
    return sys.modules[name]


@pytest.fixture(scope="session")
def torch_compile_bundle(tmp_path_factory) -> Path:
    """The torch.compile bundle as the generator writes it, every operator, once a run."""
    out = tmp_path_factory.mktemp("bundles") / "torch-compile"
    load_bundle_generator().write_bundle(out)
    return out
