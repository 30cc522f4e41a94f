"""Where the seconds of an agent campaign's rounds go.

Runs ``--rounds`` rounds per operator of one campaign's evaluations through the
campaign's own evaluator (``agents.loop.evaluator_for``: public shapes only, a fresh
secret seed each round), each operator's kernel taken from ``--kernels`` (the Triton
baseline bundle by default), and prints one line per round and the means of round 1 and
of rounds 2..N:

    python3 bench/agent_round.py --device cpu --rounds 4 [--operators rms_norm,silu_and_mul]
        [--cold] [--vary] [--agent-s 5] [--json rounds.json]

Columns (seconds, host wall clock):

    process   the round's wall time outside the evaluator's results document: starting
              ``python -m evaluator run`` (interpreter, imports) and writing its results,
              or, warm, handing the round to the campaign's evaluator server and back
    runner    the evaluator outside the operator's child: suite and bundle, the sandbox
              probe, the environment digest, the results document (and, where a run has
              it, the compute-sanitizer pass; a campaign's rounds have none)
    start     the child's start-up left when its job came (sandbox, interpreter, torch,
              the device, the profiler): near 0 where a child warmed up ahead served it
    harness   the operator's reference and the integrity snapshot
    import    the candidate's import
    compile   the first correctness call of each shape (Triton compiles happen there), and
              the specialisations of the previous round compiled before the first shape
              (``evaluator.compile_ahead``)
    checks    the other correctness work: inputs, candidate and reference calls, comparison,
              the fallback monitor's report
    timing    the timed calls of the candidate and the reference, and their checks
    other     the child's remaining time: records, tear-down
    total     the round as the campaign waits for it
    ahead     how long the round's child had been up before its job (not in the total):
              a child started ahead of the round shows the previous round's length here

``--json`` is written again after every round, so a run cut short keeps its rounds;
``--keep DIR`` keeps each round's results document there (``bench/where_time_goes.py
--results`` reads one shape by shape), and the warm evaluator server's log.

``--cold`` uses the per-round ``python -m evaluator run`` (one process per round, every
cost paid again), the default is the campaign's warm evaluator where there is one.
``--vary`` changes the kernel's source every round (a comment), as an agent's revision
would, so that no compiled kernel is reused; without it every round sends the same source.
``--agent-s`` waits that long before each round, as an agent writing its next kernel
would (not counted in the round).

Rounds measure with the campaign's round policy (``agents.loop.ROUND_OPTIONS``: 2
correctness trials, at least 5 timed calls to a 1 % standard error) and time the eager
baseline once per shape into the campaign's cache (``loop.campaign_timings_options``).
For a before/after comparison, ``--full-policy`` measures rounds as a full evaluation
would (the operator's trials, 10 calls to 0.5 %) and ``--no-campaign-timings`` times the
eager baseline in every round, as before these were added.
"""

from __future__ import annotations

import argparse
import inspect
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from where_time_goes import operator_phases  # noqa: E402

from agents import loop  # noqa: E402
from evaluator.suite import SUITES_DIR  # noqa: E402

COLUMNS = (
    "process", "runner", "start", "harness", "import", "compile", "checks", "timing", "other"
)  # fmt: skip


def round_phases(results: dict[str, Any], total_s: float) -> dict[str, float]:
    """One round's seconds by column (see the module docstring)."""
    row = {name: 0.0 for name in (*COLUMNS, "ahead")}
    children = 0.0
    for entry in results.get("operators") or []:
        if entry.get("wall_s") is None:
            continue
        children += float(entry["wall_s"])
        phases = operator_phases(entry)
        row["start"] += phases["start"]
        row["harness"] += phases["harness"]
        row["ahead"] += phases["ahead"]
        row["import"] += phases["import"]
        row["compile"] += phases["compile"] + phases["precompile"]
        row["checks"] += sum(
            phases[k]
            for k in ("setup", "inputs", "candidate", "reference", "compare", "hooks", "fb_report")
        )
        row["timing"] += phases["timing"] + phases["t_reference"] + phases["t_checks"]
        row["other"] += phases["io"] + phases["exit"] + phases["variants"]
    run_wall = float(results.get("wall_s") or 0.0)
    row["runner"] = max(0.0, run_wall - children)
    row["process"] = max(0.0, total_s - run_wall)
    row["total"] = total_s
    return {k: round(v, 3) for k, v in row.items()}


def write_json(path: Path | None, *, rows: list[dict[str, Any]], **head: Any) -> None:
    """Every round so far, after ``head`` (rewritten whole, through a temporary file)."""
    if path is None:
        return
    partial = path.with_name(path.name + ".tmp")
    partial.write_text(json.dumps({**head, "rounds": rows}, indent=1) + "\n")
    partial.replace(path)


def statuses(results: dict[str, Any]) -> str:
    error = results.get("error")
    if error:
        return f"error {error.get('code')}"
    counts: dict[str, int] = {}
    for entry in results.get("operators") or []:
        for shape in entry.get("shapes") or []:
            counts[shape["status"]] = counts.get(shape["status"], 0) + 1
    return ",".join(f"{k}:{v}" for k, v in sorted(counts.items()))


def eager_cached(results: dict[str, Any]) -> int:
    """Shapes whose eager figure came from the campaign's cache."""
    return sum(
        shape.get("reference_time_source") == "cache"
        for entry in results.get("operators") or []
        for shape in entry.get("shapes") or []
    )


def line(label: str, row: dict[str, float], note: str = "") -> str:
    cells = " ".join(f"{row[c]:8.2f}" for c in (*COLUMNS, "total", "ahead"))
    return f"{label:<26s} {cells}  {note}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--suite", default="atrex-bench-v0.1")
    parser.add_argument("--hardware", default=None)
    parser.add_argument("--shapes", default=None, choices=("smoke", "full"))
    parser.add_argument("--operators", default="rms_norm,silu_and_mul")
    parser.add_argument("--kernels", type=Path, default=ROOT / "examples/bundles/triton-baseline")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--time-budget-s", type=float, default=0.1)
    parser.add_argument("--cold", action="store_true", help="one evaluator process per round")
    parser.add_argument("--vary", action="store_true", help="a changed source every round")
    parser.add_argument(
        "--agent-s",
        type=float,
        default=0.0,
        help="seconds the agent takes to answer between rounds (default 0: an instant agent)",
    )
    parser.add_argument("--json", type=Path, default=None, help="write every round here")
    parser.add_argument(
        "--keep", type=Path, default=None, help="each round's results document into this folder"
    )
    parser.add_argument(
        "--full-policy", action="store_true", help="rounds measured with the full policy"
    )
    parser.add_argument(
        "--no-campaign-timings",
        action="store_true",
        help="no campaign cache of eager timings: every round times the eager baseline",
    )
    args = parser.parse_args()
    if args.full_policy:  # the options of every round before the round policy
        loop.ROUND_OPTIONS = ("--visibility", "public", "--sanitizer-tools", "none")
    if args.no_campaign_timings and hasattr(loop, "campaign_timings_options"):
        loop.campaign_timings_options = lambda work_root: []
    policy = "full" if args.full_policy or "--trials" not in loop.ROUND_OPTIONS else "round"
    timings = not args.no_campaign_timings and hasattr(loop, "campaign_timings_options")

    hardware = args.hardware or ("h200-sxm" if args.device == "cuda" else "cpu-dev")
    shape_set = args.shapes or ("full" if args.device == "cuda" else "smoke")
    path = Path(args.suite) if Path(args.suite).is_file() else SUITES_DIR / f"{args.suite}.json"
    definition = json.loads(path.read_text(encoding="utf-8"))
    operators = [op.strip() for op in args.operators.split(",") if op.strip()]
    options: dict[str, Any] = {}
    if "warm" in inspect.signature(loop.evaluator_for).parameters:
        options["warm"] = not args.cold
    mode = "cold" if args.cold or "warm" not in options else "warm"
    rows: list[dict[str, Any]] = []
    head = f"{'round':<26s} " + " ".join(f"{c:>8s}" for c in (*COLUMNS, "total", "ahead"))
    print(
        f"{mode} evaluator, {args.device}, {args.suite} {shape_set} public shapes, "
        f"agent {args.agent_s:g} s, {policy} policy, campaign eager timings "
        f"{'on' if timings else 'off'}"
    )
    print(head)
    with tempfile.TemporaryDirectory(prefix="atrex-agent-round-") as work:
        evaluate = loop.evaluator_for(
            suite_definition=definition,
            hardware_slug=hardware,
            device=args.device,
            shape_set=shape_set,
            work_root=Path(work),
            timeout_s=1800,
            extra_args=["--time-budget-s", str(args.time_budget_s)],
            sandbox_args=[],
            **options,
        )
        try:
            for operator in operators:
                source = (args.kernels / f"{operator}.py").read_text(encoding="utf-8")
                for number in range(1, args.rounds + 1):
                    text = source + (f"\n# revision {number}\n" if args.vary else "")
                    time.sleep(args.agent_s)
                    started = time.monotonic()
                    results = evaluate(operator, text, number)
                    total = time.monotonic() - started
                    if args.keep is not None:
                        args.keep.mkdir(parents=True, exist_ok=True)
                        kept = args.keep / f"{operator}-round-{number}.json"
                        kept.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
                    row = round_phases(results, total)
                    outcome = statuses(results)
                    measured = (results.get("environment") or {}).get("measurement") or {}
                    rows.append(
                        {
                            "operator": operator,
                            "round": number,
                            "statuses": outcome,
                            "measurement": measured.get("kind"),
                            "eager_cached": eager_cached(results),
                            **row,
                        }
                    )
                    note = f"{outcome} eager-cached:{rows[-1]['eager_cached']}"
                    print(line(f"{operator} {number}", row, note), flush=True)
                    write_json(
                        args.json,
                        rows=rows,
                        mode=mode,
                        device=args.device,
                        suite=args.suite,
                        policy=policy,
                        campaign_timings=timings,
                        agent_s=args.agent_s,
                    )
        finally:
            close = getattr(evaluate, "close", None)
            if close is not None:
                close()
            server_log = Path(work) / "evaluator-server" / "server.log"
            if args.keep is not None and server_log.is_file():  # the warm server's own log
                args.keep.mkdir(parents=True, exist_ok=True)
                (args.keep / "server.log").write_bytes(server_log.read_bytes())
    print()
    for label, chosen in (
        ("round 1 (mean)", [r for r in rows if r["round"] == 1]),
        ("rounds 2..N (mean)", [r for r in rows if r["round"] > 1]),
    ):
        if chosen:
            mean = {c: statistics.fmean(r[c] for r in chosen) for c in (*COLUMNS, "total", "ahead")}
            print(line(label, mean, f"{len(chosen)} round(s)"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
