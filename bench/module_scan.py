"""What the CUDA fallback monitor's scan of the loaded modules costs per shape report.

``evaluator.fallback_cuda.triton_kernel_names`` reads every loaded module (its file made
real, its globals searched for Triton kernels) at each shape's report. Files of installed
code loaded by the child's warm-up are resolved once there (``remember_real_paths``);
modules loaded later (Triton's, when the warm-up did not load it, the bundle's, what the
first compile imports) were resolved in full at every scan: an ``lstat`` for each part of
each path. A scan now resolves each folder once (``elf_symbols.real_path_resolver``).
Since harness 0.3.7 a child's shapes share a ``fallback_cuda.ModuleScanMemo``: after the
first scan, the modules outside the bundle are read again only when the loaded modules
changed; the third row times those scans.

This runs on the CPU (the scan is host work; no GPU is needed): it imports what a child's
warm-up does, remembers the real paths as the warm-up does, then imports Triton and the
Triton baseline's ``rms_norm`` from a bundle folder, and times the scan both ways::

    python3 bench/module_scan.py [--scans 30] [--no-remember]

``--no-remember`` leaves the warm-up's table empty (every module resolved at each scan).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import statistics
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scans", type=int, default=30)
    parser.add_argument("--no-remember", action="store_true")
    args = parser.parse_args()

    import torch  # noqa: F401  (what the warm-up loads)

    import evaluator.baselines  # noqa: F401
    import evaluator.correctness  # noqa: F401
    import evaluator.operators  # noqa: F401
    from evaluator import elf_symbols, fallback_cuda

    if not args.no_remember:
        files = [getattr(m, "__file__", None) for m in list(sys.modules.values())]
        paths = sysconfig.get_paths()
        roots = {paths.get(key) for key in ("stdlib", "platstdlib", "purelib", "platlib")}
        elf_symbols.remember_real_paths(
            [f for f in files if isinstance(f, str)], [os.path.realpath(r) for r in roots if r]
        )
    remembered = len(elf_symbols._REAL_PATHS)
    import triton  # noqa: F401  (loaded by the candidate where the warm-up did not)

    with tempfile.TemporaryDirectory(prefix="atrex-scan-") as scratch:
        bundle = Path(scratch) / "bundle"
        bundle.mkdir()
        shutil.copy(ROOT / "examples/bundles/triton-baseline/rms_norm.py", bundle / "rms_norm.py")
        spec = importlib.util.spec_from_file_location(
            "atrex_candidate_rms_norm", bundle / "rms_norm.py"
        )
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)

        files = [f for f in (getattr(m, "__file__", None) for m in list(sys.modules.values()))]
        files = [f for f in files if isinstance(f, str)]
        folders = {os.path.dirname(f) for f in files}
        print(
            f"{len(files)} loaded modules with a file in {len(folders)} folders; "
            f"{remembered} paths remembered at the warm-up"
        )
        resolver = fallback_cuda.real_path_resolver
        results = {}
        for label, make in (
            ("per module (before)", lambda: elf_symbols.real_path),
            ("per folder (after)", resolver),
        ):
            fallback_cuda.real_path_resolver = make
            times = []
            for _ in range(args.scans):
                started = time.perf_counter()
                own, _foreign = fallback_cuda.triton_kernel_names(bundle)
                times.append(time.perf_counter() - started)
            results[label] = own
            print(
                f"{label:<22} median {statistics.median(times) * 1e3:7.1f} ms  "
                f"min {min(times) * 1e3:7.1f} ms  over {args.scans} scans; own kernels "
                f"{sorted(own)}"
            )
        fallback_cuda.real_path_resolver = resolver
        memo = fallback_cuda.ModuleScanMemo()
        fallback_cuda.triton_kernel_names(bundle, memo)  # the first shape's report
        times = []
        for _ in range(args.scans):
            started = time.perf_counter()
            own, _foreign = fallback_cuda.triton_kernel_names(bundle, memo)
            times.append(time.perf_counter() - started)
        results["remembered"] = own
        print(
            f"{'remembered (memo)':<22} median {statistics.median(times) * 1e3:7.1f} ms  "
            f"min {min(times) * 1e3:7.1f} ms  over {args.scans} scans after the first; own "
            f"kernels {sorted(own)}"
        )
        assert len({frozenset(found) for found in results.values()}) == 1, "the scans disagree"
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
