"""The campaign's Triton cache (``evaluator.serve.seed_cache``): what a round compiled is a
cache hit for Triton in a later round of the same source, in another folder."""

from __future__ import annotations

import os
import shutil

import pytest

from evaluator.sandbox import rehome_cache_groups
from evaluator.serve import seed_cache

triton_cache = pytest.importorskip("triton.runtime.cache")


def _compile_into(folder, monkeypatch) -> str:
    """A kernel's files and group written by Triton's own cache manager into ``folder``, as a
    compile writes them; its key."""
    monkeypatch.setenv("TRITON_CACHE_DIR", str(folder))
    key = "c0ffee" * 10 + "abcd"
    manager = triton_cache.FileCacheManager(key)
    group = {
        name: manager.put(data, name, binary=isinstance(data, bytes))
        for name, data in (("k.cubin", b"\x7fELF..."), ("k.json", '{"name": "k"}'))
    }
    manager.put_group("k.json", group)
    return key


def _group(folder, key, monkeypatch):
    monkeypatch.setenv("TRITON_CACHE_DIR", str(folder))
    return triton_cache.FileCacheManager(key).get_group("k.json")


def test_a_kept_cache_seeded_into_a_later_round_is_a_hit_for_triton(tmp_path, monkeypatch):
    first = tmp_path / "round-1" / "triton-cache"
    key = _compile_into(first, monkeypatch)
    kept = tmp_path / "kept"
    shutil.copytree(first, kept)  # as _keep_cache copies it, then names its own files
    rehome_cache_groups(kept, first)
    shutil.rmtree(tmp_path / "round-1")  # the round's folder is removed when it ends
    later = tmp_path / "round-2" / "triton-cache"
    later.mkdir(parents=True)
    copied, rehomed = seed_cache(kept, later)
    assert copied and rehomed == 1
    shutil.rmtree(kept)  # the later round reads only its own folder
    group = _group(later, key, monkeypatch)
    assert group is not None, "Triton found no kernel in the seeded cache (it would compile)"
    assert sorted(group) == ["k.cubin", "k.json"]
    assert all(path.startswith(str(later) + os.sep) for path in group.values())


def test_without_rehoming_the_copy_is_a_miss(tmp_path, monkeypatch):
    # What every round paid before harness 0.3.8: Triton's group names the first folder.
    first = tmp_path / "round-1" / "triton-cache"
    key = _compile_into(first, monkeypatch)
    later = tmp_path / "round-2" / "triton-cache"
    shutil.copytree(first, later)
    shutil.rmtree(tmp_path / "round-1")
    assert _group(later, key, monkeypatch) is None
