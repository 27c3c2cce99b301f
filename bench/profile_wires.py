"""Where the time goes on /rpc and on /mcp: the same read_note call, in process, over ASGI.

    python bench/profile_wires.py [--calls N] [--rounds R] [--profile WIRE] [--top K]

Both wires run in one app (`strictcall.server.app.build_app` on a fresh SQLite file with the
demo's notes and a token), driven over ASGI with no HTTP server in between, so that what is
measured is the app's own work per request: its CPU time per request on each wire (the
process's CPU time over a batch, rounds alternating between the wires so that a busy machine
weighs on both alike), their ratio, and, with --profile, cProfile's heaviest functions by
their own time on one wire. The MCP request is a 2025-11-25 stateless POST and a 2026-07-28
POST with `Mcp-Method`/`Mcp-Name`, as a remote host sends them. With --in-place each request
is first offered to the app's `answer_now`, as strictcall's HTTP protocol offers a whole POST
to /rpc and /mcp (the path wrk's load takes).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import json
import pstats
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from strictcall.server.app import build_app
from strictcall.storage.sqlite import SQLiteStore

Message = dict[str, Any]
Wire = Callable[[], Awaitable[tuple[int, bytes]]]


def call_of(note_id: str) -> dict[str, Any]:
    return {"name": "read_note", "arguments": {"note_id": note_id}}


def rpc_body(note_id: str) -> bytes:
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call_of(note_id)}
    return json.dumps(message).encode()


def mcp_body(version: str, note_id: str) -> bytes:
    params: dict[str, Any] = call_of(note_id)
    if version == "2026-07-28":
        params["_meta"] = {
            "io.modelcontextprotocol/protocolVersion": version,
            "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {},
        }
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
    return json.dumps(message).encode()


def scope_of(path: str, token: str, body: bytes, extra: list[tuple[bytes, bytes]]) -> Message:
    headers = [
        (b"host", b"127.0.0.1:8765"),
        (b"authorization", f"Bearer {token}".encode()),
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        *extra,
    ]
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": headers,
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8765),
    }


def wire(
    app: Any,
    path: str,
    token: str,
    body: bytes,
    extra: list[tuple[bytes, bytes]],
    *,
    in_place: bool = False,
) -> Wire:
    """One request on `path`, run as the app (`in_place`: answered in place first, as the
    server's own protocol does, the app run only when that declines)."""
    scope = scope_of(path, token, body, extra)

    async def one() -> tuple[int, bytes]:
        sent = False
        status = 0
        chunks: list[bytes] = []

        async def receive() -> Message:
            nonlocal sent
            if sent:
                await asyncio.Event().wait()  # the client stays: no disconnect mid-answer
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        async def send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            elif message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))

        await app(dict(scope), receive, send)
        return status, b"".join(chunks)

    if not in_place:
        return one
    answer_now = app.answer_now

    async def now() -> tuple[int, bytes]:
        # as uvicorn's protocol offers a whole POST to /rpc and /mcp (server/_uvicorn.py)
        answered = answer_now(dict(scope), body)
        if answered is None:
            return await one()
        status, _headers, content = answered
        return status, content

    return now


async def started(app: Any) -> Callable[[], Awaitable[None]]:
    """The app's lifespan entered; the returned function leaves it."""
    to_app: asyncio.Queue[Message] = asyncio.Queue()
    from_app: asyncio.Queue[Message] = asyncio.Queue()
    task = asyncio.create_task(app({"type": "lifespan"}, to_app.get, from_app.put))
    await to_app.put({"type": "lifespan.startup"})
    assert (await from_app.get())["type"] == "lifespan.startup.complete"

    async def stop() -> None:
        await to_app.put({"type": "lifespan.shutdown"})
        await from_app.get()
        await task

    return stop


async def batch(one: Wire, calls: int) -> float:
    """CPU seconds per call over `calls` calls, each awaited before the next."""
    start = time.process_time()
    for _ in range(calls):
        await one()
    return (time.process_time() - start) / calls


async def main(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteStore(str(Path(tmp) / "notes.sqlite3"))
        token = store.create_token("u1")
        note = store.add_note("u1", "The refund window is 7 days.").note_id
        app = build_app(store, observe=False)
        stop = await started(app)
        place = args.in_place
        try:
            legacy = [(b"accept", b"application/json, text/event-stream")]
            modern = [
                *legacy,
                (b"mcp-protocol-version", b"2026-07-28"),
                (b"mcp-method", b"tools/call"),
                (b"mcp-name", b"read_note"),
            ]
            wires = {
                "rpc": wire(app, "/rpc", token, rpc_body(note), [], in_place=place),
                "mcp 2025-11-25": wire(
                    app, "/mcp", token, mcp_body("2025-11-25", note), legacy, in_place=place
                ),
                "mcp 2026-07-28": wire(
                    app, "/mcp", token, mcp_body("2026-07-28", note), modern, in_place=place
                ),
            }
            for name, one in wires.items():  # each answers, and answers the note
                status, body = await one()
                assert status == 200 and b"refund window" in body, (name, status, body[:300])
                await batch(one, 50)  # warm
            samples: dict[str, list[float]] = {name: [] for name in wires}
            for _ in range(args.rounds):
                for name, one in wires.items():
                    samples[name].append(await batch(one, args.calls))
            report: dict[str, Any] = {
                name: {"cpu_us_per_call": round(statistics.median(s) * 1e6, 1)}
                for name, s in samples.items()
            }
            floor = statistics.median(samples["rpc"])
            for name, s in samples.items():
                report[name]["x_rpc"] = round(statistics.median(s) / floor, 2)
            if args.profile is not None:
                profiler = cProfile.Profile()
                one = wires[args.profile]
                profiler.enable()
                for _ in range(args.calls):
                    await one()
                profiler.disable()
                out = io.StringIO()
                stats = pstats.Stats(profiler, stream=out).sort_stats("tottime")
                stats.print_stats(args.top)
                report["profile"] = out.getvalue()
            return report
        finally:
            await stop()
            store.close()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--profile", choices=["rpc", "mcp 2025-11-25", "mcp 2026-07-28"])
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument(
        "--in-place",
        action="store_true",
        help="answer each request as the server's protocol does: answer_now first (the path "
        "HTTP load takes), the ASGI app only when it declines",
    )
    return parser.parse_args(argv)


if __name__ == "__main__":
    result = asyncio.run(main(parse_args()))
    profile = result.pop("profile", None)
    print(json.dumps(result, indent=2))
    if profile is not None:
        sys.stdout.write(profile)
