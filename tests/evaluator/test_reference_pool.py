"""The worker's reference-output pool (evaluator/reference_pool.py).

Real references on CPU, real Triton kernels in the interpreter, the real runner and
sandboxed child for the end-to-end cases: a pooled run gives the verdicts an unpooled one
gives, entries retire after their uses, a corrupt entry is recomputed, the child cannot
read the pool, and other versions' entries are never used.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import torch

from evaluator.correctness import check_shape
from evaluator.environment import collect_environment
from evaluator.operators import get_operator
from evaluator.reference_pool import (
    PoolClient,
    PoolSettings,
    PoolShape,
    ReferencePool,
    decode_output,
    encode_output,
    fill_plan,
    plan_file,
)
from evaluator.runner import run_bundle
from evaluator.suite import Suite, load_suite

from .conftest import REPO, TRITON_BASELINE, write_tree

EXPLOITS = Path(__file__).resolve().parent / "exploits"
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="the sandbox's user switch needs root")


def rms_smoke_suite() -> Suite:
    """The v0.1 suite cut down to rms_norm's first smoke shape."""
    suite = load_suite("atrex-bench-v0.1").restrict(["rms_norm"])
    return replace(suite, shapes=tuple(s for s in suite.shapes if s.shape_id == "smoke-0"))


def pool_shape(suite: Suite) -> PoolShape:
    (shape,) = suite.shapes
    return PoolShape(
        operator=shape.operator,
        shape_id=shape.shape_id,
        init_kwargs=dict(shape.init_kwargs or {}),
        input_kwargs=dict(shape.input_kwargs or {}),
        q_write=shape.q_write,
    )


def pool_state(settings: PoolSettings, suite: Suite) -> dict[str, Any]:
    pool = ReferencePool(settings, environment=collect_environment("cpu"))
    return pool.state(suite.content_hash, pool_shape(suite))


def small_settings(directory: Path, **changes: Any) -> PoolSettings:
    return replace(
        PoolSettings(
            directory=str(directory),
            entries=6,
            uses=2,
            low_water=3,
            fresh_trials=0,
            min_saving_s=0.0,  # the smoke shapes' references take microseconds
        ),
        **changes,
    )


def fill(settings: PoolSettings, suite: Suite, environment: dict[str, Any]) -> dict[str, Any]:
    plan = plan_file(suite.content_hash, [pool_shape(suite)], settings, "cpu")
    return fill_plan(plan, environment=environment)


def test_outputs_survive_encoding_with_their_dtypes_and_structure():
    outputs = [
        torch.randn(3, 5).to(torch.bfloat16),
        (torch.arange(6, dtype=torch.int32).reshape(2, 3), torch.tensor([True, False])),
        {"q": torch.randn(4).to(torch.float8_e4m3fn), "scale": torch.ones(0), "n": 3},
        torch.randn(2, 3).t(),  # not contiguous
    ]
    for output in outputs:
        structure, payload = encode_output(output)
        back = decode_output(json.loads(json.dumps(structure)), bytearray(payload), "cpu")
        flat_in = output.values() if isinstance(output, dict) else output
        flat_out = back.values() if isinstance(back, dict) else back
        if isinstance(output, torch.Tensor):
            flat_in, flat_out = [output], [back]
        for before, after in zip(flat_in, flat_out, strict=True):
            if isinstance(before, torch.Tensor):
                assert after.dtype == before.dtype and after.shape == before.shape
                assert torch.equal(after.view(torch.uint8), before.contiguous().view(torch.uint8))
            else:
                assert after == before
        assert type(back) is type(output)


def test_entries_are_drawn_distinct_and_retired_after_their_uses(tmp_path):
    suite = rms_smoke_suite()
    environment = collect_environment("cpu")
    settings = small_settings(tmp_path / "pool")
    report = fill(settings, suite, environment)
    assert report["written"] == 6 and not report["refused"]
    pool = ReferencePool(settings, environment=environment).open()
    shape = pool_shape(suite)
    folder = pool.folder(suite.content_hash, shape)
    assert (os.stat(settings.directory).st_mode & 0o777) == 0o700
    seen: dict[str, int] = {}
    plans = 0
    while (plan := pool.draw(suite.content_hash, shape)) is not None:
        plans += 1
        entries = [slot["entry"] for slot in plan]
        assert len(entries) == 3 and len(set(entries)) == 3  # 3 trials, distinct entries
        for entry in entries:
            seen[entry] = seen.get(entry, 0) + 1
        pool.release(suite.content_hash, [shape])
    assert max(seen.values()) == 2  # never more than `uses`
    # 12 uses over 6 entries, 3 a draw; it stops once fewer than 3 entries are live.
    assert plans in (3, 4) and sum(seen.values()) == 3 * plans
    live = pool.state(suite.content_hash, shape)["entries"]
    assert len(live) < 3 and all(entry["uses"] < 2 for entry in live.values())
    assert {p.stem for p in folder.glob("*.bin")} == set(live)  # retired files removed
    assert pool.needs_fill(suite.content_hash, [shape]) == [shape]
    assert fill(settings, suite, environment)["written"] == 6 - len(live)  # topped up
    fresh = set(pool.state(suite.content_hash, shape)["entries"]) - set(live)
    assert len(fresh) == 6 - len(live) and fresh.isdisjoint(seen)


def test_a_fresh_trial_keeps_a_one_off_seed(tmp_path):
    suite = rms_smoke_suite()
    environment = collect_environment("cpu")
    settings = small_settings(tmp_path / "pool", fresh_trials=1)
    fill(settings, suite, environment)
    pool = ReferencePool(settings, environment=environment)
    plan = pool.draw(suite.content_hash, pool_shape(suite))
    assert plan is not None and len(plan) == 3
    assert sum(slot is None for slot in plan) == 1


def test_a_version_change_ignores_old_entries(tmp_path):
    suite = rms_smoke_suite()
    environment = collect_environment("cpu")
    settings = small_settings(tmp_path / "pool")
    fill(settings, suite, environment)
    shape = pool_shape(suite)
    old = ReferencePool(settings, environment=environment)
    assert old.live(suite.content_hash, shape) == 6
    for field, value in (("torch", "9.9.9"), ("harness_version", "0.0.1"), ("device_name", "X")):
        newer = ReferencePool(settings, environment={**environment, field: value})
        assert newer.root != old.root
        assert newer.live(suite.content_hash, shape) == 0
        assert newer.draw(suite.content_hash, shape) is None
        assert newer.needs_fill(suite.content_hash, [shape]) == [shape]


def test_a_shape_over_the_entry_limit_is_not_pooled(tmp_path):
    suite = rms_smoke_suite()
    environment = collect_environment("cpu")
    settings = small_settings(tmp_path / "pool", entry_max_bytes=64)
    report = fill(settings, suite, environment)
    assert report["written"] == 0 and "entry limit" in report["refused"]["rms_norm/smoke-0"]
    pool = ReferencePool(settings, environment=environment)
    assert pool.draw(suite.content_hash, pool_shape(suite)) is None
    assert pool.needs_fill(suite.content_hash, [pool_shape(suite)]) == []


def test_a_reference_quicker_than_a_fetch_is_not_pooled(tmp_path):
    suite = rms_smoke_suite()
    environment = collect_environment("cpu")
    settings = small_settings(tmp_path / "pool", min_saving_s=10.0)
    report = fill(settings, suite, environment)
    assert report["written"] == 0 and "expected to take" in report["refused"]["rms_norm/smoke-0"]
    assert 0 < pool_state(settings, suite)["reference_s"] < 10.0
    pool = ReferencePool(settings, environment=environment)
    folder = pool.folder(suite.content_hash, pool_shape(suite))
    assert not list(folder.glob("*.bin"))  # what the measurement computed is not kept
    assert pool.draw(suite.content_hash, pool_shape(suite)) is None
    assert pool.needs_fill(suite.content_hash, [pool_shape(suite)]) == []


def _served_check(
    settings: PoolSettings, suite: Suite, candidate: Any
) -> tuple[Any, dict[str, Any]]:
    """check_shape with its pooled outputs served by the runner's server over real pipes."""
    environment = collect_environment("cpu")
    pool = ReferencePool(settings, environment=environment)
    shape = pool_shape(suite)
    plan = pool.draw(suite.content_hash, shape)
    assert plan is not None
    server = pool.server(suite.content_hash, {shape.shape_id: (shape, plan)})
    reference_read, reference_write = os.pipe()

    def request(message: dict[str, Any]) -> None:
        # What the runner does with the child's signed frame (evaluator.runner._follow).
        worker = threading.Thread(target=server.serve, args=(reference_write, message))
        worker.start()
        requests.append(worker)

    requests: list[threading.Thread] = []
    client = PoolClient(reference_read, request)
    spec = get_operator("rms_norm")
    record: dict[str, Any] = {"pooled": 0, "recomputed": []}
    try:
        result = check_shape(
            spec=spec,
            reference=lambda **inputs: spec.build_reference(shape.init_kwargs)(**inputs),
            candidate=candidate,
            shape_id=shape.shape_id,
            input_kwargs=shape.input_kwargs,
            device=torch.device("cpu"),
            run_seed=1,
            pool_plan=plan,
            fetch_reference=lambda shape_id, entry: client.fetch(shape_id, entry, "cpu"),
            pool_record=record,
        )
    finally:
        for worker in requests:
            worker.join()
        os.close(reference_read)
        os.close(reference_write)
    return result, record


def test_a_corrupt_entry_is_detected_and_recomputed(tmp_path):
    suite = rms_smoke_suite()
    settings = small_settings(tmp_path / "pool", entries=3, uses=1, low_water=3)
    fill(settings, suite, collect_environment("cpu"))
    pool = ReferencePool(settings, environment=collect_environment("cpu"))
    folder = pool.folder(suite.content_hash, pool_shape(suite))
    for path in folder.glob("*.bin"):
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 0x40  # one flipped bit: a different output
        path.write_bytes(bytes(data))
    reference = get_operator("rms_norm").build_reference({})
    result, record = _served_check(settings, suite, lambda **inputs: reference(**inputs))
    assert result.ok, result.error  # compared with the recomputed reference
    assert record["pooled"] == 0 and len(record["recomputed"]) == 3
    assert all("SHA-256" in reason for reason in record["recomputed"])


def test_pooled_trials_compare_with_the_stored_output(tmp_path):
    suite = rms_smoke_suite()
    settings = small_settings(tmp_path / "pool", entries=3, uses=1, low_water=3)
    fill(settings, suite, collect_environment("cpu"))
    reference = get_operator("rms_norm").build_reference({})
    result, record = _served_check(settings, suite, lambda **inputs: reference(**inputs))
    assert result.ok and result.trials == 3 and record == {"pooled": 3, "recomputed": []}
    fill(settings, suite, collect_environment("cpu"))
    result, record = _served_check(settings, suite, lambda **inputs: reference(**inputs) * 1.05)
    assert not result.ok and "outside" in result.error and record["pooled"] == 1


# --------------------------------------------------------------------------- whole runs

WRONG_RMS_NORM = """
import torch
from rms_norm_honest import Model as Honest


class Model(Honest):
    def forward(self, x, weight):
        return super().forward(x, weight * 1.1)
"""


def _run(bundle: Path, tmp_path: Path, name: str, pool: PoolSettings | None) -> dict[str, Any]:
    return run_bundle(
        bundle_path=bundle,
        suite=rms_smoke_suite(),
        hardware="cpu-dev",
        device="cpu",
        shape_set="smoke",
        time_budget_s=0.05,
        log_dir=tmp_path / f"logs-{name}",
        reference_pool=pool,
    )


def _verdict(results: dict[str, Any]) -> tuple[Any, ...]:
    (entry,) = results["operators"]
    (shape,) = entry["shapes"]
    return entry["verdict"], shape["status"], tuple(shape["codes"]), entry["score"] > 0


@pytest.mark.slow
def test_pooled_runs_give_the_unpooled_verdicts(tmp_path):
    wrong = write_tree(
        tmp_path / "wrong",
        {
            "rms_norm_honest.py": (TRITON_BASELINE / "rms_norm.py").read_text(),
            "rms_norm.py": WRONG_RMS_NORM,
        },
    )
    settings = PoolSettings(
        directory=str(tmp_path / "pool"), entries=8, low_water=4, min_saving_s=0.0
    )
    bundles = {
        "honest": TRITON_BASELINE,
        "wrong": wrong,
        "output_cache": EXPLOITS / "output_cache",
    }
    expected = {"honest": "pass", "wrong": "incorrect", "output_cache": "incorrect"}
    for name, bundle in bundles.items():
        plain = _run(bundle, tmp_path, f"{name}-plain", None)
        pooled = _run(bundle, tmp_path, f"{name}-pooled", settings)
        assert _verdict(pooled) == _verdict(plain), name
        assert _verdict(pooled)[1] == expected[name], (name, pooled["operators"][0]["shapes"])
        (shape,) = pooled["operators"][0]["shapes"]
        assert shape["reference_pool"]["planned"] == 2  # 3 trials, one of them fresh
        if name == "honest":
            assert shape["reference_pool"]["pooled"] == 2
        assert plain["operators"][0]["shapes"][0]["reference_pool"] is None
    summary = pooled["environment"]["reference_pool"]
    assert summary["entries"] == 8 and summary["shapes_to_fill"] == 0  # filled by the first


@pytest.mark.slow
def test_a_tampered_entry_is_recomputed_in_a_run(tmp_path):
    settings = PoolSettings(
        directory=str(tmp_path / "pool"),
        entries=3,
        uses=1,
        low_water=3,
        fresh_trials=0,
        min_saving_s=0.0,
    )
    first = _run(TRITON_BASELINE, tmp_path, "fill", settings)  # fills at first use
    assert first["environment"]["reference_pool"]["entries_written"] == 3
    assert first["operators"][0]["shapes"][0]["reference_pool"]["pooled"] == 3
    suite = rms_smoke_suite()
    fill(settings, suite, collect_environment("cpu"))
    folder = ReferencePool(settings, environment=collect_environment("cpu")).folder(
        suite.content_hash, pool_shape(suite)
    )
    victim = sorted(folder.glob("*.bin"))[0]
    victim.write_bytes(victim.read_bytes()[:-2] + b"\0\0")
    results = _run(TRITON_BASELINE, tmp_path, "tampered", settings)
    (shape,) = results["operators"][0]["shapes"]
    assert shape["status"] == "pass", shape["error"]
    assert shape["reference_pool"]["pooled"] == 2
    (reason,) = shape["reference_pool"]["recomputed"]
    assert "SHA-256" in reason


READ_POOL = """
import json
from pathlib import Path

_paths = json.loads((Path(__file__).parent / "target.json").read_text())
_read, _errors = [], []
for _path in _paths:
    try:
        _read.append(Path(_path).read_bytes()[:8].hex() if Path(_path).is_file()
                     else sorted(p.name for p in Path(_path).iterdir()))
    except OSError as exc:
        _errors.append(type(exc).__name__)
raise RuntimeError(f"read={_read!r} errors={_errors!r}")


class Model:  # never reached: the import above fails first
    pass
"""


@root_only
@pytest.mark.slow
def test_the_sandboxed_child_cannot_read_the_pool(tmp_path):
    # Inside the checkout, which the child sees (read-only, for the evaluator's code): not
    # under /tmp, which every child has hidden anyway.
    directory = REPO / f".reference-pool-test-{os.getpid()}"
    settings = PoolSettings(directory=str(directory), entries=3, low_water=3, min_saving_s=0.0)
    suite = rms_smoke_suite()
    try:
        fill(settings, suite, collect_environment("cpu"))
        folder = ReferencePool(settings, environment=collect_environment("cpu")).folder(
            suite.content_hash, pool_shape(suite)
        )
        entry = sorted(folder.glob("*.bin"))[0]
        targets = [settings.directory, str(folder), str(entry)]
        bundle = write_tree(
            tmp_path / "reader", {"rms_norm.py": READ_POOL, "target.json": json.dumps(targets)}
        )
        results = _run(bundle, tmp_path, "reader", settings)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    entry_result = results["operators"][0]
    assert entry_result["status"] == "compile_error"
    # The pool's folder is an empty tmpfs in the child (hidden), its inside unreachable.
    assert "read=[[]]" in entry_result["error"], entry_result["error"]
    assert "errors=['FileNotFoundError', 'FileNotFoundError']" in entry_result["error"]
