"""Does the harness's timer agree with ``triton.testing.do_bench``? (CUDA only.)

For the large memory-bound shapes of a bundle's operators (the ``--per-operator`` shapes
with the most bytes moved), time the bundle's ``Model`` with the evaluator's CUDA timer
(the one every evaluation uses: L2 flushed, device synchronised, CUDA events) and with
Triton's ``do_bench`` (its own L2 clearing, CUDA events per repetition, median), on the
same inputs, and print the ratio. With ``--results`` (an evaluator results.json of the
same bundle) the harness's published per-shape medians are compared too.

Plain ``do_bench`` records its start event right after launching its L2 clear, with nothing
else queued: where the bundle's Python wrapper takes longer on the host than the clear
takes on the GPU, the GPU waits inside do_bench's timed region and the host's time is
counted. The harness queues a spin ahead of the call so that it times the GPU only (and
does not count a call whose host path outlasts it). So each shape is also timed by
``do_bench`` on the call captured in a CUDA graph (replaying it costs a few microseconds
on the host: do_bench then times the GPU alone as well), and the host launch path of one
call is printed: it says which of the two do_bench figures is the like-for-like one.
The summary counts agreement on the large shapes (``--large-mb``, default 100 MB moved,
twice the H200's L2), where a kernel runs for tens of microseconds or more.

    python bench/do_bench_agreement.py examples/bundles/triton-baseline \\
        --suite atrex-bench-v1 [--results results.json] --out agreement.json

The goal (issue 4) is agreement within 5 % on these shapes.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch
import triton
import triton.testing

from evaluator.child import import_candidate
from evaluator.environment import collect_environment
from evaluator.hardware import get_profile
from evaluator.operators import get_operator
from evaluator.roofline import t_sol_seconds
from evaluator.suite import load_suite
from evaluator.timing import make_timer


def _published_medians(path: str | None) -> dict[tuple[str, str], float]:
    if not path:
        return {}
    if not Path(path).exists():
        print(f"no results file at {path}: only the timer is compared", flush=True)
        return {}
    results = json.loads(Path(path).read_text())
    return {
        (op["operator"], str(shape["shape_id"])): shape["time_ms"]
        for op in results["operators"]
        for shape in op["shapes"]
        if shape.get("time_ms")
    }


def _host_launch_ms(call, calls: int = 21) -> float:
    """Median host time of one call (its launch path), with the GPU kept busy by a spin
    queued ahead so that no launch waits for the queue to drain."""
    times = []
    for _ in range(calls):
        torch.cuda.synchronize()
        torch.cuda._sleep(2_000_000)  # ~1 ms at 2 GHz
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    torch.cuda.synchronize()
    return statistics.median(times) * 1e3


def _captured(call):
    """(the call captured in a CUDA graph, as a replay function; None and why if the
    wrapper cannot be captured, e.g. it synchronises)."""
    try:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):  # JIT and allocator warm-up outside the capture
                call()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            call()
        torch.cuda.synchronize()
        return graph.replay, None
    except Exception as error:  # noqa: BLE001 - reported in the row, not fatal
        torch.cuda.synchronize()
        return None, f"{type(error).__name__}: {error}"[:200]


def _agreement(rows: list[dict]) -> dict:
    """How far the harness's timer is from each do_bench figure over these rows."""
    out: dict = {"shapes": len(rows)}
    for name, key in (
        ("do_bench", "ratio_timer_vs_do_bench"),
        ("do_bench_graph", "ratio_timer_vs_do_bench_graph"),
        ("published", "ratio_published_vs_do_bench"),
    ):
        deviations = [abs(r[key] - 1) for r in rows if r.get(key) is not None]
        out[name] = {
            "compared": len(deviations),
            "max_abs_deviation": max(deviations, default=None),
            "median_abs_deviation": statistics.median(deviations) if deviations else None,
            "within_5pct": sum(d <= 0.05 for d in deviations),
        }
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bundle")
    parser.add_argument("--suite", default="atrex-bench-v1")
    parser.add_argument("--hardware", default="h200-sxm")
    parser.add_argument("--per-operator", type=int, default=2)
    parser.add_argument("--results")
    parser.add_argument(
        "--large-mb", type=float, default=100.0,
        help="shapes moving at least this many MB are the 'large' ones the summary counts",
    )  # fmt: skip
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)

    bundle = Path(args.bundle)
    suite = load_suite(args.suite)
    hardware = get_profile(args.hardware)
    published = _published_medians(args.results)
    rows = []
    for slug in suite.operator_slugs():
        path = bundle / f"{slug}.py"
        if not path.exists():
            continue
        module = import_candidate(path, slug, bundle)
        spec = get_operator(slug)
        candidates = []
        for shape in suite.shapes_for(slug, "full"):
            bytes_moved = shape.q_read + shape.q_write
            t_mem = bytes_moved / hardware.hbm_bytes_per_s
            t_sol = t_sol_seconds(
                w_flops=shape.w_flops, q_read=shape.q_read, q_write=shape.q_write,
                hardware=hardware,
            )  # fmt: skip
            if t_mem < t_sol:  # compute-bound: not what this check is about
                continue
            candidates.append((bytes_moved, shape, t_sol))
        candidates.sort(key=lambda item: item[0], reverse=True)
        for _bytes, shape, t_sol in candidates[: args.per_operator]:
            model = module.Model(**shape.init_kwargs).to("cuda")
            inputs = spec.make_inputs(device="cuda", seed=7, **shape.input_kwargs)
            with torch.inference_mode():

                def call(model=model, inputs=inputs):
                    return model(**inputs)

                timer = make_timer("cuda")
                harness = timer.measure(call, budget_s=1.0).median_s * 1e3
                do_bench = triton.testing.do_bench(call, warmup=25, rep=200, return_mode="median")
                host_ms = _host_launch_ms(call)
                replay, graph_error = _captured(call)
                do_bench_graph = (
                    triton.testing.do_bench(replay, warmup=25, rep=200, return_mode="median")
                    if replay is not None
                    else None
                )
            row = {
                "operator": slug,
                "shape_id": shape.shape_id,
                "bytes": _bytes,
                "large": _bytes >= args.large_mb * 1e6,
                "harness_timer_ms": harness,
                "do_bench_ms": do_bench,
                "ratio_timer_vs_do_bench": harness / do_bench,
                "host_launch_ms": host_ms,
                "do_bench_graph_ms": do_bench_graph,
                "ratio_timer_vs_do_bench_graph": (
                    harness / do_bench_graph if do_bench_graph else None
                ),
                "graph_error": graph_error,
                "roofline_fraction_timer": t_sol * 1e3 / harness,
            }
            if (slug, str(shape.shape_id)) in published:
                row["published_ms"] = published[(slug, str(shape.shape_id))]
                row["ratio_published_vs_do_bench"] = row["published_ms"] / do_bench
            rows.append(row)
            print(
                f"{slug:28s} {shape.shape_id:>6} {_bytes / 1e6:9.1f} MB  timer "
                f"{harness:8.4f} ms  do_bench {do_bench:8.4f} ms  ratio "
                f"{harness / do_bench:6.3f}  host {host_ms:7.4f} ms  graph "
                + (
                    f"{do_bench_graph:8.4f} ms ratio {harness / do_bench_graph:6.3f}"
                    if do_bench_graph
                    else f"not captured ({graph_error})"
                )
                + (
                    f"  published {row['published_ms']:8.4f} ms ratio "
                    f"{row['ratio_published_vs_do_bench']:6.3f}"
                    if "published_ms" in row
                    else ""
                ),
                flush=True,
            )
            del model, inputs, replay
            torch.cuda.empty_cache()
    summary = {"shapes": len(rows), "large_mb": args.large_mb}
    for scope, scoped in (("all", rows), ("large", [r for r in rows if r["large"]])):
        summary[scope] = _agreement(scoped)
    print(json.dumps(summary))
    Path(args.out).write_text(
        json.dumps(
            {
                "environment": collect_environment("cuda"),
                "triton": triton.__version__,
                "suite": suite.slug,
                "summary": summary,
                "rows": rows,
            },
            indent=1,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
