"""``atrex submit | check | status | board | quota``: submit bundles and follow them.

Environment: ``ATREX_URL`` (default http://127.0.0.1:8000), ``ATREX_TOKEN`` (else
``~/.config/atrex/token``). Exit codes: 0 success (published, when waiting), 1 failed or
rejected (the reason is printed), 2 usage or connection problems.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

from .client import DEFAULT_URL, ApiError, Client, token_from_environment

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
BAR_WIDTH = 30


def progress_line(progress: dict[str, Any]) -> str:
    """``[#####.....] 12/440 shapes  running``."""
    done, total = int(progress.get("shapes_done") or 0), int(progress.get("shapes_total") or 0)
    filled = int(BAR_WIDTH * done / total) if total else 0
    bar = "#" * filled + "." * (BAR_WIDTH - filled)
    return f"[{bar}] {done}/{total or '?'} shapes  {progress.get('status', '')}"


def _fmt(value: Any, digits: int = 4) -> str:
    """A figure with ``digits`` significant digits, so that a CPU development score of 2e-5
    does not read as 0."""
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}g}"
    return str(value)


def scores_table(submission: dict[str, Any]) -> str:
    """The aggregate figures, then one line per operator."""
    scores = submission.get("scores") or {}
    lines = [f"submission #{submission['id']}  {submission.get('title', '')}"]
    for key in (
        "aggregate",
        "real_pass_rate",
        "apparent_pass_rate",
        "fallback_rate",
        "geomean_speedup_eager",
    ):
        lines.append(f"  {key:<24}{_fmt(scores.get(key))}")
    if scores.get("aggregate_ci"):
        low, high = scores["aggregate_ci"]
        lines.append(f"  {'aggregate 95% interval':<24}{_fmt(low)} - {_fmt(high)}")
    operators = submission.get("operators") or []
    if operators:
        lines.append(f"  {'operator':<28}{'status':<16}{'score':>8}")
        for row in operators:
            lines.append(f"  {row['operator']:<28}{row['status']:<16}{_fmt(row['score']):>8}")
    return "\n".join(lines)


def board_table(board: dict[str, Any]) -> str:
    lines = [f"{board['suite']} on {board['hardware']}: {board['count']} submissions"]
    lines.append(f"{'rank':>4}  {'#':>6}  {'aggregate':>9}  {'real pass':>9}  title (owner)")
    for row in board["results"]:
        lines.append(
            f"{row['rank']:>4}  {row['submission']:>6}  {_fmt(row['aggregate']):>9}  "
            f"{_fmt(row['real_pass_rate'], 3):>9}  {row['title']} ({row['owner']})"
        )
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


def _finish(client: Client, submission_id: int, progress: dict[str, Any], out: TextIO) -> int:
    """Print the outcome of a final submission; 0 when published."""
    if progress["status"] == "published":
        out.write(scores_table(client.submission(submission_id)) + "\n")
        return EXIT_OK
    reason = progress.get("error_message") or progress.get("status_display") or ""
    code = progress.get("error_code") or progress["status"]
    out.write(f"submission #{submission_id} {progress['status']}: [{code}] {reason}\n")
    return EXIT_FAILED


def cmd_submit(args: argparse.Namespace, client: Client, out: TextIO) -> int:
    if not client.token:
        out.write("No API token: set ATREX_TOKEN or write it to ~/.config/atrex/token.\n")
        return EXIT_USAGE
    bundle = Path(args.bundle)
    if not bundle.is_file():
        out.write(f"{bundle}: no such file\n")
        return EXIT_USAGE
    fields = {"title": args.title or "", "visibility": args.visibility}
    if args.suite:
        fields["suite"] = args.suite
    if args.hardware:
        fields["hardware"] = args.hardware
    status, body = client.submit(bundle, fields=fields)
    if status == 422:
        out.write(f"submission #{body['id']} rejected: [{body['code']}] {body['detail']}\n")
        return EXIT_FAILED
    out.write(
        f"submission #{body['id']} {body['status']} on {body['suite']} / {body['hardware']}\n"
    )
    if not args.wait:
        return EXIT_OK
    progress = wait_until_final(client, body["id"], out=out, interval_s=args.interval)
    return _finish(client, body["id"], progress, out)


def cmd_status(args: argparse.Namespace, client: Client, out: TextIO) -> int:
    if args.wait:
        progress = wait_until_final(client, args.id, out=out, interval_s=args.interval)
        return _finish(client, args.id, progress, out)
    submission = client.submission(args.id)
    progress = submission["progress"]
    bar = progress_line({**progress, "status": ""}).rstrip()
    out.write(f"submission #{submission['id']} {submission['status']}  {bar}\n")
    if submission.get("error"):
        out.write(f"[{submission['error']['code']}] {submission['error']['message']}\n")
        return EXIT_FAILED
    if submission["status"] == "published":
        out.write(scores_table(submission) + "\n")
    return EXIT_OK


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
    if not client.token:
        out.write("No API token: set ATREX_TOKEN or write it to ~/.config/atrex/token.\n")
        return EXIT_USAGE
    bundle = Path(args.bundle)
    if not bundle.is_file():
        out.write(f"{bundle}: no such file\n")
        return EXIT_USAGE
    check = client.check(bundle, fields={"suite": args.suite} if args.suite else {})
    out.write("\n".join(check_lines(check)) + "\n")
    return EXIT_OK if check["ok"] else EXIT_FAILED


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
        out.write("No API token: set ATREX_TOKEN or write it to ~/.config/atrex/token.\n")
        return EXIT_USAGE
    out.write("\n".join(quota_lines(client.quota())) + "\n")
    return EXIT_OK


def cmd_board(args: argparse.Namespace, client: Client, out: TextIO) -> int:
    out.write(board_table(client.board(suite=args.suite, hardware=args.hardware)) + "\n")
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="atrex", description=__doc__.splitlines()[0])
    parser.add_argument("--url", default=None, help=f"portal URL (ATREX_URL; {DEFAULT_URL})")
    commands = parser.add_subparsers(dest="command", required=True)

    submit = commands.add_parser("submit", help="upload a bundle (.zip, .tar.gz or .py)")
    submit.add_argument("bundle")
    submit.add_argument("--title")
    submit.add_argument("--suite", help="suite slug, e.g. atrex-bench-v1")
    submit.add_argument("--hardware", help="hardware slug, e.g. h200-sxm")
    submit.add_argument("--visibility", choices=["public", "private"], default="public")
    submit.add_argument("--wait", action="store_true", help="follow it until a final status")
    submit.add_argument("--interval", type=float, default=2.0, help=argparse.SUPPRESS)
    submit.set_defaults(handler=cmd_submit)

    status = commands.add_parser("status", help="a submission's status (and scores)")
    status.add_argument("id", type=int)
    status.add_argument("--wait", action="store_true")
    status.add_argument("--interval", type=float, default=2.0, help=argparse.SUPPRESS)
    status.set_defaults(handler=cmd_status)

    check = commands.add_parser(
        "check", help="run every check of a bundle without submitting it (no quota used)"
    )
    check.add_argument("bundle")
    check.add_argument("--suite", help="suite slug, e.g. atrex-bench-v1")
    check.set_defaults(handler=cmd_check)

    quota = commands.add_parser("quota", help="your submission limits and what is left")
    quota.set_defaults(handler=cmd_quota)

    board = commands.add_parser("board", help="the leaderboard")
    board.add_argument("--suite")
    board.add_argument("--hardware")
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
        return 130
