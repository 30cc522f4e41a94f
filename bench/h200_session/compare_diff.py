"""The float comparison (``correctness._compare_floating``) of this tree against another
tree's (``--old``), on the device: the same Comparison for random outputs with NaN,
infinities and chunk boundaries, and each one's time. Session 21 ran it with a version that
read every figure from the device at once against 0.3.12's (seven reads a chunk): the same
results and the same time, so that version was left out
(``results/2026-12-04-h200-session21/call3/compare-diff.txt``).

    python3 bench/h200_session/compare_diff.py --old s21-before --device cuda [--trials 400]
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from evaluator import correctness as new  # noqa: E402
from evaluator.operators.base import CorrectnessPolicy  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--old", type=Path, required=True, help="a tree of the harness before")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--trials", type=int, default=300)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    spec = importlib.util.spec_from_file_location(
        "old_correctness", args.old / "evaluator" / "correctness.py"
    )
    old = importlib.util.module_from_spec(spec)
    sys.modules["old_correctness"] = old
    spec.loader.exec_module(old)
    device = torch.device(args.device)

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize()

    rng = random.Random(21)
    generator = torch.Generator(device=device).manual_seed(21)
    differences, failed = [], 0
    for trial in range(args.trials):
        n = rng.choice([1, 7, 1000, 65536])
        dtype = rng.choice([torch.float32, torch.bfloat16, torch.float16])
        ref = torch.randn(n, generator=generator, device=device).to(dtype)
        noise = torch.randn(n, generator=generator, device=device) * rng.choice(
            [0, 1e-3, 1e-2, 0.1]
        )
        cand = (ref.float() + noise).to(dtype)
        for tensor in (ref, cand):
            if rng.random() < 0.3:
                index = torch.randint(0, n, (max(1, n // 50),), generator=generator, device=device)
                tensor[index] = rng.choice([float("nan"), float("inf"), -float("inf"), 0.0])
        policy = CorrectnessPolicy(
            rtol=rng.choice([0.0, 1e-2]), atol_scale=rng.choice([0.0, 1e-3]),
            atol_floor=rng.choice([0.0, 1e-5]), max_mismatch_share=rng.choice([0.0, 0.01]),
        )  # fmt: skip
        chunk = rng.choice([1 << 24, 4096, 333])
        new.FLOAT_CHUNK_ELEMENTS = old.FLOAT_CHUNK_ELEMENTS = chunk
        a = old._compare_floating(ref, cand, policy=policy, where="w")
        b = new._compare_floating(ref, cand, policy=policy, where="w")
        failed += not a.ok
        if str(dataclasses.astuple(a)) != str(dataclasses.astuple(b)):
            differences.append({"trial": trial, "old": str(a), "new": str(b)})
    new.FLOAT_CHUNK_ELEMENTS = old.FLOAT_CHUNK_ELEMENTS = 1 << 24
    timings = {}
    policy = CorrectnessPolicy(rtol=2.0**-7, atol_scale=1e-3)
    for n in (4096, 1 << 20, 1 << 24):
        ref = torch.randn(n, device=device).to(torch.bfloat16)
        cand = ref.clone()
        for name, module in (("old", old), ("this", new)):
            for _ in range(3):
                module._compare_floating(ref, cand, policy=policy, where="w")
            sync()
            started = time.perf_counter()
            for _ in range(20):
                module._compare_floating(ref, cand, policy=policy, where="w")
            sync()
            timings[f"{name} n={n}"] = round((time.perf_counter() - started) / 20 * 1e3, 3)
    print(f"{args.trials} random comparisons ({failed} failing under the old tree): "
          f"{len(differences)} differ")  # fmt: skip
    for key, value in timings.items():
        print(f"  {key}: {value} ms a comparison")
    for difference in differences[:5]:
        print(difference)
    if args.json:
        args.json.write_text(json.dumps(
            {"trials": args.trials, "failing": failed, "differences": differences,
             "ms_per_comparison": timings}, indent=1))  # fmt: skip
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main())
