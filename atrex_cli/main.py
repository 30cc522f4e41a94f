"""``atrex``: submit kernel bundles to an Atrex-Bench portal, check them, follow them,
read the board and your quota, from a terminal or a script.

Environment: ``ATREX_URL`` (default http://127.0.0.1:8000), ``ATREX_TOKEN`` (else
``~/.config/atrex/token``). ``--json`` prints the API's answer as JSON instead of tables.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

from evaluator.figures import MISSING, percent, roofline_percent, significant, speedup

from .client import DEFAULT_URL, ApiError, Client, token_from_environment

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
EXIT_CODES = """exit codes:
  0    success: submitted (published, with --wait), a check passed, a listing printed
  1    the portal said no: rejected, failed, held for review, a check that failed,
       an unknown submission
  2    usage or connection problem: no token, bad arguments, no such file, server
       unreachable, 401/403
  130  interrupted (Ctrl-C)"""
BAR_WIDTH = 30


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]], right: Sequence[int] = ()) -> str:
    """Columns as wide as their widest cell, two spaces apart; columns in ``right`` (by
    index) aligned right, as figures are."""
    cells = [[str(cell) for cell in row] for row in [headers, *rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = []
    for row in cells:
        parts = [
            cell.rjust(widths[i]) if i in right else cell.ljust(widths[i])
            for i, cell in enumerate(row)
        ]
        lines.append("  ".join(parts).rstrip())
    return "\n".join(lines)


def submission_url(client: Client, submission_id: int) -> str:
    return f"{client.base_url.rstrip('/')}/submissions/{submission_id}/"


def progress_line(progress: dict[str, Any]) -> str:
    """``[#####.....] 12/440 shapes  running``."""
    done, total = int(progress.get("shapes_done") or 0), int(progress.get("shapes_total") or 0)
    filled = int(BAR_WIDTH * done / total) if total else 0
    bar = "#" * filled + "." * (BAR_WIDTH - filled)
    return f"[{bar}] {done}/{total or '?'} shapes  {progress.get('status', '')}"


def scores_table(submission: dict[str, Any]) -> str:
    """The aggregate figures, then one line per operator, aligned."""
    scores = submission.get("scores") or {}
    lines = [f"submission #{submission['id']}  {submission.get('title', '')}"]
    interval = scores.get("aggregate_ci")
    summary = [
        ("score (% of roofline)", roofline_percent(scores.get("aggregate"))),
        (
            "95% interval",
            f"{roofline_percent(interval[0])} – {roofline_percent(interval[1])}"
            if interval
            else MISSING,
        ),
        ("real-kernel pass rate", percent(scores.get("real_pass_rate"))),
        ("apparent pass rate", percent(scores.get("apparent_pass_rate"))),
        ("fallback rate", percent(scores.get("fallback_rate"))),
        ("speedup over eager", speedup(scores.get("geomean_speedup_eager"))),
    ]
    lines.append(table(["figure", "value"], summary, right=[1]))
    operators = submission.get("operators") or []
    if operators:
        rows = [
            [row["operator"], row["status"], roofline_percent(row["score"])] for row in operators
        ]
        lines.append("")
        lines.append(table(["operator", "status", "% of roofline"], rows, right=[2]))
    return "\n".join(lines)


def rank_text(row: dict[str, Any]) -> str:
    """A board row's rank as the page writes it: ``3``, ``=1`` for a tie, ``base`` for a
    baseline (listed, never ranked)."""
    if row.get("rank") is None:
        return "base"
    return f"={row['rank']}" if row.get("tied") else str(row["rank"])


def board_table(board: dict[str, Any]) -> str:
    shown = "all submissions" if board.get("view") == "all" else "each submitter's best"
    lines = [f"{board['suite']} on {board['hardware']}: {board['count']} rows ({shown})"]
    rows = [
        [
            rank_text(row),
            row["submission"],
            roofline_percent(row["aggregate"]),
            percent(row["real_pass_rate"]),
            f"{row['title']} ({row['owner']})",
        ]
        for row in board["results"]
    ]
    headers = ["rank", "#", "% of roofline", "real pass", "title (owner)"]
    lines.append(table(headers, rows, [0, 1, 2, 3]))
    return "\n".join(lines)


def wait_until_final(
    client: Client,
    submission_id: int,
    *,
    out: TextIO,
    interval_s: float = 2.0,
    timeout_s: float | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, Any]:
    """Poll the progress until the status is final, redrawing a bar on a terminal (one line
    per change otherwise); returns the last progress."""
    started = time.monotonic()
    shown = ""
    tty = out.isatty()
    while True:
        progress = client.progress(submission_id)
        line = progress_line(progress)
        if line != shown:
            out.write(("\r" + line) if tty else (line + "\n"))
            out.flush()
            shown = line
        if progress.get("final"):
            if tty:
                out.write("\n")
            return progress
        if timeout_s is not None and time.monotonic() - started > timeout_s:
            raise TimeoutError(f"submission #{submission_id} not final after {timeout_s} s")
        sleep(interval_s)


NOT_SIGNED_IN = "No API token: set ATREX_TOKEN or write it to ~/.config/atrex/token.\n"


def _json(out: TextIO, body: Any) -> None:
    out.write(json.dumps(body, indent=2, sort_keys=True) + "\n")


def _bundle_path(args: argparse.Namespace, client: Client, out: TextIO) -> Path | None:
    """The bundle argument as an existing file, or None after saying what is wrong."""
    if not client.token:
        out.write(NOT_SIGNED_IN)
        return None
    bundle = Path(args.bundle)
    if not bundle.is_file():
        out.write(f"{bundle}: no such file\n")
        return None
    return bundle


def cmd_submit(args: argparse.Namespace, client: Client, out: TextIO) -> int:
    bundle = _bundle_path(args, client, out)
    if bundle is None:
        return EXIT_USAGE
    fields = {"title": args.title or "", "visibility": args.visibility}
    if args.suite:
        fields["suite"] = args.suite
    if args.hardware:
        fields["hardware"] = args.hardware
    status, body = client.submit(bundle, fields=fields)
    if args.json and not args.wait:
        _json(out, body)
        return EXIT_FAILED if status == 422 else EXIT_OK
    url = submission_url(client, body["id"])
    if status == 422:
        out.write(f"submission #{body['id']} rejected: [{body['code']}]\n{body['detail']}\n")
        out.write(f"  {url}\n")
        return EXIT_FAILED
    out.write(
        f"submission #{body['id']} {body['status']} on {body['suite']} / {body['hardware']}\n"
        f"  {url}\n"
    )
    for warning in (body.get("manifest") or {}).get("warnings") or []:
        out.write(f"warning: {warning}\n")
    if not args.wait:
        return EXIT_OK
    progress = wait_until_final(
        client, body["id"], out=sys.stderr if args.json else out, interval_s=args.interval
    )
    return _finish(client, body["id"], progress, out, as_json=args.json)


def _finish(
    client: Client, submission_id: int, progress: dict[str, Any], out: TextIO, *, as_json=False
) -> int:
    """Print the outcome of a final submission; 0 when published."""
    if as_json:
        _json(out, client.submission(submission_id))
        return EXIT_OK if progress["status"] == "published" else EXIT_FAILED
    if progress["status"] == "published":
        out.write(scores_table(client.submission(submission_id)) + "\n")
        out.write(f"  {submission_url(client, submission_id)}\n")
        return EXIT_OK
    reason = progress.get("error_message") or progress.get("status_display") or ""
    code = progress.get("error_code") or progress["status"]
    out.write(f"submission #{submission_id} {progress['status']}: [{code}] {reason}\n")
    out.write(f"  {submission_url(client, submission_id)}\n")
    return EXIT_FAILED


def cmd_status(args: argparse.Namespace, client: Client, out: TextIO) -> int:
    if args.wait:
        progress = wait_until_final(
            client, args.id, out=sys.stderr if args.json else out, interval_s=args.interval
        )
        return _finish(client, args.id, progress, out, as_json=args.json)
    submission = client.submission(args.id)
    failed = bool(submission.get("error")) or submission["status"] in ("held_for_review",)
    if args.json:
        _json(out, submission)
        return EXIT_FAILED if failed else EXIT_OK
    progress = submission["progress"]
    bar = progress_line({**progress, "status": ""}).rstrip()
    out.write(f"submission #{submission['id']} {submission['status']}  {bar}\n")
    out.write(f"  {submission_url(client, submission['id'])}\n")
    if submission.get("error"):
        out.write(f"[{submission['error']['code']}] {submission['error']['message']}\n")
    if submission["status"] == "published":
        out.write(scores_table(submission) + "\n")
    return EXIT_FAILED if failed else EXIT_OK


def check_lines(check: dict[str, Any]) -> list[str]:
    """What ``atrex check`` prints: the verdict, what would be evaluated, warnings, fits."""
    if check["ok"]:
        lines = [
            f"ok: {len(check['operators'])} operator(s) would be evaluated on {check['suite']}: "
            + ", ".join(check["operators"])
        ]
        if check["missing"]:
            lines.append(f"missing (score 0): {len(check['missing'])} of the suite's operators")
    else:
        lines = [f"rejected on {check['suite']}: [{check['code']}]", check["detail"]]
    lines += [f"warning: {warning}" for warning in check["warnings"]]
    if check["best_suite"] and check["best_suite"] != check["suite"]:
        lines.append(f"fits better: --suite {check['best_suite']}")
    return lines


def cmd_check(args: argparse.Namespace, client: Client, out: TextIO) -> int:
    bundle = _bundle_path(args, client, out)
    if bundle is None:
        return EXIT_USAGE
    check = client.check(bundle, fields={"suite": args.suite} if args.suite else {})
    if args.json:
        _json(out, check)
    else:
        out.write("\n".join(check_lines(check)) + "\n")
    return EXIT_OK if check["ok"] else EXIT_FAILED


def compare_table(comparison: dict[str, Any]) -> str:
    """Operators (score of each submission, each one's difference from the first in
    percentage points of the roofline and its speed-up over the first), then how many
    shapes changed status."""
    subs = comparison["submissions"]
    first, others = subs[0], subs[1:]
    headers = ["operator", f"#{first['id']}"]
    for sub in others:
        headers += [f"#{sub['id']}", "Δ", "speed-up"]
    rows = []
    for entry in comparison["operators"]:
        row = [entry["operator"], roofline_percent(entry["scores"].get(str(first["id"])))]
        for sub in others:
            key = str(sub["id"])
            delta = entry["delta"].get(key)
            sign = "+" if delta is not None and delta >= 0 else ""
            row += [
                roofline_percent(entry["scores"].get(key)),
                MISSING if delta is None else f"{sign}{significant(delta * 100)} pt",
                speedup((entry.get("speedup_over_first") or {}).get(key)),
            ]
        rows.append(row)
    lines = [
        " vs ".join(f"#{sub['id']} {sub['title']}" for sub in subs) + f" on {comparison['suite']}",
        table(headers, rows, right=list(range(1, len(headers)))),
        f"{comparison['shapes_changed_status']} of {len(comparison['shapes'])} shapes "
        "changed status",
    ]
    return "\n".join(lines)


def cmd_compare(args: argparse.Namespace, client: Client, out: TextIO) -> int:
    comparison = client.compare(args.ids)
    if args.json:
        _json(out, comparison)
    else:
        out.write(compare_table(comparison) + "\n")
    return EXIT_OK


def cmd_cancel(args: argparse.Namespace, client: Client, out: TextIO) -> int:
    if not client.token:
        out.write(NOT_SIGNED_IN)
        return EXIT_USAGE
    submission = client.cancel(args.id)
    if args.json:
        _json(out, submission)
    else:
        out.write(f"submission #{submission['id']} {submission['status']}\n")
        out.write(f"  {submission_url(client, submission['id'])}\n")
    return EXIT_OK


QUOTA_LABELS = {"per_hour": "this hour", "per_day": "today", "active": "at once"}


def quota_lines(quota: dict[str, Any]) -> list[str]:
    """``this hour  8 of 10 left``, one line per limit (the same figures as the submit page)."""
    if quota["exempt"]:
        return ["no submission limits (staff)"]
    lines = []
    for window in quota["windows"]:
        label = QUOTA_LABELS[window["name"]]
        if not window["limit"]:
            lines.append(f"{label:<10} no limit")
            continue
        line = f"{label:<10} {window['left']} of {window['limit']} left"
        if window.get("frees_at"):
            line += f" (next slot frees at {window['frees_at']})"
        lines.append(line)
    lines.append("rejected uploads, cancelled submissions and platform failures are not counted")
    return lines


def cmd_quota(args: argparse.Namespace, client: Client, out: TextIO) -> int:
    if not client.token:
        out.write(NOT_SIGNED_IN)
        return EXIT_USAGE
    quota = client.quota()
    if args.json:
        _json(out, quota)
    else:
        out.write("\n".join(quota_lines(quota)) + "\n")
    return EXIT_OK


def cmd_board(args: argparse.Namespace, client: Client, out: TextIO) -> int:
    board = client.board(
        suite=args.suite, hardware=args.hardware, view="all" if args.all else "best"
    )
    if args.json:
        _json(out, board)
    else:
        out.write(board_table(board) + "\n")
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="atrex",
        description="Submit kernel bundles to an Atrex-Bench portal, check them, follow "
        "them, and read the board and your quota, from a terminal or a script.",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--url", default=None, help=f"portal URL (ATREX_URL; {DEFAULT_URL})")
    parser.add_argument(
        "--json", action="store_true", help="print the API's answer as JSON (for scripts)"
    )
    # --json is accepted before or after the command (atrex --json board, atrex board --json).
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--json", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS
    )
    commands = parser.add_subparsers(dest="command", required=True)

    submit = commands.add_parser(
        "submit", parents=[common], help="upload a bundle (.zip, .tar.gz or .py)"
    )
    submit.add_argument("bundle")
    submit.add_argument("--title")
    submit.add_argument("--suite", help="suite slug, e.g. atrex-bench-v1")
    submit.add_argument("--hardware", help="hardware slug, e.g. h200-sxm")
    submit.add_argument("--visibility", choices=["public", "private"], default="public")
    submit.add_argument("--wait", action="store_true", help="follow it until a final status")
    submit.add_argument("--interval", type=float, default=2.0, help=argparse.SUPPRESS)
    submit.set_defaults(handler=cmd_submit)

    status = commands.add_parser(
        "status", parents=[common], help="a submission's status (and scores)"
    )
    status.add_argument("id", type=int)
    status.add_argument("--wait", action="store_true")
    status.add_argument("--interval", type=float, default=2.0, help=argparse.SUPPRESS)
    status.set_defaults(handler=cmd_status)

    check = commands.add_parser(
        "check",
        parents=[common],
        help="run every check of a bundle without submitting it (no quota used)",
    )
    check.add_argument("bundle")
    check.add_argument("--suite", help="suite slug, e.g. atrex-bench-v1")
    check.set_defaults(handler=cmd_check)

    compare = commands.add_parser(
        "compare", parents=[common], help="compare submissions (the first against the others)"
    )
    compare.add_argument("ids", type=int, nargs="+")
    compare.set_defaults(handler=cmd_compare)

    cancel = commands.add_parser(
        "cancel", parents=[common], help="cancel your submission while it waits or runs"
    )
    cancel.add_argument("id", type=int)
    cancel.set_defaults(handler=cmd_cancel)

    quota = commands.add_parser(
        "quota", parents=[common], help="your submission limits and what is left"
    )
    quota.set_defaults(handler=cmd_quota)

    board = commands.add_parser("board", parents=[common], help="the leaderboard")
    board.add_argument("--suite")
    board.add_argument("--hardware")
    board.add_argument(
        "--all",
        action="store_true",
        help="every submission (default: each submitter's best, as on the page)",
    )
    board.set_defaults(handler=cmd_board)
    return parser


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    """Entry point of ``atrex``; returns the exit code."""
    out = out or sys.stdout
    args = build_parser().parse_args(argv)
    client = Client(
        base_url=args.url or os.environ.get("ATREX_URL") or DEFAULT_URL,
        token=token_from_environment(),
    )
    try:
        return args.handler(args, client, out)
    except ApiError as failure:
        out.write(
            f"error: {failure.detail or failure}"
            + (f" ({failure.code})" if failure.code else "")
            + "\n"
        )
        return EXIT_USAGE if failure.status in (0, 401, 403) else EXIT_FAILED
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
