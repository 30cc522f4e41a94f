"""The one scoring definition of the portal, used by the evaluator and the website.

Pure stdlib. Definitions (stated for readers in docs/scoring.md):

* **Shape score** s = the shape's roofline fraction (T_sol / T_measured) if its status is
  ``pass``; 0 for every other status (``incorrect``, ``fallback``, ``compile_error``,
  ``runtime_error``, ``timeout``, ``missing``). A correct answer computed by PyTorch
  instead of the submission's own kernels (``fallback``) scores 0.
* **Operator score** = sum(w_i * s_i) / sum(w_i) over the operator's shapes, w_i the
  shape's weight within the operator (0 if the weights sum to 0), unless the operator
  returned a wrong result on any shape (status ``incorrect``, or a ``wrong`` verdict code
  of ``evaluator.verdicts``; a failed validation variant makes every shape incorrect):
  then it is ``incorrect`` as a whole and scores 0. A loud failure (an exception, out of
  memory, a compile error, a timeout) loses only its own shape.
* **Aggregate** = sum(I_op * operator score) / sum(I_op) over the suite's operators, I_op
  the operator's importance; an operator with no result counts 0.
* **Apparent pass rate** = shapes whose output was correct (``pass`` or ``fallback``) /
  all shapes; **real pass rate** = ``pass`` shapes of operators that are not
  ``incorrect`` / all shapes; **fallback rate** = ``fallback`` / all shapes.
* **Pass counts**: apparent (per shape) = shapes whose status is ``pass``; real (per
  operator) = those of them whose operator is not ``incorrect``.
* **Geomean speedup (eager)** = geometric mean of T_eager / T_measured over shapes that
  pass and have a speedup; None when there is none.
* **fast_1** = share of all shapes that pass with a speedup over PyTorch eager above 1
  (shapes of ``incorrect`` operators count as not passing here and in the geomean).
* **Aggregate CI**: a 95% interval from the timing spread. For a passing shape,
  time_spread_ms / time_ms is the relative standard error of its median time; the roofline
  fraction scales as 1/time, so its standard error is fraction * that ratio (first
  order). Assuming shapes independent, var(operator score) = sum((w_i/sum w)^2 var(s_i))
  and var(aggregate) = sum((I_op/sum I)^2 var(operator score)); the interval is
  aggregate +- 1.96 sigma, the lower end clipped at 0. Shapes without a spread add no
  variance.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from evaluator.errors import PlatformError
from evaluator.verdicts import HOLD_CODES, WRONG_CODES, shape_codes

SHAPE_STATUSES: tuple[str, ...] = (
    "pass",
    "incorrect",
    "fallback",
    "compile_error",
    "runtime_error",
    "timeout",
    "missing",
)
FAILURE_STATUSES: tuple[str, ...] = tuple(s for s in SHAPE_STATUSES if s != "pass")
"""Every status whose shape scores 0."""
CORRECT_STATUSES: tuple[str, ...] = ("pass", "fallback")
"""Statuses whose output was correct (fallbacks included): the apparent passes."""
Z_95 = 1.96


def _bad(message: str) -> PlatformError:
    return PlatformError(message, code="platform:bad-results")


def _status(shape: Mapping[str, Any]) -> str:
    status = shape.get("status")
    if status not in SHAPE_STATUSES:
        raise _bad(
            f"Shape {shape.get('shape_id')!r} has status {status!r}; "
            f"known: {', '.join(SHAPE_STATUSES)}."
        )
    return str(status)


def _weight(shape: Mapping[str, Any]) -> float:
    weight = shape.get("weight")
    if isinstance(weight, bool) or not isinstance(weight, int | float):
        raise _bad(f"Shape {shape.get('shape_id')!r} has no numeric weight ({weight!r}).")
    if not math.isfinite(weight) or weight < 0:
        raise _bad(f"Shape {shape.get('shape_id')!r} has weight {weight!r}; it must be >= 0.")
    return float(weight)


def shape_score(*, status: str, roofline_fraction: float | None) -> float:
    """Score of one shape: its roofline fraction if ``status == "pass"``, else 0.0.

    A pass without a fraction, or with a negative or non-finite one, is a harness
    error (PlatformError); so is an unknown status. Fractions above 1 are kept as they
    are (such results are held for review, not clipped here).
    """
    if status not in SHAPE_STATUSES:
        raise _bad(f"Unknown shape status {status!r}; known: {', '.join(SHAPE_STATUSES)}.")
    if status != "pass":
        return 0.0
    if roofline_fraction is None:
        raise _bad("A passing shape must have a roofline fraction.")
    if not math.isfinite(roofline_fraction) or roofline_fraction < 0:
        raise _bad(f"Roofline fraction {roofline_fraction!r} must be finite and >= 0.")
    return float(roofline_fraction)


def _scored(shape: Mapping[str, Any]) -> float:
    return shape_score(status=_status(shape), roofline_fraction=shape.get("roofline_fraction"))


def wrong_shapes(shapes: Sequence[Mapping[str, Any]]) -> list[str]:
    """Ids of the shapes that returned a wrong result (status ``incorrect`` or a ``wrong``
    verdict code): one of them makes the whole operator ``incorrect``."""
    return [
        str(shape.get("shape_id"))
        for shape in shapes
        if _status(shape) == "incorrect" or WRONG_CODES.intersection(shape_codes(shape))
    ]


OPERATOR_VERDICTS: tuple[str, ...] = ("held", "incorrect", "pass", "partial", "fallback", "failed")
"""Per-operator verdicts, most serious first: ``held`` (a sign of deception on a shape: the
submission waits for review), ``incorrect`` (a wrong result on a shape: scores 0),
``pass`` (every shape passes), ``partial`` (some pass, the others failed loudly or fell
back), ``fallback`` (none passes, some were correct through PyTorch), ``failed`` (none)."""


def verdict_of(*, counts: Mapping[str, int], wrong: bool = False, held: bool = False) -> str:
    """The per-operator verdict (``OPERATOR_VERDICTS``): the one rule, for the scoring
    (``operator_verdict``) and for pages that have only counts.

    ``counts``: its shapes per status (other keys, e.g. a page's ``error`` group, count as
    shapes that neither passed nor fell back); ``wrong``: whether a shape returned a wrong
    result beyond its status (a ``wrong`` verdict code; an ``incorrect`` count is one too);
    ``held``: whether a shape carries a sign of deception. ``held`` first, then
    ``incorrect``, ``pass`` (every shape), ``partial`` (some), ``fallback`` (none passed,
    some correct through PyTorch), else ``failed`` (no shape at all included)."""
    total = sum(counts.values())
    passed = counts.get("pass", 0)
    if held:
        return "held"
    if wrong or counts.get("incorrect", 0):
        return "incorrect"
    if total and passed == total:
        return "pass"
    if passed:
        return "partial"
    if counts.get("fallback", 0):
        return "fallback"
    return "failed"


def operator_verdict(shapes: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The per-operator verdict of an operator's shape entries, its score and its counts.

    Keys: verdict (``OPERATOR_VERDICTS``), score (0 when incorrect), shapes_total,
    apparent_passes (shapes whose status is ``pass``), real_passes (the same, 0 when the
    operator is incorrect), wrong_shapes (ids of the shapes with a wrong result) and
    hold_codes (the deception codes found, each once).
    """
    wrong = wrong_shapes(shapes)
    statuses = [_status(shape) for shape in shapes]
    hold = []
    for shape in shapes:
        for code in shape_codes(shape):
            if code in HOLD_CODES and code not in hold:
                hold.append(code)
    passed = statuses.count("pass")
    counts: dict[str, int] = {}
    for status in statuses:
        counts[status] = counts.get(status, 0) + 1
    return {
        "verdict": verdict_of(counts=counts, wrong=bool(wrong), held=bool(hold)),
        "score": 0.0 if wrong else _weighted_score(shapes),
        "shapes_total": len(statuses),
        "apparent_passes": passed,
        "real_passes": 0 if wrong else passed,
        "wrong_shapes": wrong,
        "hold_codes": hold,
    }


def operator_score(shapes: Sequence[Mapping[str, Any]]) -> float:
    """The operator's score: 0.0 if it returned a wrong result on any shape
    (``wrong_shapes``), else the weighted mean shape score sum(w * s) / sum(w) (0.0 when
    the weights sum to 0).

    Each shape is a mapping with "weight", "status" and "roofline_fraction" (the shape
    entries of results.json; "codes" where the harness wrote them).
    """
    if wrong_shapes(shapes):
        for shape in shapes:
            _weight(shape)  # malformed results are refused whatever the verdict
        return 0.0
    return _weighted_score(shapes)


def _weighted_score(shapes: Sequence[Mapping[str, Any]]) -> float:
    total_weight = 0.0
    weighted = 0.0
    for shape in shapes:
        weight = _weight(shape)
        total_weight += weight
        weighted += weight * _scored(shape)
    return weighted / total_weight if total_weight > 0 else 0.0


def aggregate_score(
    *, operator_scores: Mapping[str, float], importance: Mapping[str, float]
) -> float:
    """Importance-weighted mean operator score: sum(I * score) / sum(I) over ``importance``.

    An operator of ``importance`` missing from ``operator_scores`` counts 0; operators
    outside ``importance`` are ignored. 0.0 when the importance sums to 0.
    """
    total = 0.0
    weighted = 0.0
    for slug, weight in importance.items():
        if not math.isfinite(weight) or weight < 0:
            raise _bad(f"Operator {slug!r} has importance {weight!r}; it must be >= 0.")
        total += weight
        weighted += weight * operator_scores.get(slug, 0.0)
    return weighted / total if total > 0 else 0.0


def scores_by_operator(operators: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """Operator score of each entry of a results.json "operators" list, by operator slug."""
    scores: dict[str, float] = {}
    for entry in operators:
        slug = str(entry.get("operator"))
        if slug in scores:
            raise _bad(f"Operator {slug!r} appears twice in the results; merge its shapes first.")
        scores[slug] = operator_score(entry.get("shapes") or [])
    return scores


def _shape_variance(shape: Mapping[str, Any]) -> float:
    """Variance of a passing shape's score from its timing spread (0 if unknown)."""
    if _status(shape) != "pass":
        return 0.0
    time_ms = shape.get("time_ms")
    spread_ms = shape.get("time_spread_ms")
    if time_ms is None or spread_ms is None or time_ms <= 0:
        return 0.0
    sigma = _scored(shape) * (float(spread_ms) / float(time_ms))
    return sigma * sigma


def _operator_variance(shapes: Sequence[Mapping[str, Any]]) -> float:
    total_weight = sum(_weight(shape) for shape in shapes)
    if total_weight <= 0 or wrong_shapes(shapes):
        return 0.0
    return sum((_weight(s) / total_weight) ** 2 * _shape_variance(s) for s in shapes)


def aggregate_ci(
    *, operators: Sequence[Mapping[str, Any]], importance: Mapping[str, float]
) -> list[float]:
    """95% interval [low, high] of the aggregate from the shapes' timing spread.

    aggregate +- 1.96 sigma with sigma propagated from each passing shape's relative
    time standard error (see the module docstring); the low end is clipped at 0.
    """
    aggregate = aggregate_score(
        operator_scores=scores_by_operator(operators), importance=importance
    )
    total = sum(importance.values())
    variance = 0.0
    if total > 0:
        for entry in operators:
            share = importance.get(str(entry.get("operator")), 0.0) / total
            variance += share * share * _operator_variance(entry.get("shapes") or [])
    half_width = Z_95 * math.sqrt(variance)
    return [max(0.0, aggregate - half_width), aggregate + half_width]


def _speedup(shape: Mapping[str, Any]) -> float | None:
    speedup = shape.get("speedup")
    if speedup is None or not math.isfinite(speedup) or speedup <= 0:
        return None
    return float(speedup)


def fast_p(*, shapes: Sequence[Mapping[str, Any]], threshold: float) -> float:
    """Share of all ``shapes`` that pass with a speedup over eager above ``threshold``."""
    if not shapes:
        return 0.0
    fast = sum(
        1 for shape in shapes if _status(shape) == "pass" and (_speedup(shape) or 0.0) > threshold
    )
    return fast / len(shapes)


def geomean_speedup(shapes: Sequence[Mapping[str, Any]]) -> float | None:
    """Geometric mean of the speedups of passing shapes that have one; None if none do."""
    logs = [
        math.log(speedup)
        for shape in shapes
        if _status(shape) == "pass" and (speedup := _speedup(shape)) is not None
    ]
    return math.exp(math.fsum(logs) / len(logs)) if logs else None


def summarize(
    *, operators: Sequence[Mapping[str, Any]], importance: Mapping[str, float]
) -> dict[str, Any]:
    """The "scores" block of results.json from its "operators" list.

    Keys: aggregate, aggregate_ci [low, high], apparent_pass_rate, real_pass_rate,
    fallback_rate, geomean_speedup_eager, fast_1, shapes_total, shapes_passed (status
    ``pass``: the apparent pass count), shapes_passed_real (those of operators that are
    not incorrect: the real pass count), operators_total, operators_incorrect,
    operators_held. Rates are over all shapes of ``operators`` (0.0 when there are none);
    operator scores are recomputed from the shapes, never read from the entries.
    """
    shapes = [shape for entry in operators for shape in (entry.get("shapes") or [])]
    statuses = [_status(shape) for shape in shapes]
    total = len(shapes)
    verdicts = [operator_verdict(entry.get("shapes") or []) for entry in operators]
    real = sum(v["real_passes"] for v in verdicts)
    # Speedups count the passing shapes of operators that are not incorrect only.
    counted = [
        shape
        for entry, verdict in zip(operators, verdicts, strict=True)
        if not verdict["wrong_shapes"]
        for shape in (entry.get("shapes") or [])
    ]

    def share(count: int) -> float:
        return count / total if total else 0.0

    passed = statuses.count("pass")
    return {
        "aggregate": aggregate_score(
            operator_scores=scores_by_operator(operators), importance=importance
        ),
        "aggregate_ci": aggregate_ci(operators=operators, importance=importance),
        "apparent_pass_rate": share(sum(s in CORRECT_STATUSES for s in statuses)),
        "real_pass_rate": share(real),
        "fallback_rate": share(statuses.count("fallback")),
        "geomean_speedup_eager": geomean_speedup(counted),
        "fast_1": share(round(fast_p(shapes=counted, threshold=1.0) * len(counted))),
        "shapes_total": total,
        "shapes_passed": passed,
        "shapes_passed_real": real,
        "operators_total": len(verdicts),
        "operators_incorrect": sum(bool(v["wrong_shapes"]) for v in verdicts),
        "operators_held": sum(v["verdict"] == "held" for v in verdicts),
    }
