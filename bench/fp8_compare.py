"""How long the fp8 code comparison takes, with and without skipping the chunks whose codes
and scales are the reference's bit for bit (``evaluator.correctness._same_codes_and_scales``).

    python3 bench/fp8_compare.py [--device cuda] [--tokens 262144] [--hidden 2048] [--repeat 3]

The reference is per_token_group_quant_fp8's (group 128) on N(0,1) bf16 inputs; the
candidates are its own output copied (every chunk the same), and the copy with one code a
grid step off in the first chunk. Prints the best of ``--repeat`` for each, in seconds.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from evaluator import correctness  # noqa: E402
from evaluator.operators.base import Fp8CodePolicy  # noqa: E402
from evaluator.operators.per_token_group_quant_fp8 import Model  # noqa: E402


def best_of(repeat: int, call, device: torch.device) -> float:
    times = []
    for _ in range(repeat):
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        start = time.perf_counter()
        call()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--tokens", type=int, default=262_144)
    parser.add_argument("--hidden", type=int, default=2048)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    device = torch.device(args.device)
    generator = torch.Generator(device=device).manual_seed(0)
    x = torch.randn(
        (args.tokens, args.hidden), dtype=torch.bfloat16, device=device, generator=generator
    )
    reference = Model(128)(x)
    codes, scales = reference["quantized"], reference["scales"]
    off = codes.clone()
    off.view(torch.uint8)[0, 0] ^= 1  # one code a grid step off, in the first chunk
    rule = Fp8CodePolicy(max_step_share=0.01, scale_leaf="scales")
    skip = correctness._same_codes_and_scales
    print(f"{args.tokens} x {args.hidden} codes on {device}, best of {args.repeat} (s)")
    print(f"{'candidate':<28}{'full passes':>12}{'skipping same':>15}")
    for name, candidate in (("the same codes", codes.clone()), ("one code off", off)):
        pair = (scales, scales.clone())

        def compare(candidate=candidate, pair=pair):
            return correctness.compare_fp8_codes(
                codes, candidate, rule=rule, where="bench", scales=pair
            )

        correctness._same_codes_and_scales = lambda *a: False
        full = best_of(args.repeat, compare, device)
        first = compare()
        correctness._same_codes_and_scales = skip
        skipping = best_of(args.repeat, compare, device)
        assert compare() == first, "the two ways disagree"
        print(f"{name:<28}{full:>12.3f}{skipping:>15.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
