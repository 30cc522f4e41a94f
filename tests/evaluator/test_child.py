"""The child's warm-up (evaluator/child.py) pays what a round's first compile would."""

from __future__ import annotations

import importlib

from evaluator.child import warm_triton_key


def test_tritons_install_hash_is_computed_in_the_warm_up_and_kept_for_the_first_compile():
    cache = importlib.import_module("triton.runtime.cache")
    cache.triton_key.cache_clear()
    assert warm_triton_key()
    info = cache.triton_key.cache_info()
    assert info.currsize == 1 and info.misses == 1
    cache.triton_key()  # what the first compile asks for: served from the cache
    assert cache.triton_key.cache_info().hits == info.hits + 1
