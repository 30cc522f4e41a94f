"""The worker's cache of eager reference timings (evaluator/reference_timings.py).

The refresh rule and the key on the cache alone; the child's side in process (a cached
shape makes no timed reference call: counted); the real runner and sandboxed child for a
miss then a hit across two runs, and for the folder the child cannot reach.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from evaluator import measure
from evaluator.environment import collect_environment
from evaluator.operators import get_operator
from evaluator.reference_timings import ReferenceTimings, TimingCacheSettings
from evaluator.runner import run_bundle
from evaluator.suite import Suite, load_suite

from .conftest import REPO, TRITON_BASELINE, write_tree
from .test_reference_pool import READ_POOL

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="the sandbox's user switch needs root")

SUITE_HASH = "sha256:" + "ab" * 32
ENVIRONMENT = {
    "device": "cuda:0",
    "device_name": "NVIDIA H200",
    "driver": "570.86",
    "torch": "2.11.0",
    "triton": "3.6.0",
    "python": "3.12.3",
    "harness_version": "0.3.1",
}


def rms_smoke_suite() -> Suite:
    """The v0.1 suite cut down to rms_norm's first smoke shape."""
    suite = load_suite("atrex-bench-v0.1").restrict(["rms_norm"])
    return replace(suite, shapes=tuple(s for s in suite.shapes if s.shape_id == "smoke-0"))


SHAPE = rms_smoke_suite().shapes[0]


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def cache(
    directory: Path,
    environment: dict[str, Any] | None = None,
    *,
    draw: float = 0.99,
    clock: Clock | None = None,
    **rule: Any,
) -> ReferenceTimings:
    settings = TimingCacheSettings(directory=str(directory), **rule)
    return ReferenceTimings(
        settings,
        environment=environment or ENVIRONMENT,
        draw=lambda: draw,
        clock=clock or Clock(),
    ).open()


def test_a_stored_figure_is_served_and_counts_its_uses(tmp_path):
    timings = cache(tmp_path / "t")
    first = timings.lookup(SUITE_HASH, "rms_norm", SHAPE)
    assert first.figure is None and first.why == "new"
    assert timings.store(SUITE_HASH, "rms_norm", SHAPE, time_s=2e-5, spread_s=1e-7, reps=40)
    hit = timings.lookup(SUITE_HASH, "rms_norm", SHAPE)
    assert hit.figure == {
        "time_s": 2e-5,
        "spread_s": 1e-7,
        "reps": 40,
        "age_s": 0.0,
        "uses": 1,
        "measurements": 1,
    }
    assert timings.lookup(SUITE_HASH, "rms_norm", SHAPE).figure["uses"] == 2
    assert timings.counts == {"hits": 2, "misses": 1, "stored": 1}
    assert not timings.store(SUITE_HASH, "rms_norm", SHAPE, time_s=float("nan"))


@pytest.mark.parametrize(
    "change",
    [
        {"torch": "2.12.0"},
        {"triton": "3.7.0"},
        {"harness_version": "0.3.2"},
        {"device_name": "NVIDIA H100 80GB HBM3"},
        {"driver": "575.10"},
        {"device": "cpu"},
    ],
)
def test_a_figure_measured_under_other_versions_or_another_gpu_is_never_read(tmp_path, change):
    cache(tmp_path / "t").store(SUITE_HASH, "rms_norm", SHAPE, time_s=2e-5)
    assert cache(tmp_path / "t").lookup(SUITE_HASH, "rms_norm", SHAPE).figure is not None
    other = cache(tmp_path / "t", {**ENVIRONMENT, **change}).lookup(SUITE_HASH, "rms_norm", SHAPE)
    assert other.figure is None and other.why == "new"


def test_another_suite_shape_or_budget_misses(tmp_path):
    cache(tmp_path / "t").store(SUITE_HASH, "rms_norm", SHAPE, time_s=2e-5)
    timings = cache(tmp_path / "t")
    assert timings.lookup("sha256:" + "cd" * 32, "rms_norm", SHAPE).why == "new"
    assert timings.lookup(SUITE_HASH, "layer_norm", SHAPE).why == "new"
    changed = replace(SHAPE, input_kwargs={**SHAPE.input_kwargs, "hidden": 4096})
    assert timings.lookup(SUITE_HASH, "rms_norm", changed).why == "new"
    budgeted = ReferenceTimings(
        TimingCacheSettings(directory=str(tmp_path / "t")),
        environment=ENVIRONMENT,
        time_budget_s=0.5,
        draw=lambda: 0.99,
    ).open()
    assert budgeted.lookup(SUITE_HASH, "rms_norm", SHAPE).why == "new"


def test_a_figure_is_timed_again_after_its_uses_its_age_or_a_refresh_draw(tmp_path):
    clock = Clock()
    timings = cache(tmp_path / "t", clock=clock, max_uses=2, max_age_s=3600)
    timings.store(SUITE_HASH, "rms_norm", SHAPE, time_s=1e-5)
    assert timings.lookup(SUITE_HASH, "rms_norm", SHAPE).figure is not None
    assert timings.lookup(SUITE_HASH, "rms_norm", SHAPE).figure is not None
    assert timings.lookup(SUITE_HASH, "rms_norm", SHAPE).why == "uses"
    timings.store(SUITE_HASH, "rms_norm", SHAPE, time_s=1e-5)  # the miss's measurement
    assert timings.lookup(SUITE_HASH, "rms_norm", SHAPE).figure["uses"] == 1
    clock.now += 3601
    assert timings.lookup(SUITE_HASH, "rms_norm", SHAPE).why == "age"
    drawn = cache(tmp_path / "t", clock=clock, draw=0.01, max_age_s=1e9)
    assert drawn.lookup(SUITE_HASH, "rms_norm", SHAPE).why == "refresh"
    never = cache(tmp_path / "t", clock=clock, draw=0.0, refresh_probability=0.0, max_age_s=1e9)
    assert never.lookup(SUITE_HASH, "rms_norm", SHAPE).figure is not None


def test_the_figure_is_the_median_of_the_last_measurements(tmp_path):
    timings = cache(tmp_path / "t", keep=5)
    # An outlier (a busy host, or a candidate slowing the reference it ran beside), then
    # five ordinary measurements: the first drops out, and one outlier never moves a median
    # of three or more far.
    for time_s in (9e-5, 2.0e-5, 2.2e-5, 9e-5, 2.1e-5, 2.3e-5):
        timings.store(SUITE_HASH, "rms_norm", SHAPE, time_s=time_s)
    entry = timings.entry(SUITE_HASH, "rms_norm", SHAPE)
    assert [m["time_s"] for m in entry["measurements"]] == [2.0e-5, 2.2e-5, 9e-5, 2.1e-5, 2.3e-5]
    figure = timings.lookup(SUITE_HASH, "rms_norm", SHAPE).figure
    assert figure["time_s"] == 2.2e-5 and figure["measurements"] == 5


def test_the_folder_is_private_to_the_harness_user(tmp_path):
    timings = cache(tmp_path / "t")
    timings.store(SUITE_HASH, "rms_norm", SHAPE, time_s=2e-5)
    for folder in (tmp_path / "t", timings.root):
        assert (os.stat(folder).st_mode & 0o777) == 0o700
    assert (os.stat(timings.root / "timings.json").st_mode & 0o777) == 0o600
    assert json.loads((timings.root / "key.json").read_text())["device_name"] == "NVIDIA H200"


@root_only
def test_a_folder_of_another_user_is_refused_and_nobody_cannot_read_ours(tmp_path):
    foreign = tmp_path / "foreign"
    foreign.mkdir(mode=0o700)
    os.chown(foreign, 65534, 65534)
    with pytest.raises(PermissionError, match="reference timings folder"):
        cache(foreign)
    timings = cache(tmp_path / "t")
    timings.store(SUITE_HASH, "rms_norm", SHAPE, time_s=2e-5)
    os.chmod(tmp_path, 0o755)  # so that only the cache's own mode stands in the way
    probe = (
        "import os, sys\n"
        "os.setgid(65534); os.setuid(65534)\n"
        "for path in sys.argv[1:]:\n"
        "    try:\n"
        "        open(path, 'rb').read() if os.path.isfile(path) else os.listdir(path)\n"
        "        print('read', path)\n"
        "    except PermissionError:\n"
        "        print('refused')\n"
    )
    paths = [str(tmp_path / "t"), str(timings.root / "timings.json")]
    done = subprocess.run(
        [sys.executable, "-c", probe, *paths], capture_output=True, text=True, check=True
    )
    assert done.stdout.split() == ["refused", "refused"], done.stdout


# --------------------------------------------------------------------------- the child's side


class CountingSpec:
    """The operator's spec, counting its reference modules' calls."""

    def __init__(self, spec: Any) -> None:
        self._spec = spec
        self.calls = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._spec, name)

    def build_reference(self, init_kwargs: Any) -> Any:
        module = self._spec.build_reference(init_kwargs)
        forward = module.forward

        def counted(**inputs: Any) -> Any:
            self.calls += 1
            return forward(**inputs)

        module.forward = counted
        return module


def _measure_in_process(monkeypatch, tmp_path, shape: dict[str, Any]) -> tuple[dict, int, int]:
    """The record, the reference's calls and the eager baseline's calls of one shape."""
    from evaluator import baselines

    spec = CountingSpec(get_operator("rms_norm"))
    monkeypatch.setattr(measure, "operator_spec", lambda job: spec)
    baseline_calls = [0]
    real_baseline = baselines.get_baseline("rms_norm")

    class CountingBaseline(real_baseline):  # type: ignore[misc, valid-type]
        def forward(self, *args: Any, **kwargs: Any) -> Any:
            baseline_calls[0] += 1
            return super().forward(*args, **kwargs)

    monkeypatch.setitem(baselines.BASELINES, "rms_norm", CountingBaseline)
    reference_class = type(get_operator("rms_norm").build_reference(SHAPE.init_kwargs or {}))
    job = {
        "operator": "rms_norm",
        "device": "cpu",
        "seed": 7,
        "time_budget_s": 0.02,
        "threshold_own_share": None,  # PyTorch as the candidate: timed all the same
        "bundle_dir": str(tmp_path),
    }
    record = measure.evaluate_shape(job=job, shape=shape, model_class=reference_class)
    assert record["status"] == "pass", record
    return record, spec.calls, baseline_calls[0]


def test_a_cached_shape_makes_no_timed_eager_call(monkeypatch, tmp_path):
    shape = {
        "shape_id": SHAPE.shape_id,
        "init_kwargs": SHAPE.init_kwargs,
        "input_kwargs": SHAPE.input_kwargs,
    }
    timed, timed_reference_calls, timed_baseline_calls = _measure_in_process(
        monkeypatch, tmp_path, shape
    )
    cached_figure = {"time_s": 3.5e-5, "spread_s": 1e-7, "reps": 50}
    cached, cached_reference_calls, cached_baseline_calls = _measure_in_process(
        monkeypatch, tmp_path, {**shape, "reference_time": cached_figure}
    )
    assert timed["reference_time_source"] == "measured" and timed["eager_timed"] == "baseline"
    assert timed["reference_reps"] >= 10
    # The eager figure is the baseline's: the reference is called only by the checks (the
    # correctness trials, the first timed call's check and the last two's), with or
    # without the cache.
    trials = get_operator("rms_norm").policy.trials
    assert timed_reference_calls == cached_reference_calls == trials + 1 + 2
    # The timer's warm-up and calibration calls vary with the machine's load (one fewer
    # seen under load 10): at least its reps, and a few calls more at most; none cached.
    assert timed["reference_reps"] <= timed_baseline_calls <= timed["reference_reps"] + 4
    assert cached_baseline_calls == 0
    assert cached["reference_time_source"] == "cache"
    assert cached["reference_time_s"] == 3.5e-5 and cached["reference_reps"] == 50
    assert "timed_reference" in timed["wall_s"] and "timed_reference" not in cached["wall_s"]
    assert cached["time_s"] > 0  # the candidate is timed as before


# --------------------------------------------------------------------------- whole runs


def _run(tmp_path: Path, name: str, settings: TimingCacheSettings | None, bundle=TRITON_BASELINE):
    return run_bundle(
        bundle_path=bundle,
        suite=rms_smoke_suite(),
        hardware="cpu-dev",
        device="cpu",
        shape_set="smoke",
        time_budget_s=0.05,
        log_dir=tmp_path / f"logs-{name}",
        reference_timings=settings,
    )


@pytest.mark.slow
def test_a_second_run_takes_the_first_runs_reference_time(tmp_path):
    settings = TimingCacheSettings(directory=str(tmp_path / "timings"), refresh_probability=0.0)
    first = _run(tmp_path, "first", settings)
    second = _run(tmp_path, "second", settings)
    (miss,) = first["operators"][0]["shapes"]
    (hit,) = second["operators"][0]["shapes"]
    assert miss["status"] == hit["status"] == "pass", (miss["error"], hit["error"])
    assert miss["reference_time_source"] == "measured"
    assert miss["reference_cache"] == {"hit": False, "why": "new"}
    assert miss["wall_s"]["timed_reference"] > 0
    assert hit["reference_time_source"] == "cache"
    assert hit["reference_cache"]["hit"] and hit["reference_cache"]["uses"] == 1
    assert hit["reference_cache"]["measurements"] == 1
    assert hit["reference_time_ms"] == miss["reference_time_ms"]
    assert "timed_reference" not in hit["wall_s"]  # the child timed no reference
    assert hit["speedup"] == pytest.approx(hit["reference_time_ms"] / hit["time_ms"])
    assert first["environment"]["reference_timings"]["stored"] == 1
    assert second["environment"]["reference_timings"]["hits"] == 1
    plain = _run(tmp_path, "plain", None)
    (shape,) = plain["operators"][0]["shapes"]
    assert shape["reference_time_source"] == "measured" and shape["reference_cache"] is None
    assert "reference_timings" not in plain["environment"]


@pytest.mark.slow
def test_a_wrong_operator_stores_no_figure(tmp_path):
    wrong = write_tree(
        tmp_path / "wrong",
        {
            "rms_norm_honest.py": (TRITON_BASELINE / "rms_norm.py").read_text(),
            "rms_norm.py": "from rms_norm_honest import Model as Honest\n\n\n"
            "class Model(Honest):\n"
            "    def forward(self, x, weight):\n"
            "        return super().forward(x, weight * 1.1)\n",
        },
    )
    settings = TimingCacheSettings(directory=str(tmp_path / "timings"))
    results = _run(tmp_path, "wrong", settings, bundle=wrong)
    assert results["operators"][0]["shapes"][0]["status"] == "incorrect"
    assert results["environment"]["reference_timings"]["stored"] == 0


@root_only
@pytest.mark.slow
def test_the_sandboxed_child_cannot_read_the_timings(tmp_path):
    # Inside the checkout, which the child sees (read-only, for the evaluator's code): not
    # under /tmp, which every child has hidden anyway.
    directory = REPO / f".reference-timings-test-{os.getpid()}"
    settings = TimingCacheSettings(directory=str(directory))
    try:
        timings = ReferenceTimings(settings, environment=collect_environment("cpu")).open()
        timings.store(rms_smoke_suite().content_hash, "rms_norm", SHAPE, time_s=2e-5)
        targets = [settings.directory, str(timings.root / "timings.json")]
        bundle = write_tree(
            tmp_path / "reader", {"rms_norm.py": READ_POOL, "target.json": json.dumps(targets)}
        )
        results = _run(tmp_path, "reader", settings, bundle=bundle)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    entry = results["operators"][0]
    assert entry["status"] == "compile_error"
    # The folder is an empty tmpfs in the child (hidden), its inside unreachable.
    assert "read=[[]]" in entry["error"], entry["error"]
    assert "errors=['FileNotFoundError']" in entry["error"]


def test_the_cache_is_off_unless_a_folder_is_given(tmp_path):
    from evaluator.cli import build_parser, timings_settings

    parser = build_parser()
    assert timings_settings(parser.parse_args(["run", "b.zip", "--suite", "s"])) is None
    args = parser.parse_args(
        [
            "run",
            "b.zip",
            "--suite",
            "s",
            "--reference-timings",
            str(tmp_path),
            "--reference-timings-uses",
            "5",
        ]
    )
    settings = timings_settings(args)
    assert settings.directory == str(tmp_path) and settings.max_uses == 5
