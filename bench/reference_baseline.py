"""The PyTorch baselines: time every operator's eager baseline (``--mode baseline``), its
reference run eagerly (``--mode eager``) or through ``torch.compile`` (``--mode compile``)
at every shape of a suite.

``--mode baseline`` times ``evaluator/baselines/<operator>.py``: the PyTorch a practitioner
writes for the operator (library calls, batched tensor operations; docs/baselines.md says
per operator what it does), the same interface as the reference, checked against it by the
operator's own correctness policy in CI (tests/evaluator/test_baselines.py). Its times are
the board's eager row and the denominator of "speedup over eager" (issue 21: the references
are the correctness oracle, with fp32 arithmetic and bounded memory, and are up to 15x
slower than such PyTorch on some operators). ``--mode eager`` keeps timing the references
(the oracle's own speed, for comparison); ``--mode compile`` compiles the references.

Every mode times with the same code: the evaluator's timer (on CUDA: L2 flushed, device
synchronised, CUDA events; median of at least 10 repetitions, 3 for calls above 0.1 s),
after one untimed first call, inputs drawn with seed 1234 from the operator's generator,
under ``torch.inference_mode``; each shape gets its roofline fraction against a hardware
profile. It prints a table per operator and writes JSON. All rows are PyTorch, so all are
fallbacks (score 0); their per-shape times are the denominators of the speedups.

In baseline mode each shape is first checked on the timing device (one correctness trial of
the baseline against the reference, ``evaluator.correctness.check_shape`` with the
operator's policy, as a submission's shape is checked; ``--no-check`` skips it): a shape
whose baseline fails is recorded ``incorrect`` with the check's message and not timed, so a
baseline that is wrong on the GPU never becomes a denominator. The board's new eager row:

    python bench/reference_baseline.py --mode baseline --suite atrex-bench-v1 \
        --hardware h200-sxm --out results/<date>-h200/eager-baseline-v1-h200.json

and for the references, as before:

    python bench/reference_baseline.py --suite atrex-bench-v1 --hardware h200-sxm \
        --out results/reference-baseline.json [--operators a,b] [--deadline-s 500]

On a CPU, for a smoke run: ``--device cpu --hardware cpu-dev --shape-set smoke``.

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

``--precompile-jobs K`` (compile mode) first runs K processes of this script with
``--warm-only`` (each shape's first call, untimed) over the operators at once, sharing one
inductor cache (``--cache-dir``, ``TORCHINDUCTOR_CACHE_DIR``): compilation is work for the
host's cores, and the timed pass that follows then loads each compiled graph from the cache
(each operator's ``inductor_cache`` hits and misses are in the JSON) instead of compiling
it on the clock of one process.

References slower than 0.1 s a call are timed with at least 3 repetitions instead of 10
(the JSON records the repetitions of every shape). Shapes not reached before the deadline
are listed as such, never invented.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

# A script, run from anywhere (python3 bench/reference_baseline.py): the repository's packages.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from evaluator.baselines import get_baseline  # noqa: E402
from evaluator.correctness import CandidateError, check_shape  # noqa: E402
from evaluator.environment import collect_environment  # noqa: E402
from evaluator.hardware import get_profile  # noqa: E402
from evaluator.operators import get_operator  # noqa: E402
from evaluator.roofline import roofline_fraction, t_sol_seconds  # noqa: E402
from evaluator.scoring import aggregate_score, operator_score  # noqa: E402
from evaluator.suite import load_suite  # noqa: E402
from evaluator.timing import make_timer  # noqa: E402
from submissions.planning import shard_plan  # noqa: E402

SLOW_CALL_S = 0.1


WHAT = {
    "baseline": "Eager baseline of every operator (evaluator/baselines/: the PyTorch a "
    "practitioner writes, checked against the reference), timed by the evaluator's timer",
    "eager": "PyTorch eager reference of every operator, timed by the evaluator's timer",
    "compile": "torch.compile of the PyTorch reference of every operator, timed by the "
    "evaluator's timer",
}


_COMPILED: dict[tuple[str, str], torch.nn.Module] = {}
"""(operator, init kwargs) -> its compiled reference, reused across that operator's shapes
(as one module in a serving engine is: dynamo's guards then see the same module, and
recompile for new sizes with dynamic dimensions instead of starting over)."""


def _model(spec, shape, *, device: str, mode: str, dynamic: bool | None = None) -> torch.nn.Module:
    if mode == "baseline":
        return get_baseline(spec.slug)(**(shape.init_kwargs or {})).to(device)
    if mode != "compile":
        return spec.build_reference(shape.init_kwargs).to(device)
    key = (spec.slug, json.dumps(shape.init_kwargs, sort_keys=True))
    if key not in _COMPILED:
        model = spec.build_reference(shape.init_kwargs).to(device)
        model.forward = torch.compile(model.forward, dynamic=dynamic)
        _COMPILED[key] = model
    return _COMPILED[key]


CHECK_SEED = 2026


def check_baseline(spec, shape, *, device: str) -> str | None:
    """One correctness trial of the operator's baseline against its reference at this shape
    on ``device`` (the operator's policy, as a submission's shape is checked): None when it
    passes, else the check's message."""
    reference = spec.build_reference(shape.init_kwargs).to(device)
    baseline = _model(spec, shape, device=device, mode="baseline")
    try:
        result = check_shape(
            spec=spec,
            reference=reference,
            candidate=baseline,
            shape_id=shape.shape_id,
            input_kwargs=shape.input_kwargs,
            device=torch.device(device),
            run_seed=CHECK_SEED,
            trials=1,
        )
    except CandidateError as error:
        return error.message
    finally:
        if device.startswith("cuda"):
            torch.cuda.empty_cache()
    return None if result.ok else result.error


class FirstCallDeadline(Exception):
    """A shape's first call (its compilation in compile mode) ran past its limit."""


@contextmanager
def _stopped_after(seconds: float | None):
    """Raise FirstCallDeadline in the main thread once ``seconds`` have passed (None, or
    another thread: no limit). A compilation that hangs or takes minutes is stopped there,
    not at the step's kill, which would lose the report's summary."""
    if seconds is None or threading.current_thread() is not threading.main_thread():
        yield
        return

    def expired(signum, frame):
        raise FirstCallDeadline(f"its first call had not returned after {seconds:.0f} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, max(seconds, 0.001))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _first_call_s(
    model: torch.nn.Module, inputs: dict, *, device: str, limit_s: float | None = None
) -> float:
    """Seconds of the model's first call at these inputs (its compilation in compile mode),
    the device synchronised; FirstCallDeadline past ``limit_s``."""
    started = time.perf_counter()
    with _stopped_after(limit_s):
        model(**inputs)
        if device.startswith("cuda"):
            torch.cuda.synchronize()
    return time.perf_counter() - started


def time_reference(
    spec,
    shape,
    *,
    device: str,
    budget_s: float,
    mode: str = "eager",
    dynamic: bool | None = None,
    first_call_limit_s: float | None = None,
) -> dict:
    """Median time of the reference at one shape, with its repetitions and spread."""
    model = _model(spec, shape, device=device, mode=mode, dynamic=dynamic)
    inputs = spec.make_inputs(device=device, seed=1234, **shape.input_kwargs)
    with torch.inference_mode():
        first_call_s = _first_call_s(model, inputs, device=device, limit_s=first_call_limit_s)
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


def warm_reference(
    spec, shape, *, device: str, dynamic: bool | None, first_call_limit_s: float | None = None
) -> dict:
    """The compiled reference's first call at one shape (its compilation), untimed."""
    model = _model(spec, shape, device=device, mode="compile", dynamic=dynamic)
    inputs = spec.make_inputs(device=device, seed=1234, **shape.input_kwargs)
    with torch.inference_mode():
        seconds = _first_call_s(model, inputs, device=device, limit_s=first_call_limit_s)
        return {"first_call_ms": seconds * 1e3}


def _inductor_cache() -> dict[str, int]:
    from torch._dynamo.utils import counters  # imports triton: only where compile mode runs

    inductor = counters["inductor"]
    return {"hits": inductor["fxgraph_cache_hit"], "misses": inductor["fxgraph_cache_miss"]}


def precompile(args: argparse.Namespace, operators: list[str], shapes: dict[str, int]) -> dict:
    """Run ``args.precompile_jobs`` warm-only processes of this script over ``operators``
    (split by shape count as the site splits shards, ``submissions.planning``), all sharing
    the inductor cache; wait for them (up to the deadline); what each did."""
    jobs = shard_plan(operators=operators, costs=shapes, count=args.precompile_jobs)
    out = Path(args.out)
    started = time.monotonic()
    processes = []
    for index, job in enumerate(jobs):
        command = [
            sys.executable, str(Path(__file__).resolve()), "--mode", "compile", "--warm-only",
            "--suite", args.suite, "--hardware", args.hardware, "--device", args.device,
            "--shape-set", args.shape_set, "--operators", ",".join(job),
            "--deadline-s", str(args.precompile_deadline_s), "--cache-dir", args.cache_dir,
            "--out", str(out.with_name(f"{out.stem}.warm-{index}.json")),
        ] + (["--dynamic"] if args.dynamic else [])  # fmt: skip
        log = open(out.with_name(f"{out.stem}.warm-{index}.log"), "w")  # noqa: SIM115
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)  # noqa: S603
        processes.append((process, log))
    codes = []
    for process, log in processes:
        try:
            codes.append(
                process.wait(
                    timeout=max(1.0, args.precompile_deadline_s - (time.monotonic() - started))
                )
            )
        except subprocess.TimeoutExpired:
            process.kill()
            codes.append(process.wait())
        log.close()
    return {
        "jobs": [
            {"operators": job, "exit_code": code} for job, code in zip(jobs, codes, strict=True)
        ],
        "wall_s": round(time.monotonic() - started, 1),
        "cache_dir": args.cache_dir,
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
    parser.add_argument(
        "--no-check",
        action="store_true",
        help="baseline mode: time the baselines without first checking each shape against "
        "the reference on the device",
    )
    parser.add_argument(
        "--warm-only",
        action="store_true",
        help="compile mode: only each shape's first call (the compilation), untimed",
    )
    parser.add_argument(
        "--precompile-jobs",
        type=int,
        default=0,
        help="compile mode: first compile every operator in this many --warm-only processes "
        "at once, sharing the inductor cache, then time with the cache warm",
    )
    parser.add_argument(
        "--precompile-deadline-s",
        type=float,
        default=None,
        help="how long the precompile processes may take (default: half of --deadline-s); "
        "the timed pass keeps to --deadline-s from the start",
    )
    parser.add_argument(
        "--cache-dir",
        default=None,
        help="the inductor cache (TORCHINDUCTOR_CACHE_DIR); default with --precompile-jobs: "
        "<out>.inductor-cache beside --out",
    )
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    deadline = time.monotonic() + args.deadline_s  # the whole run's, precompiling included
    if args.precompile_deadline_s is None:
        args.precompile_deadline_s = args.deadline_s / 2
    if args.precompile_jobs and not args.cache_dir:
        args.cache_dir = str(Path(args.out).resolve().with_suffix(".inductor-cache"))
    if args.cache_dir:
        # Read by inductor when it first needs its cache, after this.
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(Path(args.cache_dir).resolve())

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
        "checked_against_reference": args.mode == "baseline" and not args.no_check,
        "operators": [],
    }
    if args.mode == "compile" and args.precompile_jobs and not args.warm_only:
        counts = {op: len(suite.shapes_for(op, args.shape_set)) for op in operators}
        report["precompile"] = precompile(args, operators, counts)
        print(f"precompiled in {report['precompile']['wall_s']} s", flush=True)
    for slug in operators:
        spec = get_operator(slug)
        entry = {"operator": slug, "score_if_counted": 0.0, "shapes": []}
        cache_before = _inductor_cache()
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
        operator_started = time.monotonic()
        operator_deadline = (
            operator_started + args.operator_deadline_s if args.operator_deadline_s else None
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
            # A shape started before the operator's deadline may compile until twice that
            # deadline from the operator's start; none past the run's deadline.
            limit_s = deadline - time.monotonic()
            if operator_deadline is not None:
                operator_end = operator_started + 2 * args.operator_deadline_s
                limit_s = min(limit_s, operator_end - time.monotonic())
            try:
                if args.mode == "baseline" and not args.no_check:
                    problem = check_baseline(spec, shape, device=args.device)
                    if problem is not None:
                        row.update(status="incorrect", error=problem[:500])
                        shapes.append(row)
                        out.write_text(json.dumps(report, indent=1))
                        continue
                if args.warm_only:
                    row.update(
                        warm_reference(
                            spec,
                            shape,
                            device=args.device,
                            dynamic=True if args.dynamic else None,
                            first_call_limit_s=limit_s,
                        ),
                        status="warmed",
                    )
                    shapes.append(row)
                    out.write_text(json.dumps(report, indent=1))
                    continue
                row.update(
                    time_reference(
                        spec,
                        shape,
                        device=args.device,
                        budget_s=args.budget_s,
                        mode=args.mode,
                        dynamic=True if args.dynamic else None,
                        first_call_limit_s=limit_s,
                    )
                )
            except FirstCallDeadline as stopped:
                row.update(
                    status="not_run",
                    error=f"{stopped} (the operator's or the run's deadline); not timed",
                )
                shapes.append(row)
                out.write_text(json.dumps(report, indent=1))
                continue
            except Exception as error:  # noqa: BLE001 - recorded per shape, the run goes on
                row.update(status="runtime_error", error=f"{type(error).__name__}: {error}"[:500])
                shapes.append(row)
                out.write_text(json.dumps(report, indent=1))
                if args.device.startswith("cuda"):
                    torch.cuda.empty_cache()
                continue
            row.update(
                # The reference is correct by definition; a baseline was checked above.
                status="pass",
                t_sol_ms=t_sol * 1e3,
                roofline_fraction=roofline_fraction(
                    t_sol_s=t_sol, t_measured_s=row["time_ms"] / 1e3
                ),
            )
            shapes.append(row)
            out.write_text(json.dumps(report, indent=1))
        if args.mode == "compile":
            after = _inductor_cache()
            entry["inductor_cache"] = {k: after[k] - cache_before[k] for k in after}
        if args.warm_only:
            print(
                f"{slug:32s} warmed {len(shapes)} shapes {entry.get('inductor_cache')}", flush=True
            )
            out.write_text(json.dumps(report, indent=1))
            continue
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
    if args.warm_only:
        report["finished_at"] = datetime.now(UTC).isoformat()
        out.write_text(json.dumps(report, indent=1))
        return 0
    importance = suite.importance()
    scores = {op["operator"]: op["score_if_counted"] for op in report["operators"]}
    report["aggregate_if_counted"] = aggregate_score(operator_scores=scores, importance=importance)
    report["finished_at"] = datetime.now(UTC).isoformat()
    out.write_text(json.dumps(report, indent=1))
    print(
        f"aggregate (if the {args.mode} row were counted as a pass): "
        f"{report['aggregate_if_counted']:.4f}"
    )
    not_run = sum(s["status"] == "not_run" for op in report["operators"] for s in op["shapes"])
    errors = sum(s["status"] == "runtime_error" for op in report["operators"] for s in op["shapes"])
    incorrect = sum(s["status"] == "incorrect" for op in report["operators"] for s in op["shapes"])
    print(f"shapes not run: {not_run}, errors: {errors}, incorrect: {incorrect}")
    return 0 if math.isfinite(report["aggregate_if_counted"]) else 1


if __name__ == "__main__":
    sys.exit(main())
