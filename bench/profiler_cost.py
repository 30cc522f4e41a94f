"""What the CUDA fallback monitor costs per watched call, and where (CUDA only).

The correctness calls of every shape run under ``torch.profiler`` (the fallback monitor,
``evaluator.fallback_cuda.CudaFallbackMonitor``). For a candidate that launches many
small kernels (the references of the attention and delta-rule operators loop per
sequence or per token) a watched call took 5-7 times as long as the same call unwatched
on the H200 (bench/where_time_goes.py, harness 0.2.4). This prints, for a few shapes,
the reference's call unwatched and watched, split into the profiler's start, the call,
its stop, and the harness's reading of the events (``activities_from_profile``), and
the same with the profiler's host-op activity off (as the monitor profiles a first call
of several, whose launchers it does not read), and with that and the profiler's external
correlation off too (``cuda_noext``):

    python3 bench/profiler_cost.py [--pairs gated_delta_rule_update:7,unified_attention:13]
        [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

DEFAULT_PAIRS = "gated_delta_rule_update:7,unified_attention:13,rms_norm:0,unified_attention:3"


def measure(operator: str, shape_id: str, repeats: int) -> dict[str, Any]:
    import torch
    from torch.profiler import ProfilerActivity, profile

    from evaluator.fallback_cuda import (
        CudaFallbackMonitor,
        activities_from_profile,
        device_only_profiler_config,
        kernel_origins,
        prepare_cuda_monitoring,
    )
    from evaluator.operators import get_operator
    from evaluator.suite import load_suite

    device = torch.device("cuda")
    prepare_cuda_monitoring(device)
    suite = load_suite("atrex-bench-v1")
    shape = next(s for s in suite.shapes_for(operator, "full") if s.shape_id == shape_id)
    spec = get_operator(operator)
    model = spec.build_reference(shape.init_kwargs).to(device)
    inputs = spec.make_inputs(device=device, seed=1, **shape.input_kwargs)
    out: dict[str, Any] = {"operator": operator, "shape_id": shape_id}

    def call() -> Any:
        return model(**inputs)

    # The device-only profile as the monitor makes it: without the profiler's external
    # correlation ids (which tie a kernel to the host op that launched it: unused when the
    # host ops are not recorded).
    no_external_correlation = device_only_profiler_config()

    with torch.inference_mode():
        call()
        torch.cuda.synchronize()
        rows = []
        for _ in range(repeats):
            row: dict[str, float] = {}
            t0 = time.perf_counter()
            call()
            torch.cuda.synchronize()
            row["plain"] = time.perf_counter() - t0
            for name, activities, config in (
                ("watched", [ProfilerActivity.CPU, ProfilerActivity.CUDA], None),
                ("cuda_only", [ProfilerActivity.CUDA], None),
                ("cuda_noext", [ProfilerActivity.CUDA], no_external_correlation),
            ):
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                prof = profile(activities=activities, experimental_config=config)
                prof.__enter__()
                t1 = time.perf_counter()
                call()
                torch.cuda.synchronize()
                t2 = time.perf_counter()
                prof.__exit__(None, None, None)
                t3 = time.perf_counter()
                events = list(prof.profiler.kineto_results.events())
                t4 = time.perf_counter()
                found = activities_from_profile(prof)
                t5 = time.perf_counter()
                row[f"{name}_start"] = t1 - t0
                row[f"{name}_call"] = t2 - t1
                row[f"{name}_stop"] = t3 - t2
                row[f"{name}_events_list"] = t4 - t3
                row[f"{name}_activities"] = t5 - t4
                row[f"{name}_events"] = len(events)
                row[f"{name}_kernels"] = len(found)
            monitor = CudaFallbackMonitor(own_code_dir=None, device=device)
            t0 = time.perf_counter()
            monitor.call(call)
            row["monitor_call"] = time.perf_counter() - t0
            t0 = time.perf_counter()
            kernel_origins(None)
            row["kernel_origins"] = time.perf_counter() - t0
            t0 = time.perf_counter()
            monitor.report(q_bytes=None)
            row["report"] = time.perf_counter() - t0
            rows.append(row)
    out["rows"] = rows
    out["median"] = {key: sorted(r[key] for r in rows)[len(rows) // 2] for key in rows[0]}
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", default=DEFAULT_PAIRS, help="operator:shape_id,...")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    results = []
    for pair in args.pairs.split(","):
        operator, shape_id = pair.split(":")
        result = measure(operator, shape_id, args.repeats)
        results.append(result)
        median = result["median"]
        print(f"{operator} shape {shape_id}:")
        for key, value in median.items():
            print(f"  {key:24s} {value:10.4f}" if isinstance(value, float) else
                  f"  {key:24s} {value:10d}")  # fmt: skip
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
