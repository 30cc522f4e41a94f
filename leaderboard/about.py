"""The "About the scores" page and its worked example.

The example is real release data scored by the project's own code: two operators of the
public Atrex-Bench release (``mrope`` and ``fused_qk_rmsnorm``), each shape's published
speed-of-light time on the release's XPU-A and the release's measured time of the
production kernel on that device (``production_performance``), the suite's weights and
normalised importance (``atrex-bench-v1``). To show how failures count, two shapes are
given another status (``ILLUSTRATIVE_STATUSES``: a fallback, and a wrong answer that makes
its operator incorrect, scored 0); every other figure is as published.

``example_inputs`` reads those figures out of a release ``data/`` folder; they are kept in
``about_example.json`` beside this module so that the page works where the release is not
installed, and tests/leaderboard/test_about.py checks the file against the release.
``worked_example`` scores the inputs with ``evaluator.roofline`` and ``evaluator.scoring``
on every request, so the page shows what the scoring code computes, never a copy.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from evaluator import roofline, scoring
from evaluator.hardware import get_profile
from evaluator.suite import load_suite

EXAMPLE_PATH = Path(__file__).with_name("about_example.json")
EXAMPLE_SUITE = "atrex-bench-v1"
EXAMPLE_OPERATORS = ("mrope", "fused_qk_rmsnorm")
EXAMPLE_DEVICE = "XPU-A"
# (operator, shape id) -> the status the example gives that shape instead of "pass".
ILLUSTRATIVE_STATUSES: dict[tuple[str, str], str] = {
    ("mrope", "3"): "fallback",
    ("fused_qk_rmsnorm", "3"): "incorrect",
}
# Relative standard error of each passing shape's median time: the harness times a shape
# until it is under 0.5 % (docs/scoring.md); the release publishes no spread.
EXAMPLE_RELATIVE_SPREAD = 0.005
# The shape whose T_sol the page recomputes on the H20 profile of the release (hardware/H20.yaml).
T_SOL_SHAPE = ("mrope", "0")
T_SOL_HARDWARE = "h20"


def _read(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def example_inputs(data_dir: str | Path) -> dict[str, Any]:
    """The worked example's inputs, read from a release ``data/`` folder and the suite."""
    root = Path(data_dir)
    suite = load_suite(EXAMPLE_SUITE)
    operators = []
    h20_sol: float | None = None
    for slug in EXAMPLE_OPERATORS:
        metadata = _read(root / slug / "metadata.json")["shapes"]
        work = _read(root / slug / "roofline.json")["shapes"]
        kwargs = _read(root / slug / "shapes.json")
        weights = {spec.shape_id: spec.weight for spec in suite.shapes_for(slug)}
        shapes = []
        for shape_id in sorted(metadata, key=int):
            measured = metadata[shape_id]["production_performance"][EXAMPLE_DEVICE]
            figures = work[shape_id]
            shapes.append(
                {
                    "shape_id": shape_id,
                    "input_kwargs": kwargs[shape_id]["input_kwargs"],
                    "weight": weights[shape_id],
                    "w_flops": figures["semantic_W_flops"],
                    "q_read": figures["semantic_Q_read_bytes"],
                    "q_write": figures["semantic_Q_write_bytes"],
                    "t_sol_ms": figures["SOL_time_ms"][EXAMPLE_DEVICE],
                    "time_ms": measured["performance_us"] / 1e3,
                    "framework": measured["framework"],
                }
            )
            if (slug, shape_id) == T_SOL_SHAPE:
                h20_sol = figures["SOL_time_ms"]["H20"]
        operators.append(
            {"operator": slug, "importance": suite.operator(slug).importance, "shapes": shapes}
        )
    return {
        "suite": EXAMPLE_SUITE,
        "device": EXAMPLE_DEVICE,
        "operators": operators,
        "published_h20_t_sol_ms": h20_sol,
        "threshold_own_share": suite.threshold_own_share,
    }


def worked_example(inputs: Mapping[str, Any]) -> dict[str, Any]:
    """Every step of the example, computed by the scoring code from ``inputs``."""
    operators = []
    results = []  # the results.json "operators" list the scoring code reads
    for entry in inputs["operators"]:
        slug = entry["operator"]
        rows = []
        for shape in entry["shapes"]:
            status = ILLUSTRATIVE_STATUSES.get((slug, shape["shape_id"]), "pass")
            fraction = roofline.roofline_fraction(
                t_sol_s=shape["t_sol_ms"] / 1e3, t_measured_s=shape["time_ms"] / 1e3
            )
            passing = status == "pass"
            rows.append(
                {
                    **shape,
                    "status": status,
                    "fraction": fraction,
                    "roofline_fraction": fraction if passing else None,
                    "time_spread_ms": shape["time_ms"] * EXAMPLE_RELATIVE_SPREAD
                    if passing
                    else None,
                    "score": scoring.shape_score(
                        status=status, roofline_fraction=fraction if passing else None
                    ),
                    "flops": float(sum(shape["w_flops"].values())),
                    "bytes": float(shape["q_read"] + shape["q_write"]),
                }
            )
        weight_sum = sum(row["weight"] for row in rows)
        weighted = sum(row["weight"] * row["score"] for row in rows)
        verdict = scoring.operator_verdict(rows)
        operators.append(
            {
                "operator": slug,
                "importance": entry["importance"],
                "shapes": rows,
                "weight_sum": weight_sum,
                "weighted_sum": weighted,
                # An incorrect shape makes the whole operator incorrect: it scores 0.
                "verdict": verdict["verdict"],
                "wrong_shapes": verdict["wrong_shapes"],
                "apparent_passes": verdict["apparent_passes"],
                "real_passes": verdict["real_passes"],
                "score": scoring.operator_score(rows),
            }
        )
        results.append({"operator": slug, "shapes": rows})
    importance = {op["operator"]: op["importance"] for op in operators}
    summary = scoring.summarize(operators=results, importance=importance)
    t_sol_operator, t_sol_shape_id = T_SOL_SHAPE
    shape = next(
        row
        for op in operators
        if op["operator"] == t_sol_operator
        for row in op["shapes"]
        if row["shape_id"] == t_sol_shape_id
    )
    profile = get_profile(T_SOL_HARDWARE)
    compute_s = roofline.compute_seconds(w_flops=shape["w_flops"], hardware=profile)
    memory_s = roofline.memory_seconds(
        q_read=shape["q_read"], q_write=shape["q_write"], hardware=profile
    )
    return {
        "suite": inputs["suite"],
        "device": inputs["device"],
        "operators": operators,
        "importance_sum": sum(importance.values()),
        "importance_weighted_sum": sum(op["importance"] * op["score"] for op in operators),
        "summary": summary,
        "spread": EXAMPLE_RELATIVE_SPREAD,
        "threshold_own_share": inputs["threshold_own_share"],
        "t_sol": {
            "operator": t_sol_operator,
            "shape": shape,
            "hardware": profile,
            "peak": profile.peak_for_dtype(next(iter(shape["w_flops"]))),
            "compute_ms": compute_s * 1e3,
            "memory_ms": memory_s * 1e3,
            "t_sol_ms": max(compute_s, memory_s) * 1e3,
            "published_ms": inputs["published_h20_t_sol_ms"],
        },
    }


def about_scores(request: HttpRequest) -> HttpResponse:
    """What the scores mean, how ties are decided, and one example worked through."""
    example = worked_example(_read(EXAMPLE_PATH))
    return render(request, "leaderboard/about_scores.html", {"example": example})
