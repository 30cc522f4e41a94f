"""The CPU own-kernel share of the example bundles, on an idle host and on a loaded one.

The CPU fallback monitor (``evaluator.fallback_cpu``) judges a correct answer a fallback
when its own-kernel share is under the suite's threshold (0.8). This prints that share for
the honest Triton example (``examples/bundles/triton-baseline``, should stay near 1.0) and
the PyTorch example (``examples/bundles/pytorch-eager``, should stay far under 0.8), each
measured ``--repeats`` times as the runner measures it (three watched calls, the bundle's
folder as its own code), first as the host is, then while ``--load`` busy-loop processes
compete for the cores:

    TRITON_INTERPRET=1 python3 bench/fallback_cpu_load.py [--load 4] [--repeats 5]
        [--operators rms_norm,silu_and_mul,fused_add_rms_norm] [--json out.json]

Each row: the smallest and the median share over the repeats; loaded, also its two time
shares (in own kernels; outside PyTorch's compute ops). Run it at two commits to compare
two ways of measuring; the figures depend on the host, so they are printed, never
asserted.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

os.environ.setdefault("TRITON_INTERPRET", "1")  # before triton is first imported

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from evaluator.fallback import measure_fallback, prepare_monitoring  # noqa: E402
from evaluator.operators import get_operator  # noqa: E402
from evaluator.suite import load_suite  # noqa: E402

BUNDLES = {
    "triton": ROOT / "examples" / "bundles" / "triton-baseline",
    "pytorch": ROOT / "examples" / "bundles" / "pytorch-eager",
}
BUSY_LOOP = "import time\nend = time.monotonic() + {seconds}\nwhile time.monotonic() < end: pass\n"


def start_load(processes: int, seconds: float) -> list[subprocess.Popen]:
    """``processes`` busy loops, each ending by itself after ``seconds``."""
    code = BUSY_LOOP.format(seconds=seconds)
    return [subprocess.Popen([sys.executable, "-c", code]) for _ in range(processes)]


def stop_load(load: list[subprocess.Popen]) -> None:
    """Kill the busy loops this script started."""
    for process in load:
        process.kill()
    for process in load:
        process.wait()


def smoke_shape(operator: str) -> dict[str, Any]:
    """The input kwargs of the operator's first smoke shape in the v0.1 suite."""
    suite = load_suite("atrex-bench-v0.1").restrict([operator])
    (shape,) = [s for s in suite.shapes if s.smoke and s.shape_id == "smoke-0"]
    return dict(shape.input_kwargs)


def load_model(bundle: Path, operator: str) -> torch.nn.Module:
    """The bundle's ``Model`` for ``operator``."""
    name = f"bench_{bundle.name.replace('-', '_')}_{operator}"
    spec = importlib.util.spec_from_file_location(name, bundle / f"{operator}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.Model()


def shares(operator: str, bundle: Path, repeats: int) -> dict[str, list[float | None]]:
    """The own-kernel share, share in own kernels and share by time (outside PyTorch's
    compute) of ``repeats`` measurements."""
    spec = get_operator(operator)
    kwargs = smoke_shape(operator)
    inputs = spec.make_inputs(device=torch.device("cpu"), seed=3, **kwargs)
    work = spec.work({}, kwargs)
    model = load_model(bundle, operator)
    found: dict[str, list[float | None]] = {"share": [], "in_own_kernels": [], "by_time": []}
    with torch.inference_mode():
        model(**inputs)  # compile and warm up outside the measurement, as the runner's trials
        for _ in range(repeats):
            report = measure_fallback(
                lambda: model(**inputs),
                device=torch.device("cpu"),
                q_bytes=work.q_read + work.q_write,
                own_code_dir=bundle,
            )
            found["share"].append(report.own_kernel_share)
            found["in_own_kernels"].append(report.share_in_own_kernels)
            found["by_time"].append(report.share_by_time)
    return found


def summary(values: list[float | None]) -> str:
    """'min / median' of the measured values."""
    known = [v for v in values if v is not None]
    if not known:
        return "-"
    return f"{min(known):.3f} / {statistics.median(known):.3f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--operators", default="rms_norm,silu_and_mul,fused_add_rms_norm")
    parser.add_argument("--load", type=int, default=4, help="busy-loop processes when loaded")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    prepare_monitoring(torch.device("cpu"))
    rows = []
    print(f"cores: {os.cpu_count()}, load: {args.load} busy-loop processes; min / median share")
    header = ("idle", "loaded", "in own, loaded", "by time, loaded")
    print(f"{'operator':<20} {'bundle':<8} " + " ".join(f"{h:>15}" for h in header))
    for operator in args.operators.split(","):
        for label, bundle in BUNDLES.items():
            if not (bundle / f"{operator}.py").exists():
                continue
            idle = shares(operator, bundle, args.repeats)
            load = start_load(args.load, seconds=600)
            try:
                loaded = shares(operator, bundle, args.repeats)
            finally:
                stop_load(load)
            rows.append({"operator": operator, "bundle": label, "idle": idle, "loaded": loaded})
            print(
                f"{operator:<20} {label:<8} {summary(idle['share']):>15} "
                f"{summary(loaded['share']):>15} {summary(loaded['in_own_kernels']):>15} "
                f"{summary(loaded['by_time']):>15}",
                flush=True,
            )
    if args.json:
        args.json.write_text(json.dumps({"load": args.load, "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
