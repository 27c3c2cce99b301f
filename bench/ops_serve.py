"""`strictcall serve` for bench/ops.py: the same app, with its metrics and spans (the default)
or without them (--plain, the floor they are measured against); its operator's paths ask for
an operator's token even on loopback, as a server elsewhere would."""

from __future__ import annotations

import argparse
import sys

from strictcall.server.app import build_app, serve
from strictcall.storage.sqlite import SQLiteStore


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--db", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--plain", action="store_true", help="no metrics, no spans")
    args = parser.parse_args()
    store = SQLiteStore(args.db)
    try:

        def ready(host: str, port: int) -> None:
            print(f"listening on http://{host}:{port}", flush=True)

        serve(build_app(store, observe=not args.plain), "127.0.0.1", args.port, ready)
    finally:
        store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
