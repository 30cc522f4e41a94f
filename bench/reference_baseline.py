"""The PyTorch baselines: time every operator's reference at every shape of a suite, run
eagerly (``--mode eager``) or through ``torch.compile`` (``--mode compile``).

These are the board's "PyTorch eager" and "torch.compile" rows: the reference itself,
timed with the evaluator's CUDA timer (L2 flushed, device synchronised, CUDA events), with
its roofline fraction against a hardware profile. It prints a table per operator and
writes JSON. Both rows are PyTorch, so both are fallbacks (score 0); their per-shape times
are the denominators of the speedups over eager and over torch.compile.

    python bench/reference_baseline.py --suite atrex-bench-v1 --hardware h200-sxm \
        --out results/reference-baseline.json [--operators a,b] [--deadline-s 500]

In compile mode each operator starts from a fresh dynamo state (``torch._dynamo.reset()``)
and its reference module's ``forward`` (one module per distinct ``init_kwargs``) is compiled
with torch.compile's defaults: the first shape compiles a static graph, a later shape
recompiles with dynamic dimensions, as a serving engine that calls torch.compile would see.
The compile time is recorded per shape (the first call) and is not part of the timed median.
On the H200 that first call took 3–83 s a shape for attention_forward (inductor recompiles
for each size; `results/2026-12-01-h200/`), so the whole suite does not fit one 10-minute
call: ``--dynamic`` compiles with ``dynamic=True`` from the first shape on, and
``--operator-deadline-s`` caps each operator (its remaining shapes are listed ``not_run``)
so that one slow compilation does not starve the rest; split ``--operators`` over GPUs.

References slower than 0.1 s a call are timed with at least 3 repetitions instead of 10
(the JSON records the repetitions of every shape). Shapes not reached before the deadline
are listed as such, never invented.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import torch

from evaluator.environment import collect_environment
from evaluator.hardware import get_profile
from evaluator.operators import get_operator
from evaluator.roofline import roofline_fraction, t_sol_seconds
from evaluator.scoring import aggregate_score, operator_score
from evaluator.suite import load_suite
from evaluator.timing import make_timer

SLOW_CALL_S = 0.1


WHAT = {
    "eager": "PyTorch eager reference of every operator, timed by the evaluator's timer",
    "compile": "torch.compile of the PyTorch reference of every operator, timed by the "
    "evaluator's timer",
}


_COMPILED: dict[tuple[str, str], torch.nn.Module] = {}
"""(operator, init kwargs) -> its compiled reference, reused across that operator's shapes
(as one module in a serving engine is: dynamo's guards then see the same module, and
recompile for new sizes with dynamic dimensions instead of starting over)."""


def _model(spec, shape, *, device: str, mode: str, dynamic: bool | None = None) -> torch.nn.Module:
    if mode != "compile":
        return spec.build_reference(shape.init_kwargs).to(device)
    key = (spec.slug, json.dumps(shape.init_kwargs, sort_keys=True))
    if key not in _COMPILED:
        model = spec.build_reference(shape.init_kwargs).to(device)
        model.forward = torch.compile(model.forward, dynamic=dynamic)
        _COMPILED[key] = model
    return _COMPILED[key]


def time_reference(
    spec, shape, *, device: str, budget_s: float, mode: str = "eager", dynamic: bool | None = None
) -> dict:
    """Median time of the reference at one shape, with its repetitions and spread."""
    model = _model(spec, shape, device=device, mode=mode, dynamic=dynamic)
    inputs = spec.make_inputs(device=device, seed=1234, **shape.input_kwargs)
    with torch.inference_mode():
        started = time.perf_counter()
        model(**inputs)
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        first_call_s = time.perf_counter() - started
        min_reps = 3 if first_call_s > SLOW_CALL_S else 10
        timer = make_timer(device, min_reps=min_reps)
        result = timer.measure(lambda: model(**inputs), budget_s=budget_s, warmup=1)
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    return {
        "first_call_ms": first_call_s * 1e3,
        "time_ms": result.median_s * 1e3,
        "time_spread_ms": result.std_error_s * 1e3,
        "reps": result.reps,
        "host_median_ms": result.host_median_s * 1e3,
        "warnings": list(result.warnings),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", default="atrex-bench-v1")
    parser.add_argument("--hardware", default="h200-sxm")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--operators", default="")
    parser.add_argument("--shape-set", default="full")
    parser.add_argument("--budget-s", type=float, default=0.5)
    parser.add_argument("--deadline-s", type=float, default=500.0)
    parser.add_argument(
        "--operator-deadline-s",
        type=float,
        default=None,
        help="stop an operator's shapes after this many seconds (its remaining shapes are "
        "'not_run'), so that one slow compilation does not starve the others",
    )
    parser.add_argument(
        "--dynamic",
        action="store_true",
        help="compile mode: torch.compile(dynamic=True) from the first shape on (default: "
        "torch.compile's own choice, a static graph first, then dynamic on a recompile)",
    )
    parser.add_argument("--mode", choices=sorted(WHAT), default="eager")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)

    suite = load_suite(args.suite)
    hardware = get_profile(args.hardware)
    operators = [o for o in args.operators.split(",") if o] or suite.operator_slugs()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    report = {
        "what": WHAT[args.mode],
        "mode": args.mode,
        "suite": {"slug": suite.slug, "hash": suite.content_hash, "shape_set": args.shape_set},
        "hardware": hardware.to_dict(),
        "environment": collect_environment(args.device),
        "started_at": datetime.now(UTC).isoformat(),
        "compile_dynamic": bool(args.dynamic) if args.mode == "compile" else None,
        "operators": [],
    }
    deadline = time.monotonic() + args.deadline_s
    for slug in operators:
        spec = get_operator(slug)
        entry = {"operator": slug, "score_if_counted": 0.0, "shapes": []}
        report["operators"].append(entry)  # written after every shape: a killed run keeps them
        if args.mode == "compile":
            _COMPILED.clear()
            torch._dynamo.reset()
            # Past the recompile limit dynamo silently runs eager: lift it, so that every
            # shape is really compiled (each shape builds a new module).
            for name in ("recompile_limit", "cache_size_limit"):
                if hasattr(torch._dynamo.config, name):
                    setattr(torch._dynamo.config, name, 4096)
        shapes = entry["shapes"]
        operator_deadline = (
            time.monotonic() + args.operator_deadline_s if args.operator_deadline_s else None
        )
        for shape in suite.shapes_for(slug, args.shape_set):
            row = {"shape_id": shape.shape_id, "weight": shape.weight}
            if time.monotonic() > deadline:
                row.update(status="not_run", error="deadline reached before this shape")
                shapes.append(row)
                continue
            if operator_deadline is not None and time.monotonic() > operator_deadline:
                row.update(status="not_run", error="the operator's deadline was reached")
                shapes.append(row)
                continue
            t_sol = t_sol_seconds(
                w_flops=shape.w_flops,
                q_read=shape.q_read,
                q_write=shape.q_write,
                hardware=hardware,
            )
            try:
                row.update(
                    time_reference(
                        spec,
                        shape,
                        device=args.device,
                        budget_s=args.budget_s,
                        mode=args.mode,
                        dynamic=True if args.dynamic else None,
                    )
                )
            except Exception as error:  # noqa: BLE001 - recorded per shape, the run goes on
                row.update(status="runtime_error", error=f"{type(error).__name__}: {error}"[:500])
                shapes.append(row)
                if args.device.startswith("cuda"):
                    torch.cuda.empty_cache()
                continue
            row.update(
                status="pass",  # the reference is correct by definition; scored as eager
                t_sol_ms=t_sol * 1e3,
                roofline_fraction=roofline_fraction(
                    t_sol_s=t_sol, t_measured_s=row["time_ms"] / 1e3
                ),
            )
            shapes.append(row)
            out.write_text(json.dumps(report, indent=1))
        done = [s for s in shapes if s["status"] == "pass"]
        score = operator_score([s for s in shapes if s["status"] != "not_run"]) if done else 0.0
        entry["score_if_counted"] = score
        slowest = max(done, key=lambda s: s["time_ms"], default=None)
        print(
            f"{slug:32s} shapes {len(done):3d}/{len(shapes):3d}  "
            f"roofline-weighted {score:.4f}  "
            + (f"slowest {slowest['shape_id']}: {slowest['time_ms']:.3f} ms" if slowest else ""),
            flush=True,
        )
        out.write_text(json.dumps(report, indent=1))
    importance = suite.importance()
    scores = {op["operator"]: op["score_if_counted"] for op in report["operators"]}
    report["aggregate_if_counted"] = aggregate_score(operator_scores=scores, importance=importance)
    report["finished_at"] = datetime.now(UTC).isoformat()
    out.write_text(json.dumps(report, indent=1))
    print(
        f"aggregate (if the {args.mode} reference were counted as a pass): "
        f"{report['aggregate_if_counted']:.4f}"
    )
    not_run = sum(s["status"] == "not_run" for op in report["operators"] for s in op["shapes"])
    errors = sum(s["status"] == "runtime_error" for op in report["operators"] for s in op["shapes"])
    print(f"shapes not run: {not_run}, errors: {errors}")
    return 0 if math.isfinite(report["aggregate_if_counted"]) else 1


if __name__ == "__main__":
    sys.exit(main())
