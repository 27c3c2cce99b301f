"""Which HTTP server `strictcall serve` should run on, by measurement.

    .venv/bin/python bench/servers.py [--duration 5] [--runs 2] [--connections 16,64]

Needs granian in the project's venv (`pip install -e '.[bench]'`). The same app (strictcall's
service on a SQLite file: token lookup, strict checks, one SELECT, an audit record per call) on:

- uvicorn with strictcall's protocol (`strictcall serve`: httptools, one write per answer,
  the edge guard's deadlines and connection cap);
- uvicorn with its stock httptools protocol (bench/serve_app.py --stock);
- granian, ASGI interface, one worker, uvloop (bench/serve_app.py's factory);

and, as the reference the issue's target names, the bare uvicorn endpoint (bench/bare_asgi.py:
no checks, no database, no audit). Loaded by wrk with the valid read_note call, in turns (see
bench/http_load.py), at each connection count; req/s, p99 and the server's CPU µs per request
(its process group's, from /proc). Prints one JSON document.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

import http_load

BENCH = Path(__file__).resolve().parent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--connections", default="16,64")
    parser.add_argument("--warmup", type=float, default=1.0)
    args = parser.parse_args(argv)
    venv_bin = Path(sys.executable).parent
    cli = [str(venv_bin / "strictcall")]
    granian = shutil.which("granian", path=str(venv_bin))
    with tempfile.TemporaryDirectory(prefix="strictcall-servers-") as tmp:
        workdir = Path(tmp)
        serve = http_load.strictcall_target(cli, workdir)
        db = serve.command[serve.command.index("--db") + 1]
        app = [sys.executable, str(BENCH / "serve_app.py"), "--db", db, "--port", "{port}"]
        targets = [
            replace(serve, name="strictcall serve (uvicorn, strictcall's protocol)"),
            replace(
                serve,
                name="strictcall app on uvicorn, stock httptools protocol",
                stack="uvicorn httptools + uvloop, no coalescing, no edge guard",
                command=[*app, "--stock"],
            ),
        ]
        if granian is not None:
            targets.append(
                replace(
                    serve,
                    name="strictcall app on granian (ASGI)",
                    stack="granian 1 worker, asgi, uvloop",
                    command=[
                        *(granian, "--interface", "asgi", "--factory", "--working-dir"),
                        *(str(BENCH), "--host", http_load.HOST, "--port", "{port}"),
                        *("--workers", "1", "--loop", "uvloop", "--http", "1"),
                        *("--log-level", "warning", "--no-ws", "serve_app:make_app"),
                    ],
                    env={**__import__("os").environ, "STRICTCALL_BENCH_DB": db},
                )
            )
        targets.append(http_load.bare_target(sys.executable, BENCH))
        connections = [int(c) for c in args.connections.split(",")]
        results = http_load.load_targets(
            targets, workdir, connections, args.duration, args.runs, 1, args.warmup
        )
    print(json.dumps({"granian": granian is not None, "results": results}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
