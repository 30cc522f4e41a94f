"""The command line: ``python -m evaluator run BUNDLE [options]`` (see docs/architecture.md)
and ``python -m evaluator validate-suite SUITE_JSON [--device meta|cpu] [--out report.json]``
and ``python -m evaluator ceilings [--device cuda|cpu] [--out ceilings.json]``
and ``python -m evaluator work`` (shapes' W/Q: JSON on stdin, JSON on stdout; see
``evaluator.work``), ``python -m evaluator serve [run's options]`` (an agent campaign's
rounds, one bundle after another; see ``evaluator.serve``) and ``python -m evaluator pool
fill --pool DIR --suite S --device D`` (the worker's reference pool, see
``evaluator.reference_pool``). The site starts each of them through ``evaluator.launch``.

Exit codes: 0 when results were written (whatever the candidate did), 2 for a bundle or
request the user must fix (message on stderr; results.json still written with
``"error"``), 1 for a platform failure.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import traceback
from pathlib import Path
from typing import Any

from evaluator.errors import AtrexError, UserError
from evaluator.results import results_document, write_results

EXIT_OK, EXIT_PLATFORM, EXIT_USER = 0, 1, 2


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``python -m evaluator``."""
    parser = argparse.ArgumentParser(
        prog="python -m evaluator", description="Atrex-Bench evaluator"
    )
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="evaluate a bundle and write results.json")
    run.add_argument("bundle", help=".zip, .tar.gz/.tgz, a single .py, or a directory")
    _run_options(run)
    serve = commands.add_parser(
        "serve",
        help="an agent campaign's evaluator: one round after another (requests on stdin)",
        description=(
            "Evaluate one bundle after another, each as 'run' would with these options, "
            'from JSON requests on stdin, one a line ({"bundle", "operators", "out", '
            '"progress", "log_dir"}), answering {"exit": CODE} a line on stdout; the '
            "next round's sandboxed child is started ahead (see evaluator/serve.py). "
            "Exits when stdin closes."
        ),
    )
    _run_options(serve)
    serve.add_argument(
        "--parent-pid", type=int, default=None, help="exit at once if this is not the parent"
    )
    serve.add_argument(
        "--triton-cache",
        default=True,
        action=argparse.BooleanOptionalAction,
        help="keep what a round's kernels compiled for a later round of the very same source "
        "(keyed by its digest; default: on)",
    )
    _other_commands(commands)
    return parser


def start_ahead_depth_from_environment() -> int:
    """``ATREX_START_AHEAD_DEPTH`` (1 or 2; ``runner.DEFAULT_START_AHEAD_DEPTH`` where
    unset)."""
    from evaluator.runner import DEFAULT_START_AHEAD_DEPTH

    raw = os.environ.get("ATREX_START_AHEAD_DEPTH", "").strip()
    if raw in ("", "1", "2"):
        return int(raw) if raw else DEFAULT_START_AHEAD_DEPTH
    raise UserError(
        f"ATREX_START_AHEAD_DEPTH={raw!r}: set it to 1 or 2 (how many operators' children "
        "warm up ahead of their turn).",
        code="cli:start-ahead-depth",
    )


def _run_options(run: argparse.ArgumentParser) -> None:
    """The options of ``run`` (and of ``serve``, which applies them to every round)."""
    run.add_argument(
        "--suite",
        default="atrex-bench-v0.1",
        help="suite name (evaluator/suites/<name>.json) or a path",
    )
    run.add_argument(
        "--operators", default=None, help="comma-separated operator slugs (default: every operator)"
    )
    run.add_argument(
        "--hardware",
        default=None,
        help="hardware profile (default: cpu-dev on cpu, h200-sxm on cuda)",
    )
    run.add_argument("--device", default="cuda", choices=("cpu", "cuda"))
    run.add_argument(
        "--shapes",
        default=None,
        choices=("smoke", "full"),
        help="shape set (default: smoke on cpu, full on cuda)",
    )
    run.add_argument(
        "--seed",
        type=int,
        default=None,
        help="secret per-run seed (default: random; never written out)",
    )
    run.add_argument("--out", default="results.json", help="where to write results.json")
    run.add_argument("--progress", default=None, help="progress file (JSON lines, appended)")
    run.add_argument(
        "--time-budget-s",
        type=float,
        default=None,
        help="per-shape timing budget in seconds (default: 2 on cpu, 1 on cuda)",
    )
    run.add_argument(
        "--log-dir",
        default=None,
        help="where the per-operator child logs go (default: <out>.logs/)",
    )
    run.add_argument(
        "--operator-hint", default=None, help="the operator a lone generated_kernel.py implements"
    )
    run.add_argument(
        "--visibility",
        default="all",
        choices=("all", "public"),
        help="'public' measures only the suite's public shapes and runs no hidden validation "
        "variant (an agent's rounds); default: all shapes, hidden ones and variants included",
    )
    run.add_argument(
        "--sandbox",
        default=None,
        choices=("required", "best-effort"),
        help="'required': a sandbox protection this machine cannot give is a platform error; "
        "default: $ATREX_SANDBOX, else best-effort (missing protections are reported)",
    )
    run.add_argument(
        "--start-ahead",
        default=None,
        action=argparse.BooleanOptionalAction,
        help="start the next operator's child (its harness only) while one measures, and the "
        "sanitizer's children while the last one does; default: on cuda, where that start-up "
        "is seconds of device and profiler set-up",
    )
    run.add_argument(
        "--start-ahead-depth",
        type=int,
        choices=(1, 2),
        default=None,
        help="with --start-ahead, how many operators' children warm up ahead of their turn "
        "(2 needs a sandbox user more; default: $ATREX_START_AHEAD_DEPTH, else 2)",
    )
    run.add_argument(
        "--concurrency",
        default=None,
        metavar="N",
        help="evaluate up to N operators at once on the one device, their timing exclusive "
        "(each child a sandbox user of its own: ATREX_SANDBOX_MORE_USERS); default: "
        "$ATREX_CONCURRENCY, else 1 (one operator at a time)",
    )
    run.add_argument(
        "--operator-costs",
        default=None,
        metavar="FILE",
        help="with --concurrency above 1: each operator's expected seconds, as a JSON object "
        "{operator: seconds} or an earlier results.json (its operators' wall_s), so that the "
        "most expensive operators start first (default: the suite's order)",
    )
    run.add_argument(
        "--sanitizer-tools",
        default=None,
        metavar="TOOLS",
        help="compute-sanitizer tools run once on each operator's smallest shape, "
        "comma-separated from memcheck, racecheck, initcheck, or 'none' (default on cuda: "
        "memcheck, then racecheck where a kernel uses shared memory; none on cpu)",
    )
    run.add_argument(
        "--hide",
        action="append",
        default=[],
        metavar="PATH",
        help="a file or folder the candidate must not see (repeatable; e.g. the site's media "
        "folder, database folder, settings)",
    )
    run.add_argument(
        "--shape-timeout-s",
        type=float,
        default=None,
        help="longest silence allowed from a child: importing the candidate, or one shape "
        "(default 300)",
    )
    _pool_options(run)
    _timings_options(run)
    _measurement_options(run)


def _measurement_options(run: argparse.ArgumentParser) -> None:
    from evaluator import measurement_policy as full

    run.add_argument(
        "--trials", type=int, default=None, metavar="N",
        help="at most N correctness trials per shape (default: each operator's own count). "
        "Fewer makes the run's measurement kind 'round': never published on a board",
    )  # fmt: skip
    run.add_argument(
        "--min-reps", type=int, default=full.MIN_REPS, metavar="N",
        help=f"timed calls at least, candidate and eager each (default {full.MIN_REPS}; "
        "fewer: kind 'round')",
    )  # fmt: skip
    run.add_argument(
        "--target-rel-se", type=float, default=full.TARGET_REL_SE, metavar="X",
        help="time until the median's standard error is under X of it (or the budget is "
        f"spent; default {full.TARGET_REL_SE}; more: kind 'round')",
    )  # fmt: skip


def measurement_policy(args: argparse.Namespace) -> Any:
    """The MeasurementPolicy the options give (``evaluator.measurement_policy``)."""
    from evaluator.measurement_policy import MeasurementPolicy

    return MeasurementPolicy(
        trials=args.trials, min_reps=args.min_reps, target_rel_se=args.target_rel_se
    )


def _other_commands(commands: Any) -> None:
    """``pool fill``, ``validate-suite``, ``ceilings`` and ``work``."""
    pool = commands.add_parser(
        "pool",
        help="the worker's reference-output pool (fill it ahead, e.g. when a suite is published)",
    )
    pool_commands = pool.add_subparsers(dest="pool_command", required=True)
    fill = pool_commands.add_parser(
        "fill",
        help="compute reference outputs for secret seeds of every shape of a suite",
        description=(
            "Fill the pool folder up to --pool-entries live entries per shape of the suite "
            "(this worker's versions; shapes whose outputs are over the limits are marked not "
            "pooled). Prints a JSON report on stdout. Run as the harness's user."
        ),
    )
    fill.add_argument("--pool", dest="reference_pool", default=None, metavar="DIR")
    fill.add_argument("--suite", default="atrex-bench-v1")
    fill.add_argument("--device", default="cuda", choices=("cpu", "cuda"))
    fill.add_argument("--operators", default=None, help="comma-separated (default: all)")
    fill.add_argument(
        "--shapes", default="all", choices=("smoke", "full", "all"), help="default: all"
    )
    fill.add_argument("--plan", default=None, help=argparse.SUPPRESS)  # the runner's request
    _pool_sizes(fill)
    validate = commands.add_parser(
        "validate-suite",
        help="check a (draft) suite file against the built-in operators",
        description=(
            "Check every shape of a suite file: its kwargs against the reference and input "
            "generator, its W/Q against the work model, its weight. Exit 0 when there are no "
            "errors, 2 when there are (the report lists them)."
        ),
    )
    validate.add_argument("suite_json", help="a suite .json file (a draft need not be sealed)")
    validate.add_argument(
        "--device",
        default="meta",
        choices=("meta", "cpu"),
        help="where inputs are drawn (default: meta, which allocates nothing)",
    )
    validate.add_argument("--out", default=None, help="write the report here (default: stdout)")
    ceilings = commands.add_parser(
        "ceilings",
        help="measure the device's copy bandwidth and bf16 GEMM rate",
        description=(
            "Measure the achievable ceilings of one device (a large device-to-device copy and "
            "a large bf16 GEMM; small and quick on cpu) and write them as JSON "
            "(schema atrex-ceilings/1). Exit 0 when measured, 1 when the device cannot be used."
        ),
    )
    ceilings.add_argument("--device", default="cuda", choices=("cpu", "cuda"))
    ceilings.add_argument("--out", default=None, help="write the figures here (default: stdout)")
    commands.add_parser(
        "work",
        help="the work models' W/Q of shapes (JSON on stdin, JSON on stdout)",
        description=(
            'Read [{"operator", "init_kwargs", "input_kwargs"}, ...] as JSON on stdin and '
            'write, in the same order, {"w_flops", "q_read", "q_write"} or {"error"} for '
            "each as JSON on stdout. Exit 2 when stdin is not a JSON list."
        ),
    )


def _pool_sizes(parser: argparse.ArgumentParser) -> None:
    from evaluator import reference_pool as defaults

    parser.add_argument(
        "--pool-entries", type=int, default=defaults.ENTRIES_PER_SHAPE,
        help=f"live entries per shape (default {defaults.ENTRIES_PER_SHAPE})",
    )  # fmt: skip
    parser.add_argument(
        "--pool-uses", type=int, default=defaults.USES_PER_ENTRY,
        help=f"uses of an entry before it is retired (default {defaults.USES_PER_ENTRY})",
    )  # fmt: skip
    parser.add_argument(
        "--pool-low-water", type=int, default=defaults.LOW_WATER,
        help=f"top a shape up when fewer entries are live (default {defaults.LOW_WATER})",
    )  # fmt: skip
    parser.add_argument(
        "--pool-fresh-trials",
        type=int,
        default=defaults.FRESH_TRIALS,
        help="correctness trials per shape that still draw a one-off seed and compute the "
        f"reference (default {defaults.FRESH_TRIALS})",
    )
    parser.add_argument(
        "--pool-max-bytes", type=int, default=defaults.MAX_BYTES,
        help=f"the pool's size limit on disk (default {defaults.MAX_BYTES})",
    )  # fmt: skip
    parser.add_argument(
        "--pool-entry-max-bytes",
        type=int,
        default=defaults.ENTRY_MAX_BYTES,
        help="a shape whose reference output is larger is not pooled (default "
        f"{defaults.ENTRY_MAX_BYTES})",
    )


def _pool_options(run: argparse.ArgumentParser) -> None:
    run.add_argument(
        "--reference-pool",
        default=None,
        metavar="DIR",
        help="draw the correctness trials' seeds and reference outputs from this worker's "
        "pool in DIR (0700, hidden from the candidate; filled at a shape's first use); "
        "default: off, every trial computes the reference",
    )
    run.add_argument(
        "--no-reference-pool", dest="reference_pool", action="store_const", const=None,
        help="do not use a reference pool (the default)",
    )  # fmt: skip
    run.add_argument(
        "--pool-fill", default=True, action=argparse.BooleanOptionalAction,
        help="fill a shape's pool at its first use (default); --no-pool-fill runs it unpooled",
    )  # fmt: skip
    _pool_sizes(run)


def _timings_options(run: argparse.ArgumentParser) -> None:
    from evaluator import reference_timings as defaults

    run.add_argument(
        "--reference-timings",
        default=None,
        metavar="DIR",
        help="take each shape's PyTorch eager reference time from this worker's cache in DIR "
        "(0700, hidden from the candidate) where it holds a current figure, and store the "
        "ones timed; default: off, every shape times the reference",
    )
    run.add_argument(
        "--no-reference-timings", dest="reference_timings", action="store_const", const=None,
        help="time the reference at every shape (the default)",
    )  # fmt: skip
    run.add_argument(
        "--reference-timings-uses", type=int, default=defaults.MAX_USES,
        help=f"uses of a figure before it is timed again (default {defaults.MAX_USES})",
    )  # fmt: skip
    run.add_argument(
        "--reference-timings-refresh",
        type=float,
        default=defaults.REFRESH_PROBABILITY,
        help="chance that a lookup times the reference again anyway (default "
        f"{defaults.REFRESH_PROBABILITY})",
    )


def timings_settings(args: argparse.Namespace) -> Any:
    """The TimingCacheSettings the options give, or None when the cache is off."""
    if not getattr(args, "reference_timings", None):
        return None
    from evaluator.reference_timings import TimingCacheSettings

    return TimingCacheSettings(
        directory=args.reference_timings,
        max_uses=args.reference_timings_uses,
        refresh_probability=args.reference_timings_refresh,
    )


def pool_settings(args: argparse.Namespace) -> Any:
    """The PoolSettings the options give, or None when the pool is off."""
    if not getattr(args, "reference_pool", None):
        return None
    from evaluator.reference_pool import PoolSettings

    return PoolSettings(
        directory=args.reference_pool,
        entries=args.pool_entries,
        uses=args.pool_uses,
        low_water=min(args.pool_low_water, args.pool_entries),
        fresh_trials=args.pool_fresh_trials,
        max_bytes=args.pool_max_bytes,
        entry_max_bytes=args.pool_entry_max_bytes,
        fill=getattr(args, "pool_fill", True),
    )


def command_pool_fill(args: argparse.Namespace) -> int:
    """Fill the reference pool (from a suite, or the runner's plan); print a JSON report."""
    import json

    from evaluator.environment import collect_environment
    from evaluator.reference_pool import PoolShape, fill_plan, plan_file

    if args.plan:
        plan = json.loads(Path(args.plan).read_text(encoding="utf-8"))
    else:
        try:
            settings = pool_settings(args)
        except ValueError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return EXIT_USER
        if settings is None:
            print("error: pool fill needs --pool DIR", file=sys.stderr)
            return EXIT_USER
        from evaluator.upstream import load_suite_with_sources

        suite, sources = load_suite_with_sources(args.suite)
        operators = (
            [s.strip() for s in args.operators.split(",") if s.strip()]
            if args.operators
            else suite.operator_slugs()
        )
        shapes = [
            PoolShape(
                operator=shape.operator,
                shape_id=shape.shape_id,
                init_kwargs=dict(shape.init_kwargs or {}),
                input_kwargs=dict(shape.input_kwargs or {}),
                q_write=int(shape.q_write or 0),
            )
            for shape in suite.shapes
            if shape.operator in operators
            and shape.operator not in sources
            and (args.shapes == "all" or (args.shapes == "smoke") == bool(shape.smoke))
        ]
        plan = plan_file(suite.content_hash, shapes, settings, args.device)
    report = fill_plan(plan, environment=collect_environment(str(plan["device"])))
    print(json.dumps(report, sort_keys=True))
    print(
        f"reference pool: {report['written']} entries written ({report['bytes']} bytes) over "
        f"{report['shapes']} shapes in {report['seconds']} s; {len(report['refused'])} "
        "shapes not pooled",
        file=sys.stderr,
    )
    return EXIT_OK


def command_ceilings(args: argparse.Namespace) -> int:
    """Measure the device's ceilings, write them (JSON), print a summary; return the exit code."""
    import json

    from evaluator.ceilings import measure_ceilings

    try:
        figures = measure_ceilings(args.device)
    except RuntimeError as exc:
        print(f"error [platform:no-device]: {exc}", file=sys.stderr)
        return EXIT_PLATFORM
    text = json.dumps(figures, indent=1, sort_keys=True) + "\n"
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    print(
        f"{figures['device_name']}: copy {figures['copy_bytes_per_s'] / 1e9:.1f} GB/s, "
        f"bf16 GEMM {figures['bf16_gemm_flops_per_s'] / 1e12:.2f} TFLOP/s "
        f"({figures['wall_s']:.1f} s)",
        file=sys.stderr,
    )
    return EXIT_OK


def command_validate_suite(args: argparse.Namespace) -> int:
    """Validate a suite file, write the report (JSON), print a summary; return the exit code."""
    import json

    from evaluator.validate import SCHEMA, validate_suite

    path = Path(args.suite_json)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        report = {
            "schema": SCHEMA,
            "suite": None,
            "hash": None,
            "ok": False,
            "errors": [
                {"operator": None, "shape_id": None, "message": f"Cannot read {path}: {exc}"}
            ],
            "warnings": [],
            "checked": 0,
            "skipped": 0,
            "device": args.device,
        }
    else:
        report = validate_suite(data, device=args.device)
    text = json.dumps(report, indent=1, sort_keys=True) + "\n"
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    for entry in report["errors"]:
        print(f"error: {entry['message']}", file=sys.stderr)
    print(
        f"{report['suite']}: {'ok' if report['ok'] else 'NOT ok'}, {len(report['errors'])} "
        f"error(s), {len(report['warnings'])} warning(s), {report['checked']} shape(s) checked, "
        f"{report['skipped']} skipped",
        file=sys.stderr,
    )
    return EXIT_OK if report["ok"] else EXIT_USER


def _error_document(args: argparse.Namespace, error: dict[str, str]) -> dict[str, Any]:
    """A results document for a run that could not start (bad suite, hardware, ...)."""
    from evaluator.environment import collect_environment
    from evaluator.runner import _now

    now = _now()
    return results_document(
        suite={"name": args.suite, "version": None, "hash": None, "shape_set": args.shapes},
        hardware={"slug": args.hardware},
        environment=collect_environment(args.device),
        seed_digest=(
            "sha256:" + hashlib.sha256(str(args.seed).encode()).hexdigest()
            if args.seed is not None
            else None
        ),
        started_at=now,
        finished_at=now,
        wall_s=0.0,
        error=error,
        bundle=None,
        operators=[],
        scores=None,
    )


def results_table(results: dict[str, Any]) -> str:
    """The run's summary: one aligned line per operator (its per-operator verdict, score as a
    percentage of the roofline, three significant figures, never 0 for a positive score,
    its passing shapes counted per shape (apparent) and per operator (real), each shape's
    status), then the aggregate and the pass counts, and the signs of deception that hold
    the submission for review."""
    from evaluator.figures import roofline_percent
    from evaluator.scoring import operator_verdict
    from evaluator.verdicts import hold_signals

    rows = []
    for entry in results.get("operators") or []:
        shapes = entry.get("shapes") or []
        verdict = operator_verdict(shapes)
        rows.append(
            (
                entry["operator"],
                verdict["verdict"],
                roofline_percent(entry["score"]),
                f"{verdict['apparent_passes']}/{verdict['real_passes']} of {len(shapes)}",
                " ".join(f"{s['shape_id']}:{s['status']}" for s in shapes),
            )
        )
    lines = []
    if rows:
        width = max(len(row[0]) for row in rows)
        score_width = max(len("score"), *(len(row[2]) for row in rows))
        pass_width = max(len("apparent/real"), *(len(row[3]) for row in rows))
        lines.append(
            f"{'operator':<{width}}  {'verdict':<9}  {'score':>{score_width}}  "
            f"{'apparent/real':<{pass_width}}  shapes"
        )
        for operator, verdict, score, passes, shapes in rows:
            lines.append(
                f"{operator:<{width}}  {verdict:<9}  {score:>{score_width}}  "
                f"{passes:<{pass_width}}  {shapes}"
            )
    scores = results.get("scores")
    if scores:
        lines.append(
            f"aggregate {roofline_percent(scores['aggregate'])} of the roofline  real pass "
            f"rate {roofline_percent(scores['real_pass_rate'])}  fallback rate "
            f"{roofline_percent(scores['fallback_rate'])}"
        )
        if scores.get("shapes_passed_real") is not None:
            lines.append(
                f"passing shapes: {scores.get('shapes_passed')} apparent (per shape), "
                f"{scores['shapes_passed_real']} real (per operator) of "
                f"{scores.get('shapes_total')}; {scores.get('operators_incorrect', 0)} "
                "operator(s) incorrect (a wrong result on a shape scores the operator 0)"
            )
    signals = hold_signals(results.get("operators") or [])
    if signals:
        lines.append(
            f"held for review: {len(signals)} sign(s) of deception, the whole submission "
            "waits for staff:"
        )
        lines.extend(
            f"  {s['operator']} {s['shape_id']}: {s['code']} ({s['label']})" for s in signals
        )
    return "\n".join(lines)


def _print_table(results: dict[str, Any]) -> None:
    text = results_table(results)
    if text:
        print(text, file=sys.stderr)


def suite_for(args: argparse.Namespace) -> tuple[Any, Any]:
    """The suite to run (a name or path as given, or the loaded suite reduced to its public
    shapes for ``--visibility public``) and its operator sources (None: read from the file)."""
    if args.visibility != "public":
        return args.suite, None
    from evaluator.upstream import load_suite_with_sources

    suite, sources = load_suite_with_sources(args.suite)
    return suite.public_only(), sources


def operator_costs_from(path: str) -> dict[str, float]:
    """Expected seconds per operator from ``path``: a JSON object {operator: seconds}, or a
    results document (each operator entry's ``wall_s``). ValueError says what to fix."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise ValueError(f"--operator-costs: cannot read {path}: {exc}") from exc
    if isinstance(data, dict) and isinstance(data.get("operators"), list):
        data = {
            entry["operator"]: entry["wall_s"]
            for entry in data["operators"]
            if isinstance(entry, dict) and isinstance(entry.get("wall_s"), int | float)
        }
    if not isinstance(data, dict) or not all(
        isinstance(v, int | float) and not isinstance(v, bool) for v in data.values()
    ):
        raise ValueError(
            f"--operator-costs: {path} is neither {{operator: seconds}} nor a results.json"
        )
    return {str(op): float(seconds) for op, seconds in data.items()}


def command_run(
    args: argparse.Namespace, *, prepared: tuple[Any, Any] | None = None, rounds: Any = None
) -> int:
    """Evaluate a bundle, write results.json, print a short table; return the exit code.

    ``prepared`` is ``suite_for(args)`` already loaded, ``rounds`` the children of a
    campaign's evaluator server (``evaluator.serve``)."""
    from evaluator.concurrency import concurrency_from
    from evaluator.runner import run_bundle
    from evaluator.sandbox import SandboxPolicy
    from evaluator.sanitizer import parse_tools

    operators = (
        [s.strip() for s in args.operators.split(",") if s.strip()] if args.operators else None
    )
    out = Path(args.out)
    log_dir = Path(args.log_dir) if args.log_dir else out.with_name(out.name + ".logs")
    # Rewritten after every operator; a run killed before the end leaves it behind.
    checkpoint = out.with_name(out.stem + ".partial.json")
    try:
        tools = parse_tools(args.sanitizer_tools) if args.sanitizer_tools is not None else None
    except ValueError as exc:
        print(f"error: --sanitizer-tools: {exc}", file=sys.stderr)
        return EXIT_USER
    try:
        pool = pool_settings(args)
        timings = timings_settings(args)
        # A campaign's round is one operator: nothing to run beside it.
        concurrency = concurrency_from(args.concurrency) if rounds is None else 1
        costs = operator_costs_from(args.operator_costs) if args.operator_costs else None
        measurement = measurement_policy(args)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USER
    try:
        suite, sources = prepared if prepared is not None else suite_for(args)
        policy = SandboxPolicy.from_environment(mode=args.sandbox, hidden_paths=args.hide)
        results = run_bundle(
            bundle_path=args.bundle,
            suite=suite,
            hardware=args.hardware,
            device=args.device,
            operators=operators,
            shape_set=args.shapes,
            seed=args.seed,
            progress_path=args.progress,
            time_budget_s=args.time_budget_s,
            log_dir=log_dir,
            operator_hint=args.operator_hint,
            operator_sources=sources,
            sandbox_policy=policy,
            checkpoint_path=checkpoint,
            # An agent sees a public run's results: the hidden variants stay hidden.
            validation_variants=args.visibility != "public",
            start_ahead=args.start_ahead,
            start_ahead_depth=args.start_ahead_depth or start_ahead_depth_from_environment(),
            sanitizer_tools=tools,
            shape_timeout_s=args.shape_timeout_s,
            rounds=rounds,
            reference_pool=pool,
            reference_timings=timings,
            concurrency=concurrency,
            operator_costs=costs,
            measurement=measurement,
        )
    except AtrexError as exc:
        write_results(out, _error_document(args, exc.to_dict()))
        print(f"error [{exc.code}]: {exc.message}", file=sys.stderr)
        return EXIT_USER if isinstance(exc, UserError) else EXIT_PLATFORM
    except Exception as exc:  # a harness bug: report it as ours
        traceback.print_exc()
        error = {"code": "platform:error", "message": f"{type(exc).__name__}: {exc}"}
        write_results(out, _error_document(args, error))
        return EXIT_PLATFORM
    write_results(out, results)
    checkpoint.unlink(missing_ok=True)
    error = results.get("error")
    if error:
        print(f"error [{error['code']}]: {error['message']}", file=sys.stderr)
        return EXIT_USER if str(error.get("code", "")).startswith("bundle:") else EXIT_PLATFORM
    _print_table(results)
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m evaluator``."""
    args = build_parser().parse_args(argv)
    if args.command == "run":
        return command_run(args)
    if args.command == "serve":
        from evaluator.serve import command_serve

        return command_serve(args)
    if args.command == "validate-suite":
        return command_validate_suite(args)
    if args.command == "ceilings":
        return command_ceilings(args)
    if args.command == "pool":
        return command_pool_fill(args)
    if args.command == "work":
        from evaluator.work import command_work

        return command_work()
    return EXIT_PLATFORM
