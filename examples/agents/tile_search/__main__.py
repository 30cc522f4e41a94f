"""``python -m examples.agents.tile_search --port 8765 --secret-file secret.txt``: serve the
example agent (the shared secret is the one the portal showed when the endpoint was
registered; ``--secret`` or ATREX_AGENT_SECRET also work)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from .server import make_server


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m examples.agents.tile_search")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--prefix", default="", help="URL path the routes sit under")
    parser.add_argument("--secret", default=None)
    parser.add_argument("--secret-file", default=None)
    parser.add_argument("--patience", type=int, default=2, help="rounds before a line drops")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    secret = args.secret or os.environ.get("ATREX_AGENT_SECRET")
    if args.secret_file:
        secret = Path(args.secret_file).read_text(encoding="utf-8").strip()
    if not secret:
        print(
            "error: give the shared secret (--secret-file, --secret or ATREX_AGENT_SECRET)",
            file=sys.stderr,
        )
        return 2
    server = make_server(
        host=args.host,
        port=args.port,
        secret=secret.encode(),
        prefix=args.prefix,
        patience=args.patience,
    )
    server.verbose = args.verbose
    print(
        f"tile-search agent on http://{args.host}:{server.server_port}{args.prefix}",
        file=sys.stderr,
    )
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
