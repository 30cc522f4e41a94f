"""Peak memory of one shape's correctness checks, in multiples of the output's size.

The checks hold the candidate's and the reference's outputs, the inputs drawn again after
the call and the comparison's float64 temporaries; on the H200 the largest
``block_scaled_mm`` output (704,512 x 2,048 fp32, 5.8 GB) ran out of its 140 GB when the
comparison worked in one piece (results/2026-12-01-h200-session7). This runs
``evaluator.correctness.check_shape`` with the reference as the candidate on one shape of
``block_scaled_mm`` (k = n = 2,048, ``--m`` rows) and prints the peak above the starting
point: on CUDA from the allocator's own high-water mark, on the CPU from the process's
resident memory sampled every 2 ms.

    python bench/correctness_memory.py [--m 32768] [--device cpu|cuda]
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from evaluator.correctness import check_shape  # noqa: E402
from evaluator.operators import get_operator  # noqa: E402


def _resident_gib() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 2**20
    return 0.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--m", type=int, default=32768)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    spec = get_operator("block_scaled_mm")
    init = {"group_n": 128, "group_k": 128}
    inputs = {"m": args.m, "n": 2048, "k": 2048, **init}
    output_gib = args.m * 2048 * 4 / 2**30

    peak = [0.0]
    stop = threading.Event()
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
        start = torch.cuda.memory_allocated(device) / 2**30
    else:
        start = _resident_gib()

        def sample() -> None:
            while not stop.is_set():
                peak[0] = max(peak[0], _resident_gib())
                time.sleep(0.002)

        threading.Thread(target=sample, daemon=True).start()
    began = time.perf_counter()
    result = check_shape(
        spec=spec,
        reference=lambda **kw: spec.build_reference(init).to(device)(**kw),
        candidate=spec.build_reference(init).to(device),
        shape_id="bench",
        input_kwargs=inputs,
        device=device,
        run_seed=1,
    )
    seconds = time.perf_counter() - began
    stop.set()
    if device.type == "cuda":
        peak[0] = torch.cuda.max_memory_allocated(device) / 2**30
    above = peak[0] - start
    print(
        f"block_scaled_mm m={args.m} n=k=2048 on {device.type}: correct={result.ok}, "
        f"{result.trials} trials in {seconds:.1f} s"
    )
    print(
        f"output {output_gib:.3f} GiB; peak {above:.2f} GiB above the start "
        f"= {above / output_gib:.1f} outputs"
    )
    return 0 if result.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
