"""Scale-out: one submission's whole suite through the real stack on 1, 2, … GPU workers.

    python bench/gpu_scaleout.py --workers 1,2 [--bundle examples/bundles/triton-baseline]
        [--suite atrex-bench-v1] [--hardware h200-sxm] [--device cuda]
        [--time-budget-s S] [--timeout-s 540] [--json scaleout.json]

For each worker count N it builds a fresh embedded stack under a temporary folder (SQLite
and kombu's filesystem broker, the `make demo` defaults: nothing to install on a GPU node
but the Python packages), starts N real Celery evaluation workers on the hardware's queue
(``eval.<hardware>``), worker i pinned to GPU i with ``CUDA_VISIBLE_DEVICES`` as
``docker/entrypoint.sh gpu-node`` does, plus a site worker; sets ``ATREX_SHARDS_PER_RUN=N``;
submits the bundle once through ``submissions.services`` (as the upload form does), and
times it from submission to a final status. Each worker registers with the fleet on start
(GPU model, driver, measured ceilings) before the clock starts.

With ``--history results.json`` (an earlier evaluation on this hardware and suite) each
stack first imports it, so the shard planner balances shards by each operator's measured
wall time (``submissions.run_split.operator_costs``) instead of its shape count.

Prints one row per N: wall seconds, speed-up over the first N, each shard's operators,
shapes and wall seconds, the submission's status and aggregate score (the same bundle
should score the same however it is split). ``--json`` writes the rows and the workers'
registrations. A bench, not a test: ``tests/submissions/test_shards.py`` tests the shards.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

from fault_drill import Worker, wait_until

REPO = Path(__file__).resolve().parents[1]


@dataclass
class Row:
    workers: int
    status: str = ""
    wall_s: float = 0.0
    speedup: float | None = None
    aggregate: float | None = None
    shapes: int = 0
    shards: list[dict] = field(default_factory=list)
    fleet: list[dict] = field(default_factory=list)
    error: str = ""


def _zip_bundle(folder: Path):
    from django.core.files.uploadedfile import SimpleUploadedFile

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(folder.iterdir()):
            if path.is_file() and path.suffix in {".py", ".toml", ".md"}:
                archive.write(path, path.name)
    return SimpleUploadedFile(f"{folder.name}.zip", buffer.getvalue(), "application/zip")


def _environment(var: Path, args: argparse.Namespace, workers: int) -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("ATREX_", "DJANGO_"))}
    keep.pop("CUDA_VISIBLE_DEVICES", None)
    keep.pop("DATABASE_URL", None)
    keep.pop("CELERY_BROKER_URL", None)
    return {
        **keep,
        "DJANGO_SETTINGS_MODULE": "atrex_site.settings.local",
        "DJANGO_DEBUG": "false",
        "DJANGO_LOG_LEVEL": "WARNING",
        "ATREX_VAR_DIR": str(var),
        "ATREX_DEFAULT_SUITE": args.suite,
        "ATREX_DEFAULT_HARDWARE": args.hardware,
        "ATREX_WORKER_DEVICE": args.device,
        "ATREX_SHARDS_PER_RUN": str(workers),
        "ATREX_QUOTA_PER_HOUR": "0",
        "ATREX_QUOTA_PER_DAY": "0",
        "ATREX_QUOTA_ACTIVE": "0",
        "ATREX_FLEET_MEASURE_CEILINGS": "true" if args.device == "cuda" else "false",
        **({"ATREX_TIME_BUDGET_S": str(args.time_budget_s)} if args.time_budget_s else {}),
        "PYTHONPATH": os.pathsep.join(
            p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p
        ),
    }


def _setup_django(env: dict[str, str]) -> None:
    os.environ.clear()
    os.environ.update(env)
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    import django

    django.setup()


def _prepare_database(args: argparse.Namespace) -> None:
    from django.core.management import call_command

    from catalogue.services import hardware_profiles_sync, suite_version_import
    from evaluator.suite import load_suite

    call_command("migrate", verbosity=0)
    hardware_profiles_sync()
    suite_version_import(suite=load_suite(args.suite))


def _import_history(path: Path, args: argparse.Namespace) -> None:
    """An earlier results document of this hardware as history: the shard planner learns
    each operator's cost from it (as a fleet that has evaluated before has)."""
    from django.contrib.auth import get_user_model

    from catalogue import selectors
    from submissions.result_import import submission_import_results

    owner, _ = get_user_model().objects.get_or_create(username="scaleout-history")
    submission_import_results(
        owner=owner,
        report=json.loads(path.read_text()),
        suite_version=selectors.suite_version_pick(slug=args.suite),
        hardware=selectors.hardware_pick(slug=args.hardware),
        title=f"history: {path.name}",
        provenance_note=f"imported by bench/gpu_scaleout.py --history {path}",
        is_baseline=False,
    )


def _fleet() -> list[dict]:
    from fleet.models import WorkerNode

    fields = ("name", "queues", "cuda_visible_devices", "gpu_name", "driver", "torch_version",
              "triton_version", "ceilings_status", "copy_bytes_per_s",
              "bf16_gemm_flops_per_s")  # fmt: skip
    return list(WorkerNode.objects.order_by("name").values(*fields))


def measure(args: argparse.Namespace, workers: int) -> Row:
    """One worker count on its own stack (in its own process: Django is set up once)."""

    row = Row(workers=workers)
    root = Path(tempfile.mkdtemp(prefix=f"atrex-scaleout-{workers}-"))
    root.chmod(0o755)
    var = root / "var"
    var.mkdir()
    env = _environment(var, args, workers)
    _setup_django(env)
    _prepare_database(args)
    if args.history:
        _import_history(args.history, args)
    started_workers: list[Worker] = []
    try:
        gpus = [g for g in args.gpus.split(",") if g.strip()] if args.gpus else []
        queue = f"eval.{args.hardware}"
        for index in range(workers):
            worker_env = dict(env)
            if args.device == "cuda":
                worker_env["CUDA_VISIBLE_DEVICES"] = gpus[index] if gpus else str(index)
            started_workers.append(
                Worker(f"scale-{workers}-{index}", ["-Q", queue, "--prefetch-multiplier", "1"],
                       worker_env, root / f"worker-{index}.log")
            )  # fmt: skip
        started_workers.append(Worker("scale-site", ["-Q", "site"], env, root / "worker-site.log"))
        for worker in started_workers:
            worker.wait_ready(timeout_s=300)
        from django.contrib.auth import get_user_model

        from submissions import services

        owner, _ = get_user_model().objects.get_or_create(username="scaleout")
        started = time.monotonic()
        submission = services.submission_create(
            owner=owner, upload=_zip_bundle(Path(args.bundle)), title=f"scale-out x{workers}"
        )
        if submission.status != "queued":
            row.status, row.error = submission.status, submission.error_message
            return row

        next_report = [started + 30.0]

        def final() -> bool:
            submission.refresh_from_db()
            if time.monotonic() >= next_report[0]:  # a line every 30 s: a run cut from
                next_report[0] += 30.0  # outside still shows how far it got
                run = submission.runs.order_by("-pk").first()
                done = f"{run.shapes_done}/{run.shapes_total} shapes" if run else "no run yet"
                print(
                    f"  {workers} worker(s): {time.monotonic() - started:.0f} s, "
                    f"{submission.status}, {done}",
                    flush=True,
                )
            return submission.is_final

        try:
            wait_until(final, timeout_s=args.timeout_s, what="the submission final", poll_s=0.5)
        except RuntimeError as error:
            row.error = str(error)
        row.wall_s = round(time.monotonic() - started, 1)
        submission.refresh_from_db()
        row.status = submission.status
        row.error = row.error or submission.error_message or ""
        run = submission.runs.order_by("-pk").first()
        if run is not None:
            row.shapes = run.shapes_total
            for shard in run.shards.order_by("index", "attempt"):
                took = (
                    (shard.finished_at - shard.started_at).total_seconds()
                    if shard.started_at and shard.finished_at
                    else None
                )
                row.shards.append(
                    {
                        "index": shard.index,
                        "attempt": shard.attempt,
                        "worker": shard.worker,
                        "status": shard.status,
                        "operators": len(shard.operators),
                        "shapes": shard.shapes_total,
                        "wall_s": round(took, 1) if took is not None else None,
                    }
                )
        score = getattr(submission, "score", None)  # None until published
        row.aggregate = getattr(score, "aggregate", None)
        row.fleet = _fleet()
        return row
    finally:
        for worker in started_workers:
            worker.stop()
        if args.keep:
            print(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)


def print_rows(rows: list[Row]) -> None:
    print(f"{'workers':>7}  {'status':<10} {'wall_s':>8} {'speedup':>8} {'aggregate':>10}  shards")
    for row in rows:
        shards = "; ".join(
            f"#{s['index']} {s['operators']} ops/{s['shapes']} shapes "
            f"{s['wall_s']} s on {s['worker']}"
            for s in row.shards
        )
        aggregate = f"{row.aggregate:.4g}" if row.aggregate is not None else "-"
        speedup = f"{row.speedup:.2f}x" if row.speedup else "-"
        print(
            f"{row.workers:>7}  {row.status:<10} {row.wall_s:>8.1f} {speedup:>8} "
            f"{aggregate:>10}  {shards or '(one task)'}"
        )
        if row.error:
            print(f"         error: {row.error}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", default="1,2", help="worker counts, e.g. 1,2")
    parser.add_argument("--gpus", default="", help="GPU indices for the workers (default 0..N-1)")
    parser.add_argument("--bundle", default=str(REPO / "examples" / "bundles" / "triton-baseline"))
    parser.add_argument("--suite", default="atrex-bench-v1")
    parser.add_argument("--hardware", default="h200-sxm")
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    parser.add_argument("--time-budget-s", type=float, default=None)
    parser.add_argument("--timeout-s", type=float, default=540.0)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument(
        "--history",
        type=Path,
        default=None,
        help="a results.json of this hardware and suite to plan shards from (default: none, "
        "so shards are balanced by shape count)",
    )
    parser.add_argument("--keep", action="store_true", help="keep each stack's folder (logs)")
    parser.add_argument("--one", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--row-out", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one is not None:  # one worker count, in a process of its own
        row = measure(args, args.one)
        args.row_out.write_text(json.dumps(asdict(row), default=str))
        return 0
    counts = [int(n) for n in args.workers.split(",") if n.strip()]
    rows: list[Row] = []
    passthrough = sys.argv[1:]
    for count in counts:
        with tempfile.TemporaryDirectory() as scratch:
            out = Path(scratch) / "row.json"
            subprocess.run(  # noqa: S603 - this same script, for one worker count
                [
                    sys.executable,
                    __file__,
                    *passthrough,
                    "--one",
                    str(count),
                    "--row-out",
                    str(out),
                ],
                check=False,
            )
            row = (
                Row(**json.loads(out.read_text()))
                if out.exists()
                else Row(
                    workers=count, status="crashed", error="the measuring process wrote no row"
                )
            )
        if rows and rows[0].wall_s and row.wall_s and row.status == "published":
            row.speedup = round(rows[0].wall_s / row.wall_s, 3)
        rows.append(row)
        print_rows(rows[-1:])
        sys.stdout.flush()
    print()
    print_rows(rows)
    if args.json:
        import torch

        document = {
            "bundle": args.bundle,
            "suite": args.suite,
            "hardware": args.hardware,
            "device": args.device,
            "python": platform.python_version(),
            "torch": torch.__version__,
            "rows": [asdict(row) for row in rows],
        }
        args.json.write_text(json.dumps(document, indent=2, default=str))
    return 0 if all(row.status == "published" for row in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
