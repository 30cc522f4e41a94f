"""What the reference pool saves, and what it costs on disk (evaluator/reference_pool.py).

Three parts, each printed as a table (and all written with ``--json``):

``sizes``  the pool's bytes for a suite's shape set: per-shape output bytes from the
           reference run on the ``meta`` device, else the work model's written bytes
           (``q_write``), times ``--entries`` entries a shape; for each per-entry limit, how
           many shapes would be pooled and the pool's size.
``calls``  per shape of ``--operators`` (on ``--device``): the reference as a correctness
           trial runs it (built afresh, called on a copy of the inputs), against a pooled
           trial's path: the runner's ``ReferenceServer`` streaming the entry through a
           pipe, the child's ``PoolClient`` reading it, checking its SHA-256 and decoding it
           onto the device. Medians of ``--repeats``.
``secrecy`` how often an attacker that learns every entry it is handed knows every pooled
           trial of a shape, by pool size, uses and its share of the worker's runs
           (``replay_odds``, a simulation).
``runs``   (with ``--runs``) ``run_bundle`` on the bundle twice, without and with the pool
           (filled first, not counted), summing each shape's ``reference`` phase of
           results.json per operator: the figure the pool changes in a real evaluation.

    python3 bench/reference_pool.py --device cpu --suite atrex-bench-v1 --shape-set smoke \\
        --operators rms_norm,silu_and_mul,layer_norm,unified_attention,gated_delta_rule_update
    python3 bench/reference_pool.py --device cuda --suite atrex-bench-v1 --shape-set full \\
        --runs --kernels examples/bundles/triton-baseline --json pool-h200.json

The sizes use the v1 suite's full set unless ``--sizes-suite`` says otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

os.environ.setdefault("TRITON_INTERPRET", "1")

LIMITS_MIB = (1, 4, 16, 64, 256)


def output_bytes(shape: Any) -> tuple[int, bool]:
    """(bytes of the reference's output, measured): run on the ``meta`` device (shapes only,
    no memory); where the reference cannot run there (data-dependent code), the work
    model's written bytes (``q_write``), an estimate that can be far off (an output that
    holds every sequence's state, say)."""
    import torch

    from evaluator.operators import get_operator

    spec = get_operator(shape.operator)
    try:
        with torch.inference_mode():
            inputs = spec.input_maker(
                device=torch.device("meta"), generator=torch.Generator(), **shape.input_kwargs
            )
            output = spec.build_reference(shape.init_kwargs).to("meta")(**inputs)
    except Exception:  # not runnable on meta: the estimate
        return int(shape.q_write), False
    leaves = (
        output.values()
        if isinstance(output, dict)
        else output
        if isinstance(output, list | tuple)
        else [output]
    )
    return sum(
        leaf.numel() * leaf.element_size() for leaf in leaves if isinstance(leaf, torch.Tensor)
    ), True


def sizes(suite_name: str, shape_set: str, entries: int) -> dict[str, Any]:
    """The pool's bytes for the suite's shape set, by per-entry limit."""
    from evaluator.suite import load_suite

    suite = load_suite(suite_name)
    shapes = [s for s in suite.shapes if (shape_set == "smoke") == bool(s.smoke)]
    measured = [output_bytes(s) for s in shapes]
    outputs = [size for size, _ in measured]
    rows = []
    for limit in LIMITS_MIB:
        kept = [size for size in outputs if size <= limit * 2**20]
        rows.append(
            {
                "entry_limit_mib": limit,
                "shapes_pooled": len(kept),
                "pool_gib": round(entries * sum(kept) / 2**30, 2),
            }
        )
    return {
        "suite": suite_name,
        "shape_set": shape_set,
        "shapes": len(shapes),
        "shapes_measured_on_meta": sum(1 for _, ok in measured if ok),
        "entries": entries,
        "all_outputs_gib_per_entry": round(sum(outputs) / 2**30, 2),
        "all_pooled_gib": round(entries * sum(outputs) / 2**30, 1),
        "by_limit": rows,
    }


def replay_odds(
    *,
    entries: int,
    uses: int,
    low_water: int,
    trials: int,
    fresh: int,
    share: float,
    runs: int = 20000,
    seed: int = 1,
) -> float:
    """The share of an attacker's runs in which it knows every pooled trial's entry of a
    shape: it learns (and exfiltrates) each entry it is handed, other runs share the pool
    (``share``: the attacker's part of a worker's submissions), entries retire after
    ``uses`` and the pool is topped up under ``low_water``. With ``fresh`` >= 1 a run also
    has a trial no table can hold, whatever this figure is."""
    import random

    rng = random.Random(seed)
    live = {index: 0 for index in range(entries)}
    next_id = entries
    known: set[int] = set()
    attacker_runs = hits = 0
    pooled = trials - fresh
    for _ in range(runs):
        drawn = rng.sample(sorted(live), pooled)
        if rng.random() < share:
            attacker_runs += 1
            hits += all(entry in known for entry in drawn)
            known.update(drawn)
        for entry in drawn:
            live[entry] += 1
            if live[entry] >= uses:
                del live[entry]
        if len(live) < low_water:
            while len(live) < entries:
                live[next_id] = 0
                next_id += 1
    return hits / max(1, attacker_runs)


def secrecy() -> list[dict[str, Any]]:
    """replay_odds over pool sizes, uses and the attacker's share of a worker's runs."""
    rows = []
    for entries, uses in ((64, 8), (256, 8), (64, 4), (64, 2), (64, 1)):
        for share in (1.0, 0.25):
            odds = replay_odds(
                entries=entries, uses=uses, low_water=entries // 2, trials=3, fresh=0,
                share=share,
            )  # fmt: skip
            rows.append(
                {
                    "entries": entries,
                    "uses": uses,
                    "attacker_share": share,
                    "all_3_trials_known": round(odds, 4),
                    "all_15_shapes_known": odds**15,
                }
            )
            print(
                f"  {entries:>3} entries, {uses} uses, attacker {share:>4.0%} of runs: every "
                f"trial of a shape known in {odds:.1%} of its runs; all 15 shapes of an "
                f"operator: {odds**15:.1e}"
            )
    return rows


def _median_s(function: Any, repeats: int, device: Any) -> float:
    import torch

    times = []
    for _ in range(repeats):
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        started = time.perf_counter()
        function()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def _shape_figures(
    *, pool: Any, suite_hash: str, spec: Any, shape: Any, device: Any, repeats: int
) -> dict[str, Any]:
    """One shape: fill ``repeats`` entries, time the reference call and the pooled fetch."""
    import torch

    from evaluator.correctness import clone_inputs
    from evaluator.reference_pool import PoolClient, PoolShape, fill_plan, plan_file

    pool_shape = PoolShape(
        operator=spec.slug,
        shape_id=shape.shape_id,
        init_kwargs=dict(shape.init_kwargs or {}),
        input_kwargs=dict(shape.input_kwargs or {}),
        q_write=shape.q_write,
    )
    started = time.perf_counter()
    fill_plan(
        plan_file(suite_hash, [pool_shape], pool.settings, str(device)),
        environment=pool.environment,
    )
    fill_s = time.perf_counter() - started
    with torch.inference_mode():
        inputs = spec.make_inputs(device=device, seed=1, **shape.input_kwargs)

        def reference() -> Any:
            model = spec.build_reference(shape.init_kwargs).to(device)
            return model(**clone_inputs(inputs))

        reference()  # warm-up
        reference_s = _median_s(reference, repeats, device)
    state = pool.state(suite_hash, pool_shape)
    entry_ids = list(state["entries"])
    if state.get("not_pooled") or len(entry_ids) < repeats:
        # The fill refused the shape (its index says why: an output the pool cannot store):
        # its reference as measured, no fetch.
        return {
            "output_bytes": 0,
            "reference_ms": round(reference_s * 1e3, 3),
            "pooled_ms": None,
            "fill_ms_per_entry": round(fill_s / repeats * 1e3, 3),
            "not_pooled": state.get("not_pooled") or f"{len(entry_ids)} entries of {repeats}",
        }
    plan = [{"entry": entry, "seed": 0} for entry in entry_ids]
    server = pool.server(suite_hash, {shape.shape_id: (pool_shape, plan)})
    read_fd, write_fd = os.pipe()
    workers: list[threading.Thread] = []

    def request(message: dict[str, Any]) -> None:
        # The runner's side, as evaluator.runner._follow serves a child's request.
        worker = threading.Thread(target=server.serve, args=(write_fd, message))
        worker.start()
        workers.append(worker)

    client = PoolClient(read_fd, request)
    pending = iter(entry_ids)

    def fetch() -> Any:
        output, problem = client.fetch(shape.shape_id, next(pending), device)
        assert problem is None, problem
        return output

    try:
        pooled_s = _median_s(fetch, repeats, device)
    finally:
        for worker in workers:
            worker.join()
        os.close(read_fd)
        os.close(write_fd)
    return {
        "output_bytes": state["entries"][entry_ids[0]]["nbytes"],
        "reference_ms": round(reference_s * 1e3, 3),
        "pooled_ms": round(pooled_s * 1e3, 3),
        "fill_ms_per_entry": round(fill_s / repeats * 1e3, 3),
    }


def calls(
    suite_name: str,
    shape_set: str,
    operators: list[str],
    device_name: str,
    repeats: int,
    max_shapes: int | None = None,
) -> list[dict[str, Any]]:
    """Per shape: the reference call against a pooled trial's fetch (server, pipe, client)."""
    import torch

    from evaluator.environment import collect_environment
    from evaluator.operators import get_operator
    from evaluator.reference_pool import PoolSettings, ReferencePool
    from evaluator.suite import load_suite

    device = torch.device(device_name)
    suite = load_suite(suite_name)
    environment = collect_environment(device_name)
    rows = []
    with tempfile.TemporaryDirectory(prefix="pool-bench-") as folder:
        settings = PoolSettings(
            directory=folder, entries=repeats, low_water=1, fresh_trials=0, uses=10**6,
            max_bytes=2**40, entry_max_bytes=2**34, min_saving_s=0.0,
            fetch_bytes_per_s=float("inf"),  # every shape pooled, to time its fetch
        )  # fmt: skip
        pool = ReferencePool(settings, environment=environment).open()
        for operator in operators:
            spec = get_operator(operator)
            shapes = suite.shapes_for(operator, shape_set)
            if max_shapes:  # the smallest outputs
                shapes = sorted(shapes, key=lambda s: s.q_write)[:max_shapes]
            for shape in shapes:
                row = _shape_figures(
                    pool=pool, suite_hash=suite.content_hash, spec=spec, shape=shape,
                    device=device, repeats=repeats,
                )  # fmt: skip
                rows.append({"operator": operator, "shape_id": shape.shape_id, **row})
                if row["pooled_ms"] is None:
                    print(
                        f"{operator:<26} {shape.shape_id:<10} not pooled ({row['not_pooled']}); "
                        f"reference {row['reference_ms']:>9.3f} ms",
                        flush=True,
                    )
                    continue
                print(
                    f"{operator:<26} {shape.shape_id:<10} {row['output_bytes'] / 2**20:>9.3f} "
                    f"MiB  reference {row['reference_ms']:>9.3f} ms  pooled "
                    f"{row['pooled_ms']:>8.3f} ms",
                    flush=True,
                )
    return rows


def runs(args: argparse.Namespace, operators: list[str]) -> dict[str, Any]:
    """run_bundle without and with the pool: the reference phase per operator."""
    from full_suite_walltime import write_bundle

    from evaluator.reference_pool import PoolSettings
    from evaluator.runner import run_bundle

    figures: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="pool-runs-") as scratch:
        bundle = write_bundle(Path(scratch) / "bundle", operators, args.kernels)
        settings = PoolSettings(directory=str(Path(scratch) / "pool"))
        for label, pool in (("fill", settings), ("without", None), ("with", settings)):
            started = time.perf_counter()
            results = run_bundle(
                bundle_path=bundle, suite=args.suite, hardware=None, device=args.device,
                operators=operators, shape_set=args.shape_set, log_dir=Path(scratch) / label,
                reference_pool=pool,
            )  # fmt: skip
            wall = time.perf_counter() - started
            per_operator = {}
            for entry in results["operators"]:
                per_operator[entry["operator"]] = {
                    "reference_s": round(
                        sum((s.get("wall_s") or {}).get("reference", 0.0) for s in entry["shapes"]),
                        3,
                    ),
                    "statuses": sorted({s["status"] for s in entry["shapes"]}),
                    "pooled_trials": sum(
                        (s.get("reference_pool") or {}).get("pooled", 0) for s in entry["shapes"]
                    ),
                }
            figures[label] = {
                "wall_s": round(wall, 2),
                "pool": results["environment"].get("reference_pool"),
                "operators": per_operator,
            }
            print(f"run {label}: {wall:.1f} s", flush=True)
    for operator in figures["without"]["operators"]:
        before = figures["without"]["operators"][operator]
        after = figures["with"]["operators"][operator]
        print(
            f"{operator:<26} reference {before['reference_s']:>8.3f} s -> "
            f"{after['reference_s']:>8.3f} s  ({after['pooled_trials']} pooled trials; "
            f"{before['statuses']} / "
            f"{after['statuses']})"
        )
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--suite", default="atrex-bench-v1")
    parser.add_argument("--shape-set", default="smoke", choices=("smoke", "full"))
    parser.add_argument("--device", default="cpu")
    parser.add_argument(
        "--operators",
        default="rms_norm,silu_and_mul,layer_norm,unified_attention,gated_delta_rule_update",
    )
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument(
        "--max-shapes", type=int, default=None, help="per operator, the smallest outputs"
    )
    parser.add_argument("--entries", type=int, default=64, help="entries per shape (sizes)")
    parser.add_argument("--sizes-suite", default="atrex-bench-v1")
    parser.add_argument("--sizes-shape-set", default="full", choices=("smoke", "full"))
    parser.add_argument("--runs", action="store_true", help="also run the bundle both ways")
    parser.add_argument("--kernels", type=Path, default=ROOT / "examples/bundles/triton-baseline")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    operators = [o.strip() for o in args.operators.split(",") if o.strip()]
    report: dict[str, Any] = {"device": args.device}
    report["sizes"] = sizes(args.sizes_suite, args.sizes_shape_set, args.entries)
    size = report["sizes"]
    print(
        f"{size['suite']} {size['shape_set']}: {size['shapes']} shapes "
        f"({size['shapes_measured_on_meta']} measured on meta, the rest q_write), outputs "
        f"{size['all_outputs_gib_per_entry']} GiB per entry set, {size['entries']} entries: "
        f"{size['all_pooled_gib']} GiB"
    )
    for row in size["by_limit"]:
        print(
            f"  entry limit {row['entry_limit_mib']:>4} MiB: {row['shapes_pooled']:>3} shapes "
            f"pooled, {row['pool_gib']} GiB"
        )
    print("replay odds, all 3 trials pooled (no fresh trial):")
    report["secrecy"] = secrecy()
    report["calls"] = calls(
        args.suite, args.shape_set, operators, args.device, args.repeats, args.max_shapes
    )
    if args.runs:
        report["runs"] = runs(args, operators)
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
