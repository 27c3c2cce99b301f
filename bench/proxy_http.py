"""`strictcall proxy` over HTTP in front of a stdio upstream, for bench/run.py (issue 33).

The upstream is strictcall's own stdio server (`strictcall serve --mcp-stdio --identity u1`)
on a SQLite file with u1's note, so that the proxy serves the same read_note call that
`strictcall serve`'s /mcp answers with an in-process tool; the proxy has its own SQLite file
(u1's token, its audit log). Its target is loaded on /mcp as `strictcall serve`'s is.

`upstream_time` measures the upstream alone, over its own pipe with no proxy: a call's round
trip one at a time, and its time per call with `depth` calls in flight (as the proxy sends
them under load) and its CPU per call then. bench/run.py subtracts that time per call from
the proxy's time per request (1 / its req/s) to judge the proxy less its upstream.

Where the proxy's time went (py-spy, 250 Hz, 10 s of the proxy process under wrk at 64
connections, 2025-11-25 POSTs, 2 shared cores at load 3-4.5; `python proxy_http.py` is the
short run used before and after):

- Its /mcp took strictcall's direct path, then left it: every proxied tool is async (and
  timed), so `answer_now` read the body, admitted the token and minted a call id, got `AWAIT`
  from the gateway and gave up; uvicorn then ran the request through the ASGI cycle (a task,
  receive and send, the router, every admission step again, `McpHttpApp` reading and parsing
  the body again). The ASGI cycle was 28% of the samples, the gateway and the upstream call
  inside it 14%; the abandoned in-place attempt another 6.5%. Now `answer_now` returns a
  `Later` (the coroutine that answers the call already read, under the call id already made),
  which the server awaits in a task of its own and writes as an in-place answer.
- Calls to the stdio upstream: one writer (the loop's write-pipe transport), one reader (a
  protocol on the loop, no task of its own), a future per call keyed by its id: no lock and no
  queue, so 64 connections do not wait on one pipe. But each call's line was its own write()
  (5-7% of the samples, self); the lines of one loop turn now go in one write.
- What is left, most first: the socket writes of the answers (13-16%, self; `serve` pays
  them too), the audit's SQLite batches on their thread (~6%), the SDK's CallToolResult
  validation of the upstream's answer (~3%), the call's time limit (an asyncio timeout per
  call, ~2%), call ids (~2%). The upstream's own process runs on the same 2 cores (75-145 µs
  of CPU per call measured alone), which `serve`'s in-process tool does not pay for.
- "less upstream" is noisy on a shared machine: the upstream's time per call with 16 in
  flight, measured alone before the load, moved between 82 and 431 µs from run to run at the
  same load; the proxy's own req/s and CPU per request are the steadier figures.
"""

from __future__ import annotations

import json
import os
import shlex
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

import http_load
from http_load import HOST, N1_TEXT, Call, HttpTarget, Unavailable

UPSTREAM_VERSION = "2025-11-25"


def prepare(cli: list[str], workdir: Path) -> dict[str, str]:
    """The upstream's SQLite file (u1's note) and the proxy's (u1's token), in `workdir`.

    Raises:
        Unavailable: the operator CLI could not make them.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    upstream = http_load.prepare_strictcall_db(cli, workdir)
    proxy_db = str(workdir / "proxy.sqlite3")
    made = subprocess.run(
        [*cli, "tokens", "create", "--identity", "u1", "--db", proxy_db],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    lines = made.stdout.strip().splitlines()
    if made.returncode != 0 or not lines:
        raise Unavailable(f"`strictcall tokens create` exited {made.returncode}")
    return {
        "upstream_db": upstream["path"],
        "note": upstream["note_u1"],
        "proxy_db": proxy_db,
        "token": lines[-1].strip(),
    }


def upstream_command(cli: list[str], db: str) -> list[str]:
    return [*cli, "serve", "--mcp-stdio", "--identity", "u1", "--db", db]


def proxy_target(cli: list[str], workdir: Path, version: str) -> HttpTarget:
    """`strictcall proxy` on HTTP in front of the stdio upstream, loaded on /mcp at `version`."""
    name = f"strictcall proxy /mcp {version} (stdio upstream)"
    try:
        made = prepare(cli, workdir / f"proxy-{version}")
    except (Unavailable, OSError, subprocess.SubprocessError) as exc:
        return HttpTarget(name, "", [], "/mcp", [], lambda port: False, unavailable=str(exc))
    note, token = made["note"], made["token"]
    headers = http_load.mcp_headers(token, version)
    calls = [
        Call(
            "valid",
            http_load.mcp_body(note, version),
            headers,
            http_load.check_mcp_note(note, N1_TEXT),
        ),
        Call("invalid", http_load.mcp_body(123, version), headers, http_load.check_mcp_error),
    ]
    upstream = shlex.join(upstream_command(cli, made["upstream_db"]))
    command = [*cli, "proxy", "--upstream-cmd", upstream, "--host", HOST, "--port", "{port}"]
    return HttpTarget(
        name,
        "strictcall proxy (its own server), upstream: strictcall serve --mcp-stdio",
        [*command, "--db", made["proxy_db"]],
        "/mcp",
        calls,
        lambda port: http_load.mcp_answers(port, calls[0]),
    )


def upstream_time(
    cli: list[str], workdir: Path, calls: int = 2000, depth: int = 16
) -> dict[str, Any]:
    """The stdio upstream alone over its pipe: round trip one call at a time (median µs), and
    µs and CPU µs per call with `depth` calls in flight."""
    made = prepare(cli, workdir / "upstream-alone")
    with subprocess.Popen(
        upstream_command(cli, made["upstream_db"]),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    ) as proc:
        assert proc.stdin is not None and proc.stdout is not None
        pipe_in, pipe_out = proc.stdin, proc.stdout

        def send(message: dict[str, Any]) -> None:
            pipe_in.write(json.dumps(message).encode() + b"\n")

        def reply() -> dict[str, Any]:
            line = pipe_out.readline()
            if not line:
                raise RuntimeError("the upstream closed its pipe")
            answer: dict[str, Any] = json.loads(line)
            return answer

        try:
            send(_initialize())
            pipe_in.flush()
            reply()
            send({"jsonrpc": "2.0", "method": "notifications/initialized"})
            call = _call_line(made["note"], 1)
            in_flight = b"".join(_call_line(made["note"], 2 + n) for n in range(depth))
            one_at_a_time = []
            for _ in range(calls // 4):
                start = time.perf_counter()
                pipe_in.write(call)
                pipe_in.flush()
                answer = reply()
                one_at_a_time.append(time.perf_counter() - start)
                if answer.get("result", {}).get("structuredContent", {}).get("text") != N1_TEXT:
                    raise RuntimeError("the upstream did not answer the note")
            cpu_before = _cpu_s(proc.pid)
            start = time.perf_counter()
            for _ in range(calls // depth):
                pipe_in.write(in_flight)
                pipe_in.flush()
                for _ in range(depth):
                    reply()
            wall = time.perf_counter() - start
            cpu = _cpu_s(proc.pid) - cpu_before
        finally:
            pipe_in.close()
            proc.wait(timeout=30)
    done = (calls // depth) * depth
    return {
        "round_trip_us": round(statistics.median(one_at_a_time) * 1e6, 1),
        "depth": depth,
        "us_per_call_in_flight": round(wall / done * 1e6, 1),
        "cpu_us_per_call": round(cpu / done * 1e6, 1),
    }


def _initialize() -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": UPSTREAM_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "bench", "version": "1"},
        },
    }


def _call_line(note: str, request_id: int) -> bytes:
    call = {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": "read_note", "arguments": {"note_id": note}},
    }
    return json.dumps(call).encode() + b"\n"


def _cpu_s(pid: int) -> float:
    raw = Path(f"/proc/{pid}/stat").read_text()
    rest = raw[raw.rindex(")") + 2 :].split()
    return (int(rest[11]) + int(rest[12])) / os.sysconf("SC_CLK_TCK")


def main(argv: list[str] | None = None) -> int:
    """A short run of this part alone: `serve`'s /mcp and the proxy's at one wire version,
    loaded in turns by wrk, and the upstream alone; the proxy judged as bench/run.py does."""
    import argparse
    import sys
    import tempfile

    import mcp_wires

    parser = argparse.ArgumentParser(description="strictcall proxy over HTTP, a short run")
    parser.add_argument("--version", default=mcp_wires.VERSIONS[0])
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--connections", default="16,64")
    parser.add_argument(
        "--also-src",
        type=Path,
        help="another tree's src/ (e.g. a `git archive` of an earlier commit): its proxy is"
        " loaded too, in turns with this one's, and judged alike",
    )
    args = parser.parse_args(argv)
    script = Path(sys.executable).parent / "strictcall"
    cli = [str(script)] if script.exists() else [sys.executable, "-m", "strictcall"]
    counts = [int(part) for part in args.connections.split(",")]
    print(f"load average at the start: {os.getloadavg()}", flush=True)
    with tempfile.TemporaryDirectory(prefix="proxy-http-") as tmp:
        workdir = Path(tmp)
        upstream = upstream_time(cli, workdir)
        targets = [
            http_load.strictcall_mcp_target(cli, workdir, args.version),
            proxy_target(cli, workdir, args.version),
        ]
        if args.also_src is not None:
            other = proxy_target(cli, workdir / "also", args.version)
            other.name += f" ({args.also_src})"
            other.env = {**os.environ, "PYTHONPATH": str(args.also_src.resolve())}
            targets.append(other)
        results = http_load.load_targets(targets, workdir, counts, args.duration, args.runs, 1, 1.0)
    by_name = {r["target"]: r for r in results}
    print("\n".join(mcp_wires.proxy_lines(by_name, upstream)))
    if args.also_src is not None:
        print(f"\nThe proxy of {args.also_src}, loaded in turns with this tree's:\n")
        by_name[targets[1].name] = by_name[targets[2].name]
        print("\n".join(mcp_wires.proxy_lines(by_name, upstream)))
    print(f"load average at the end: {os.getloadavg()}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
