"""The bare JSON endpoint: a raw ASGI app that does json.loads, dict lookups and json.dumps.

The HTTP floor on the same server stack as `strictcall serve`: POST /rpc with a JSON-RPC 2.0
tools/call for read_note, the identity from `Authorization: Bearer <token>` looked up in a
dict, the note looked up in a dict, the answer dumped. No checks beyond what a lookup needs;
a missed lookup answers a JSON-RPC error. GET /healthz answers {"status":"ok"}.

    python -m uvicorn bare_asgi:app --app-dir bench --host 127.0.0.1 --port P

Reference variants, run by this file itself (`python bench/bare_asgi.py --port P ...`):
`--sqlite` looks the note up with one indexed sqlite3 SELECT in a file of its own (what the
database read alone costs over HTTP); `--postgres URL` with the same SELECT on a PostgreSQL
database through psycopg's pool, on 8 worker threads (strictcall's way with PostgreSQL before
it awaited its calls); `--postgres URL --awaited` with that SELECT awaited on the event loop
through 8 psycopg AsyncConnections; `--postgres URL --awaited --libpq` the same, each SELECT
sent through libpq as a statement prepared on its connection (strictcall's own way now, for
its reads); and `--coalesced` serves on strictcall's own protocol (`strictcall.server._uvicorn`, one
write per answer) instead of uvicorn's stock httptools one.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

TOKENS = {"bench-token-u1": "u1", "bench-token-u2": "u2"}
NOTES = {"u1": {"n1": "退款窗口为 7 天。"}, "u2": {"n2": "另一份私人笔记。"}}

_JSON = [(b"content-type", b"application/json")]


def _in_dict(identity: str, note_id: Any) -> str | None:
    return NOTES.get(identity, {}).get(note_id)


_lookup: Callable[[str, Any], str | None] = _in_dict
_threads: Any = None  # an executor the lookup runs on (the PostgreSQL variant), or inline
_awaited: Callable[[str, Any], Awaitable[str | None]] | None = None  # or a lookup awaited


def _sqlite_lookup(path: Path) -> Callable[[str, Any], str | None]:
    """The notes in a SQLite file of their own, read by one indexed SELECT per call."""
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("CREATE TABLE notes (owner TEXT, id TEXT, text TEXT, PRIMARY KEY (owner, id))")
    for owner, notes in NOTES.items():
        for note_id, text in notes.items():
            conn.execute("INSERT INTO notes VALUES (?, ?, ?)", (owner, note_id, text))

    def lookup(identity: str, note_id: Any) -> str | None:
        row = conn.execute(
            "SELECT text FROM notes WHERE owner = ? AND id = ?", (identity, note_id)
        ).fetchone()
        return None if row is None else str(row[0])

    return lookup


def _postgres_lookup(url: str) -> Callable[[str, Any], str | None]:
    """The notes in a table of their own in the database at `url`, read by one indexed SELECT
    per call on a pooled psycopg connection (autocommit, as strictcall's)."""
    from psycopg_pool import ConnectionPool

    _make_table(url)
    pool: ConnectionPool[Any] = ConnectionPool(
        url, kwargs={"autocommit": True}, min_size=2, max_size=11, open=True
    )
    pool.wait()

    def lookup(identity: str, note_id: Any) -> str | None:
        with pool.connection() as conn:
            row = conn.execute(
                "SELECT text FROM bare_notes WHERE owner = %s AND id = %s", (identity, note_id)
            ).fetchone()
        return None if row is None else bytes(row[0]).decode()

    return lookup


def _make_table(url: str, table: str = "bare_notes") -> None:
    """The notes in a table of their own (each variant its own: two may run at once)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"DROP TABLE IF EXISTS {table}")
        conn.execute(
            f"CREATE TABLE {table} (owner text, id text, text bytea, PRIMARY KEY (owner, id))"
        )
        for owner, notes in NOTES.items():
            for note_id, text in notes.items():
                conn.execute(
                    f"INSERT INTO {table} VALUES (%s, %s, %s)".encode(),
                    (owner, note_id, text.encode()),
                )


def _postgres_awaited(url: str, size: int) -> Callable[[str, Any], Awaitable[str | None]]:
    """The same SELECT, awaited on the server's loop through `size` AsyncConnections (opened
    on the first calls, handed round by a queue)."""
    import psycopg

    _make_table(url, "bare_notes_awaited")
    idle: asyncio.Queue[Any] = asyncio.Queue()
    opened = 0

    async def lookup(identity: str, note_id: Any) -> str | None:
        nonlocal opened
        if idle.empty() and opened < size:
            opened += 1
            conn = await psycopg.AsyncConnection.connect(url, autocommit=True)
        else:
            conn = await idle.get()
        try:
            cursor = await conn.execute(
                "SELECT text FROM bare_notes_awaited WHERE owner = %s AND id = %s",
                (identity, note_id),
            )
            row = await cursor.fetchone()
        finally:
            idle.put_nowait(conn)
        return None if row is None else bytes(row[0]).decode()

    return lookup


def _postgres_libpq(url: str, size: int) -> Callable[[str, Any], Awaitable[str | None]]:
    """The same SELECT, awaited on the server's loop through `size` connections, each sent
    through libpq as a statement prepared on its connection, the socket watched by the loop
    while the connection lives (strictcall's way for its reads): no psycopg cursor per read."""
    import psycopg
    from psycopg import pq

    _make_table(url, "bare_notes_libpq")
    sql = b"SELECT text FROM bare_notes_libpq WHERE owner = $1 AND id = $2"
    idle: asyncio.Queue[_Prepared] = asyncio.Queue()
    opened = 0

    async def lookup(identity: str, note_id: Any) -> str | None:
        nonlocal opened
        if idle.empty() and opened < size:
            opened += 1
            conn = await psycopg.AsyncConnection.connect(url, autocommit=True)
            prepared = _Prepared(conn.pgconn, asyncio.get_running_loop())
            await prepared.run(lambda pgconn: pgconn.send_prepare(b"read", sql))
        else:
            prepared = idle.get_nowait() if not idle.empty() else await idle.get()
        params = [identity.encode(), str(note_id).encode()]
        try:
            result = await prepared.run(
                lambda pgconn: pgconn.send_query_prepared(
                    b"read", params, result_format=pq.Format.BINARY
                )
            )
        finally:
            idle.put_nowait(prepared)
        value = result.get_value(0, 0) if result.ntuples else None
        return None if value is None else value.decode()

    return lookup


class _Prepared:
    """A libpq connection (non-blocking) whose socket the loop watches; one command at a time."""

    def __init__(self, pgconn: Any, loop: asyncio.AbstractEventLoop) -> None:
        self.pgconn = pgconn
        self.loop = loop
        self.ready: asyncio.Future[None] | None = None
        loop.add_reader(pgconn.socket, self._readable)

    def _readable(self) -> None:
        if self.ready is not None and not self.ready.done():
            self.ready.set_result(None)

    async def run(self, send: Callable[[Any], None]) -> Any:
        pgconn = self.pgconn
        send(pgconn)
        while pgconn.flush():
            await asyncio.sleep(0)
        last = None
        while True:
            while pgconn.is_busy():
                self.ready = self.loop.create_future()
                await self.ready
                self.ready = None
                pgconn.consume_input()
            result = pgconn.get_result()
            if result is None:
                return last
            last = result


Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


async def app(scope: dict[str, Any], receive: Receive, send: Send) -> None:
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    if scope["type"] != "http":
        return
    path = scope["path"]
    if path == "/healthz":
        await _send(send, 200, b'{"status":"ok"}')
        return
    if path != "/rpc" or scope["method"] != "POST":
        await _send(send, 404, b'{"error":"not found"}')
        return
    body = b""
    more = True
    while more:
        message = await receive()
        body += message.get("body", b"")
        more = message.get("more_body", False)
    token = b""
    for name, value in scope["headers"]:
        if name == b"authorization":
            token = value[7:]  # "Bearer "
    identity = TOKENS.get(token.decode("latin-1"))
    request = json.loads(body)
    note_id = request["params"]["arguments"]["note_id"]
    if _awaited is not None:
        text = await _awaited(identity or "", note_id)
    elif _threads is None:
        text = _lookup(identity or "", note_id)
    else:
        loop = asyncio.get_running_loop()
        text = await loop.run_in_executor(_threads, _lookup, identity or "", note_id)
    if text is None:
        answer = {"jsonrpc": "2.0", "id": request["id"], "error": {"code": -32000, "message": "no"}}
    else:
        answer = {
            "jsonrpc": "2.0",
            "id": request["id"],
            "result": {"note_id": note_id, "text": text},
        }
    await _send(send, 200, json.dumps(answer).encode())


async def _send(send: Send, status: int, body: bytes) -> None:
    headers = [*_JSON, (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def main() -> None:
    """`python bench/bare_asgi.py --port P [--sqlite | --postgres URL] [--coalesced]`: a
    reference variant."""
    import argparse
    from concurrent.futures import ThreadPoolExecutor

    import uvicorn

    global _lookup, _threads, _awaited
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--sqlite", action="store_true", help="notes in a SQLite file")
    parser.add_argument("--postgres", metavar="URL", help="notes in a PostgreSQL database")
    parser.add_argument("--awaited", action="store_true", help="with --postgres: on the loop")
    parser.add_argument(
        "--libpq", action="store_true", help="with --postgres --awaited: through libpq, prepared"
    )
    parser.add_argument("--coalesced", action="store_true", help="strictcall's protocol")
    args = parser.parse_args()
    http: Any = "httptools"
    if args.coalesced:
        from strictcall.server._uvicorn import CoalescingHttpToolsProtocol

        http = CoalescingHttpToolsProtocol
    with tempfile.TemporaryDirectory(prefix="bare-sqlite-") as workdir:
        if args.sqlite:
            _lookup = _sqlite_lookup(Path(workdir) / "notes.sqlite3")
        if args.postgres and args.awaited and args.libpq:
            _awaited = _postgres_libpq(args.postgres, 8)
        elif args.postgres and args.awaited:
            _awaited = _postgres_awaited(args.postgres, 8)
        elif args.postgres:
            _lookup = _postgres_lookup(args.postgres)
            _threads = ThreadPoolExecutor(8)
        uvicorn.run(
            app, host=args.host, port=args.port, http=http, log_level="warning", access_log=False
        )


if __name__ == "__main__":
    main()
