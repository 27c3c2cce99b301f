"""Which HTTP server `strictcall serve` should run on, by measurement.

    .venv/bin/python bench/servers.py [--duration 5] [--runs 2] [--connections 16,64]
                                      [--no-postgres]

Needs granian in the project's venv (`pip install -e '.[bench]'`). The same app (strictcall's
service: token lookup, strict checks, one read, an audit record per call), on each store (a
SQLite file; a PostgreSQL database this run makes and drops), on:

- uvicorn with strictcall's protocol (`strictcall serve`: httptools, one write per answer,
  the edge guard's deadlines and connection cap);
- uvicorn with its stock httptools protocol (bench/serve_app.py --stock);
- granian, ASGI interface, one worker, uvloop (bench/serve_app.py's factory);
- with two workers: `strictcall serve --workers 2` and granian `--workers 2`;

and, as the reference the issue's target names, the bare uvicorn endpoint (bench/bare_asgi.py:
no checks, no database, no audit). Loaded by wrk with the valid read_note call, in turns (see
bench/http_load.py), at each connection count; req/s, p99 and the server's CPU µs per request
(its process group's, from /proc). Prints one JSON document.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

import http_load
from postgres_http import bench_database

BENCH = Path(__file__).resolve().parent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--connections", default="16,64")
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--no-postgres", action="store_true", help="the SQLite store only")
    args = parser.parse_args(argv)
    venv_bin = Path(sys.executable).parent
    cli = [str(venv_bin / "strictcall")]
    granian = shutil.which("granian", path=str(venv_bin))
    with (
        tempfile.TemporaryDirectory(prefix="strictcall-servers-") as tmp,
        contextlib.ExitStack() as stack,
    ):
        workdir = Path(tmp)
        stores: list[tuple[str, str | None]] = [("SQLite", None)]
        if not args.no_postgres:
            stores.append(("PostgreSQL", stack.enter_context(bench_database())))
        targets = []
        for store, url in stores:
            targets += _targets(cli, workdir, store, url, granian)
        targets.append(http_load.bare_target(sys.executable, BENCH))
        connections = [int(c) for c in args.connections.split(",")]
        results = http_load.load_targets(
            targets, workdir, connections, args.duration, args.runs, 1, args.warmup
        )
    report = {
        "granian": granian is not None,
        "commit": http_load.commit_of(BENCH.parent),
        "load_average_end": os.getloadavg(),
        "results": results,
    }
    print(json.dumps(report, indent=2))
    return 0


def _targets(
    cli: list[str], workdir: Path, store: str, url: str | None, granian: str | None
) -> list[http_load.HttpTarget]:
    """The servers on one store (a fresh SQLite file in `workdir` when `url` is None)."""
    serve = http_load.strictcall_target(cli, workdir, url)
    db = serve.command[serve.command.index("--db") + 1]
    app = [sys.executable, str(BENCH / "serve_app.py"), "--db", db, "--port", "{port}"]
    targets = [
        replace(serve, name=f"strictcall serve (uvicorn, strictcall's protocol), {store}"),
        replace(
            serve,
            name=f"strictcall app on uvicorn, stock httptools protocol, {store}",
            stack="uvicorn httptools + uvloop, no coalescing, no edge guard",
            command=[*app, "--stock"],
        ),
        replace(
            serve,
            name=f"strictcall serve --workers 2, {store}",
            command=[*serve.command, "--workers", "2"],
        ),
    ]
    if granian is None:
        return targets
    for workers in (1, 2):
        targets.append(
            replace(
                serve,
                name=f"strictcall app on granian (ASGI), --workers {workers}, {store}",
                stack=f"granian {workers} worker(s), asgi, uvloop",
                command=[
                    *(granian, "--interface", "asgi", "--factory", "--working-dir"),
                    *(str(BENCH), "--host", http_load.HOST, "--port", "{port}"),
                    *("--workers", str(workers), "--loop", "uvloop", "--http", "1"),
                    *("--log-level", "warning", "--no-ws", "serve_app:make_app"),
                ],
                env={**os.environ, "STRICTCALL_BENCH_DB": db},
            )
        )
    return targets


if __name__ == "__main__":
    sys.exit(main())
