"""The profile-driven search of the example agent, one per (campaign, operator).

Each size bucket (small, medium, large row counts) is its own line of search over the
template's dimensions: a centre configuration, the untried neighbours of that centre
(one dimension one step up or down), the best configuration seen so far. After each
round the per-shape roofline fractions of the feedback are averaged per bucket (weighted;
0 for a shape that did not pass) and credited to the configuration that bucket used. A
better configuration becomes the new centre; a line that fails to improve for ``patience``
rounds in a row, or that runs out of neighbours, is dropped: the search abandons it and
restarts the bucket from the next unused seed, far from the stalled region, keeping the
best configuration found so far for the kernel it sends.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .templates import BUCKETS, Template, bucket_of, rows_of

Config = dict[str, int]


def _key(config: Config) -> tuple[tuple[str, int], ...]:
    return tuple(sorted(config.items()))


@dataclass
class Line:
    """One bucket's search state."""

    centre: Config
    frontier: list[Config] = field(default_factory=list)
    tried: dict[tuple, float] = field(default_factory=dict)
    best: Config | None = None
    best_score: float = -1.0
    centre_score: float = -1.0
    stall: int = 0
    seeds_used: int = 1
    dropped: int = 0


@dataclass
class OperatorSearch:
    template: Template
    patience: int = 2
    lines: dict[str, Line] = field(default_factory=dict)
    # What each round sent: round -> {bucket: config}.
    sent: dict[int, dict[str, Config]] = field(default_factory=dict)
    log: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        seed = dict(self.template.seeds[0])
        for name, _ in BUCKETS:
            self.lines[name] = Line(centre=dict(seed), frontier=self._neighbours(seed))

    def _neighbours(self, config: Config) -> list[Config]:
        found = []
        for name, values in self.template.dimensions.items():
            index = values.index(config[name])
            for step in (1, -1):
                if 0 <= index + step < len(values):
                    found.append({**config, name: values[index + step]})
        return found

    def propose(self, number: int, shapes: list[dict[str, Any]]) -> dict[str, Config]:
        """The configuration per bucket for round ``number``: each bucket that has public
        shapes tries its next candidate; the others keep their best."""
        present = {bucket_of(rows_of(self.template.operator, s["input_kwargs"])) for s in shapes}
        configs = {}
        for name, line in self.lines.items():
            if number == 1 or name not in present:
                configs[name] = dict(line.best or line.centre)
                continue
            candidate = self._next_candidate(name, line)
            configs[name] = candidate
        self.sent[number] = configs
        return configs

    def _next_candidate(self, name: str, line: Line) -> Config:
        while True:
            while line.frontier:
                candidate = line.frontier.pop(0)
                if _key(candidate) not in line.tried:
                    return candidate
            if not self._drop(name, line, "no untried neighbours"):
                return dict(line.best or line.centre)

    def _drop(self, name: str, line: Line, why: str) -> bool:
        """Abandon the bucket's line; restart from the next seed. False when none is left."""
        seeds = self.template.seeds
        while line.seeds_used < len(seeds):
            seed = dict(seeds[line.seeds_used])
            line.seeds_used += 1
            if _key(seed) in line.tried:
                continue
            line.dropped += 1
            self.log.append(
                f"{name}: dropped the line around {line.centre} ({why}); restarting from {seed}"
            )
            line.centre, line.centre_score, line.stall = seed, -1.0, 0
            line.frontier = [seed, *self._neighbours(seed)]
            return True
        return False

    def learn(self, number: int, feedback: dict[str, Any], shapes: list[dict[str, Any]]) -> None:
        """Credit round ``number``'s per-shape figures to the configurations it sent."""
        configs = self.sent.get(number)
        if not configs:
            return
        rows = {
            str(s["shape_id"]): rows_of(self.template.operator, s["input_kwargs"]) for s in shapes
        }
        weights = {str(s["shape_id"]): float(s.get("weight") or 1.0) for s in shapes}
        totals: dict[str, list[float]] = {}
        for result in feedback.get("shapes") or []:
            shape_id = str(result.get("shape_id"))
            if shape_id not in rows:
                continue
            fraction = result.get("roofline_fraction") or 0.0
            score = fraction if result.get("status") == "pass" else 0.0
            entry = totals.setdefault(bucket_of(rows[shape_id]), [0.0, 0.0])
            entry[0] += weights[shape_id] * score
            entry[1] += weights[shape_id]
        for name, (weighted, weight) in totals.items():
            line = self.lines[name]
            config = configs[name]
            score = weighted / weight if weight else 0.0
            line.tried[_key(config)] = score
            if score > line.best_score:
                line.best, line.best_score = dict(config), score
            if score > line.centre_score:
                line.centre, line.centre_score, line.stall = dict(config), score, 0
                line.frontier = self._neighbours(config)
            else:
                line.stall += 1
                if line.stall >= self.patience:
                    self._drop(name, line, f"{line.stall} rounds without improvement")

    def summary(self) -> str:
        parts = []
        for name, line in self.lines.items():
            parts.append(
                f"{name}: best {line.best or line.centre} ({line.best_score:.3g}), "
                f"{len(line.tried)} tried, {line.dropped} dropped"
            )
        return "; ".join(parts)
