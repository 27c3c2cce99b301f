"""strictcall's service app (`strictcall.server.app.build_app`) for other servers than its own.

    STRICTCALL_BENCH_DB=PATH granian --interface asgi --factory serve_app:make_app ...
    python bench/serve_app.py --db PATH --port P --stock   # uvicorn, its stock httptools protocol

The same app `strictcall serve --db PATH` serves (JSON-RPC at /rpc, MCP at /mcp, audit on), on
granian (ASGI) or on uvicorn without strictcall's coalescing protocol and edge guard, so that
bench/servers.py compares the servers and not the apps. Run with the project's venv.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any


def make_app() -> Any:
    """The app on the store named by $STRICTCALL_BENCH_DB (a SQLite path or a PostgreSQL URL)."""
    from strictcall.server.app import build_app
    from strictcall.storage import open_store

    return build_app(open_store(os.environ["STRICTCALL_BENCH_DB"]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--db", required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--stock", action="store_true", help="uvicorn's own httptools protocol")
    args = parser.parse_args(argv)
    import uvicorn

    os.environ["STRICTCALL_BENCH_DB"] = args.db
    uvicorn.run(
        make_app(),
        host=args.host,
        port=args.port,
        loop="uvloop",
        http="httptools",
        lifespan="on",
        access_log=False,
        log_level="warning",
        server_header=False,
        date_header=False,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
