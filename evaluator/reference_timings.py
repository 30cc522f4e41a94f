"""A per-worker cache of the PyTorch eager reference's timings (the "speedup over eager").

Every passing shape of every submission timed the eager reference after the candidate
(``evaluator.measure._time_shape``), although that figure depends only on the shape, the
worker's GPU and its torch, triton and harness versions: 23.5 of 328 s of a 30-operator
run on the H200. With a cache folder (``--reference-timings DIR``) the runner looks each
shape up before its operator's child starts; a hit goes to the child in its job (the shape's
``reference_time``) and the child skips the timed reference calls; a miss is timed as
before, and the runner stores the child's figure once the operator is done.

The refresh rule (docs/decisions.md 15 gives the argument):

* a figure is the **median of the last ``keep`` (5) measurements** of the shape, so one
  slow measurement (a busy host, or a candidate that slowed the reference it ran beside)
  moves it little once there are three;
* it is served at most **``max_uses`` (20) times** after its newest measurement, never when
  that measurement is older than **``max_age_s`` (7 days)**, and each lookup is a miss with
  probability **``refresh_probability`` (0.05)**: a miss times the reference again and adds
  the measurement, so the figure follows a driver's or a clock's drift;
* figures live under a key of the harness, torch, triton and Python versions, the device
  type, GPU name and driver, the operators' source digest, the per-shape time budget and the
  timing rule (``evaluator.measurement_policy``: an agent round's lighter rule and a full
  evaluation's never share a figure), and within it by suite content hash, operator and
  shape (id and kwargs): a figure measured under anything else is never read (a new key
  starts empty);
* only a shape that passed, in an operator that was not held for review or tampered with,
  is stored; the runner, not the child, is the one that writes, and the figure a shape's
  entry reports on a hit is the runner's own copy, not the child's echo of it.

The folder is 0700, owned by the harness's user, and hidden from every child by the sandbox
(as the reference pool's, ``evaluator.reference_pool``). Stdlib only: the runner's side.
"""

from __future__ import annotations

import json
import math
import secrets
import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from evaluator.measurement_policy import MeasurementPolicy
from evaluator.reference_pool import (
    locked,
    operators_digest,
    private_folder,
    safe_name,
    shape_folder_name,
    short_digest,
)

KEEP = 5
MAX_USES = 20
MAX_AGE_S = 7 * 24 * 3600.0
REFRESH_PROBABILITY = 0.05
"""Defaults; docs/decisions.md 15 gives the reasoning."""

INDEX = "timings.json"
FOLDER_NAME = "the reference timings folder"


@dataclass(frozen=True)
class TimingCacheSettings:
    """Where the cache lives and its refresh rule (see the module docstring)."""

    directory: str
    keep: int = KEEP
    max_uses: int = MAX_USES
    max_age_s: float = MAX_AGE_S
    refresh_probability: float = REFRESH_PROBABILITY

    def __post_init__(self) -> None:
        if not self.directory:
            raise ValueError("the reference timings cache needs a folder (--reference-timings)")
        if self.keep < 1 or self.max_uses < 1 or self.max_age_s <= 0:
            raise ValueError("the reference timings cache needs keep, uses and age above 0")
        if not 0.0 <= self.refresh_probability <= 1.0:
            raise ValueError("the reference timings' refresh probability must be in 0..1")

    def to_dict(self) -> dict[str, Any]:
        """The rule, for the environment digest (the folder itself is not named)."""
        data = asdict(self)
        del data["directory"]
        return data


def timing_key(
    environment: Mapping[str, Any],
    *,
    time_budget_s: float | None,
    timing_rule: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """What an eager reference's time depends on besides its shape (``environment`` is
    ``evaluator.environment.collect_environment``'s block; ``timing_rule`` the run's
    ``MeasurementPolicy.timing_rule()``, the full policy's when None)."""
    rule = dict(timing_rule or MeasurementPolicy().timing_rule())
    return {
        "harness_version": environment.get("harness_version"),
        "torch": environment.get("torch"),
        "triton": environment.get("triton"),
        "python": environment.get("python"),
        "device": str(environment.get("device", "")).split(":")[0],
        "device_name": environment.get("device_name"),
        "driver": environment.get("driver"),
        "operators": operators_digest(),
        "time_budget_s": time_budget_s,
        "min_reps": rule["min_reps"],
        "target_rel_se": rule["target_rel_se"],
    }


@dataclass(frozen=True)
class TimingLookup:
    """One shape's lookup: the cached figure (``time_s``, ``spread_s``, ``reps``, ``age_s``,
    ``uses``, ``measurements``) or None, and why it missed (``new``, ``uses``, ``age``,
    ``refresh``)."""

    figure: dict[str, Any] | None
    why: str | None = None


def _finite(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) and number > 0 else None


class ReferenceTimings:
    """The eager reference timings of one worker under one version key (the runner's)."""

    def __init__(
        self,
        settings: TimingCacheSettings,
        *,
        environment: Mapping[str, Any],
        time_budget_s: float | None = None,
        timing_rule: Mapping[str, Any] | None = None,
        draw: Callable[[], float] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self.key = timing_key(environment, time_budget_s=time_budget_s, timing_rule=timing_rule)
        self.top = Path(settings.directory)
        self.root = self.top / short_digest(self.key)
        self._draw = draw or secrets.SystemRandom().random
        self._clock = clock
        self.counts = {"hits": 0, "misses": 0, "stored": 0}

    def open(self) -> ReferenceTimings:
        """Create the folders (0700) and write the key beside the figures."""
        private_folder(self.top, FOLDER_NAME)
        private_folder(self.root, FOLDER_NAME)
        key_file = self.root / "key.json"
        if not key_file.exists():
            key_file.write_text(json.dumps(self.key, sort_keys=True, indent=1), encoding="utf-8")
        return self

    def digest(self) -> dict[str, Any]:
        """The environment digest's block: the rule, the key's digest, this run's counts."""
        return {**self.settings.to_dict(), "key": self.root.name, **self.counts}

    @staticmethod
    def _name(suite_hash: str, operator: str, shape: Any) -> str:
        suite_part = safe_name(suite_hash.removeprefix("sha256:")[:16])
        folder = shape_folder_name(shape.shape_id, shape.init_kwargs, shape.input_kwargs)
        return f"{suite_part}/{safe_name(operator)}/{folder}"

    def _read(self) -> dict[str, Any]:
        try:
            data = json.loads((self.root / INDEX).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def _write(self, data: Mapping[str, Any]) -> None:
        temporary = self.root / f".{INDEX}.tmp"
        temporary.write_text(json.dumps(data, sort_keys=True), encoding="utf-8")
        temporary.chmod(0o600)
        temporary.replace(self.root / INDEX)

    def entry(self, suite_hash: str, operator: str, shape: Any) -> dict[str, Any] | None:
        """The stored entry of a shape (``measurements``: time_s, spread_s, reps, at;
        ``uses`` since the newest), or None."""
        return self._read().get(self._name(suite_hash, operator, shape))

    def lookup(self, suite_hash: str, operator: str, shape: Any) -> TimingLookup:
        """The shape's cached figure, counted as one use, or a miss and why."""
        settings = self.settings
        name = self._name(suite_hash, operator, shape)
        with locked(self.root):
            data = self._read()
            entry = data.get(name)
            measurements = (entry or {}).get("measurements") or []
            if not measurements:
                why = "new"
            elif int(entry.get("uses") or 0) >= settings.max_uses:
                why = "uses"
            elif self._clock() - float(measurements[-1]["at"]) > settings.max_age_s:
                why = "age"
            elif self._draw() < settings.refresh_probability:
                why = "refresh"
            else:
                why = None
            if why is not None:
                self.counts["misses"] += 1
                return TimingLookup(None, why)
            entry["uses"] = int(entry.get("uses") or 0) + 1
            self._write(data)
        self.counts["hits"] += 1
        return TimingLookup(
            {
                "time_s": statistics.median(m["time_s"] for m in measurements),
                "spread_s": statistics.median(m.get("spread_s") or 0.0 for m in measurements),
                "reps": sum(int(m.get("reps") or 0) for m in measurements),
                "age_s": round(self._clock() - float(measurements[-1]["at"]), 1),
                "uses": entry["uses"],
                "measurements": len(measurements),
            }
        )

    def store(
        self,
        suite_hash: str,
        operator: str,
        shape: Any,
        *,
        time_s: Any,
        spread_s: Any = None,
        reps: Any = None,
    ) -> bool:
        """Add one measurement of the shape (the last ``keep`` are kept) and start its use
        count again; False when ``time_s`` is not a positive finite number."""
        measured = _finite(time_s)
        if measured is None:
            return False
        name = self._name(suite_hash, operator, shape)
        with locked(self.root):
            data = self._read()
            entry = data.get(name) or {}
            measurements = list(entry.get("measurements") or [])
            measurements.append(
                {
                    "time_s": measured,
                    "spread_s": _finite(spread_s),
                    "reps": int(reps) if isinstance(reps, int) else None,
                    "at": self._clock(),
                }
            )
            data[name] = {"measurements": measurements[-self.settings.keep :], "uses": 0}
            self._write(data)
        self.counts["stored"] += 1
        return True
