"""The one list of verdict codes, shared by the harness and the site (docs/scoring.md).

Pure stdlib (web-safe). Every shape entry of results.json carries ``codes``: what the
harness found on that shape, one code each, from this list. The harness sets them where it
finds the thing (``evaluator.measure``, ``evaluator.runner``, ``evaluator.results``); the
scoring (``evaluator.scoring.operator_verdict``) and the site (``submissions.services``,
which holds a submission for review) read only the codes, never the messages: a message
is for people and may be reworded at any time.

Each code has a kind:

* ``hold``: a sign of deliberate deception (tampering, a timed path that differs from the
  watched one, a time no kernel can reach, work escaping the timer). One such code on any
  shape of any operator holds the whole submission for review: nothing of it is published
  until staff release it.
* ``wrong``: a silent wrong answer (a result that differs from the reference, at a shape or
  at a validation variant, or a memory error the sanitizer found). The operator is
  ``incorrect`` as a whole and scores 0.
* ``fallback``: a correct answer computed mostly by PyTorch; the shape scores 0.
* ``loud``: a loud failure (an exception, out of memory, a compile error, a timeout, a
  crash, a missing file); only its shape is lost.

Results written before codes existed (harness < 0.3.0) have none; :func:`shape_codes`
derives them from the status and the figures (never the message) for those.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

HOLD = "hold"
WRONG = "wrong"
FALLBACK = "fallback"
LOUD = "loud"
KINDS = (HOLD, WRONG, FALLBACK, LOUD)


@dataclass(frozen=True)
class Verdict:
    code: str
    kind: str
    label: str
    """What it means, for the review page and the docs."""


VERDICTS: tuple[Verdict, ...] = (
    # Signs of deliberate deception: the whole submission is held for review.
    Verdict("tampering", HOLD, "Changed the harness, its clocks, PyTorch or the result pipe"),
    Verdict("own_process", HOLD, "Started a process of its own (work outside the profiler)"),
    Verdict("unwatched_path", HOLD, "The timed calls ran far faster than the watched calls"),
    Verdict("timed_wrong", HOLD, "A timed call was wrong after the watched calls were right"),
    Verdict("above_roofline", HOLD, "Measured faster than the hardware's roofline bound"),
    Verdict("impossible_time", HOLD, "Measured faster than launching a kernel takes"),
    Verdict("outside_work", HOLD, "Work still running after the call returned (escapes the timer)"),
    # Silent wrong answers: the operator is incorrect and scores 0.
    Verdict("wrong_result", WRONG, "Returned a wrong result"),
    Verdict("variant_wrong", WRONG, "Wrong at a hidden validation variant"),
    Verdict("memory_error", WRONG, "Out-of-bounds access, race or uninitialised read (sanitizer)"),
    # Correct, but PyTorch did the work: the shape scores 0.
    Verdict("fallback", FALLBACK, "Correct, but mostly computed by PyTorch"),
    # Loud failures: only their shape is lost.
    Verdict("exception", LOUD, "Raised an exception"),
    Verdict("out_of_memory", LOUD, "Ran out of memory"),
    Verdict("compile_error", LOUD, "Could not be imported or compiled"),
    Verdict("timeout", LOUD, "Took too long and was stopped"),
    Verdict("crashed", LOUD, "The evaluation process crashed"),
    Verdict("missing", LOUD, "The bundle has no file for this operator"),
    Verdict("harness_error", LOUD, "The harness failed (not the submission's fault)"),
)
BY_CODE: dict[str, Verdict] = {verdict.code: verdict for verdict in VERDICTS}
CODES: frozenset[str] = frozenset(BY_CODE)
HOLD_CODES: frozenset[str] = frozenset(v.code for v in VERDICTS if v.kind == HOLD)
WRONG_CODES: frozenset[str] = frozenset(v.code for v in VERDICTS if v.kind == WRONG)

STATUS_CODES: dict[str, str] = {
    "incorrect": "wrong_result",
    "fallback": "fallback",
    "compile_error": "compile_error",
    "runtime_error": "exception",
    "timeout": "timeout",
    "missing": "missing",
}
"""The code a shape of each failing status gets when nothing more precise is known."""

LEGACY_ROOFLINE_LIMIT = 1.0
"""Before codes, the site held a passing shape whose roofline fraction was above this."""


def kind_of(code: str) -> str:
    """The kind of a code; ValueError for a code not in the list (a harness bug)."""
    try:
        return BY_CODE[code].kind
    except KeyError:
        known = ", ".join(sorted(CODES))
        raise ValueError(f"Unknown verdict code {code!r}; known: {known}.") from None


def label_of(code: str) -> str:
    """What a code means, in words; the code itself for one this site does not know."""
    verdict = BY_CODE.get(code)
    return verdict.label if verdict else code


def merge(*groups: Iterable[str] | None) -> list[str]:
    """The codes of ``groups`` in order, each once, unknown codes refused (ValueError)."""
    codes: list[str] = []
    for group in groups:
        for code in group or ():
            kind_of(code)
            if code not in codes:
                codes.append(code)
    return codes


def shape_codes(shape: Mapping[str, Any]) -> list[str]:
    """The codes of one shape entry of results.json.

    Its ``codes`` when it has them (harness >= 0.3.0); for an older entry, the status's
    code. Either way a pass with a roofline fraction above 1 gets ``above_roofline``: the
    harness never writes one, so such a figure is not a kernel's (the rule the site applied
    before codes, kept for any document that claims it).
    """
    status = shape.get("status")
    if "codes" in shape and shape["codes"] is not None:
        codes = [str(code) for code in shape["codes"]]
    else:
        codes = [STATUS_CODES[status]] if status in STATUS_CODES else []
    fraction = shape.get("roofline_fraction")
    if (
        status == "pass"
        and isinstance(fraction, int | float)
        and not isinstance(fraction, bool)
        and math.isfinite(fraction)
        and fraction > LEGACY_ROOFLINE_LIMIT
        and "above_roofline" not in codes
    ):
        codes.append("above_roofline")
    return codes


def hold_signals(operators: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Every sign of deliberate deception in a results.json "operators" list: one entry per
    (operator, shape, code) with its evidence (the shape's error and figures), in order.

    Any entry holds the whole submission for review.
    """
    signals = []
    for entry in operators:
        for shape in entry.get("shapes") or []:
            for code in shape_codes(shape):
                if code in HOLD_CODES:
                    signals.append(
                        {
                            "operator": str(entry.get("operator")),
                            "shape_id": str(shape.get("shape_id")),
                            "code": code,
                            "label": label_of(code),
                            "evidence": shape.get("error") or "",
                            "roofline_fraction": shape.get("roofline_fraction"),
                            "time_ms": shape.get("time_ms"),
                            "watched_time_ms": shape.get("watched_time_ms"),
                            "unwatched_speedup": shape.get("unwatched_speedup"),
                            "t_sol_ms": shape.get("t_sol_ms"),
                        }
                    )
    return signals


def hold_note(signals: Sequence[Mapping[str, Any]], *, limit: int = 5) -> str:
    """One line for the status history: the first signals, by operator, shape and code."""
    shown = [f"{s['operator']} shape {s['shape_id']}: {s['code']}" for s in signals[:limit]]
    more = f" and {len(signals) - limit} more" if len(signals) > limit else ""
    return f"held for review: {len(signals)} sign(s) of deception ({'; '.join(shown)}{more})"
