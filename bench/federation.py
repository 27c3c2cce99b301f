"""A federation against ContextForge, side by side: `python bench/federation.py [--duration S]
[--runs N] [--connections 16 64] [--wrk-timeout S]`.

For each upstream (FastMCP's streamable HTTP server with `read_note`, bench/fastmcp_server.py;
then server-everything's streamable HTTP server with `echo`, from tests/upstreams, when node
is there), one process of it that the gateways share, loaded by wrk in turns
(bench/http_load.py: run 1 of every target at every connection count, then run 2, ...) with one
tools/call over MCP streamable HTTP:

- the upstream called directly (a second process of the same server, loaded alone; in a
  session when it wants one);
- `strictcall federate` with that upstream in its config (pinning on, as by default), called
  on /mcp at 2026-07-28 (envelope in `_meta`, `Mcp-Method`/`Mcp-Name`) as `up_<tool>`;
- ContextForge (PyPI `mcp-contextforge-gateway`, installed here into bench/.venv-contextforge)
  run by its `mcpgateway` command with its embedded defaults, the upstream registered as a
  gateway through its REST API, called on its /mcp as `up-<tool>`. Changed from the defaults,
  only what it refuses to start or to serve without: a JWT secret, an encryption secret and
  an admin password (its placeholders are refused), SQLite in a temp directory,
  `SSRF_ALLOW_LOCALHOST=true` (the upstream is on 127.0.0.1), and
  `RATE_LIMITING_ENABLED=false`: its default limit (100 MCP calls a minute per account, then
  the account locked for 15 minutes) would have it answer 429 to nearly every request.

wrk waits 30 s for an answer (not the harness's 2 s): ContextForge takes longer than 2 s at 64
connections. Reported per target and load: req/s, p50, p99 and the server's CPU per request
(its process group's, from /proc), and each against ContextForge's. Writes bench/FEDERATION.md
and prints the JSON.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import http_load
from http_load import HOST, N1_TEXT, Call, Check, HttpTarget

BENCH = Path(__file__).resolve().parent
CONTEXTFORGE_VENV = BENCH / ".venv-contextforge"
CONTEXTFORGE = "mcp-contextforge-gateway"
MODERN = "2026-07-28"
HANDSHAKE = "2025-11-25"
EVERYTHING_JS = (
    BENCH.parent
    / "tests/upstreams/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
)


@dataclass(frozen=True)
class Upstream:
    """The one upstream of a run: how to start it on a port, the tool called and its answer."""

    name: str
    command: list[str]  # "{port}" is replaced by the port
    tool: str
    arguments: dict[str, Any]
    expect: Callable[[dict[str, Any]], bool]
    """Whether a tools/call result is the right one."""
    sessions: bool
    """Whether it answers calls only in a session (an initialize first)."""


def fastmcp_upstream() -> Upstream:
    note = {"note_id": "n1", "text": N1_TEXT}
    return Upstream(
        "FastMCP 4 (Python)",
        [sys.executable, str(BENCH / "fastmcp_server.py"), "{port}"],
        "read_note",
        {"note_id": "n1"},
        lambda result: result.get("structuredContent") == note,
        sessions=False,
    )


def everything_upstream() -> Upstream | None:
    node = shutil.which("node")
    if node is None or not EVERYTHING_JS.exists():
        return None
    return Upstream(
        "server-everything (node)",
        ["env", "PORT={port}", node, str(EVERYTHING_JS), "streamableHttp"],
        "echo",
        {"message": "hi"},
        # strictcall's answer is the text as its result: {"result": "Echo: hi"}, JSON as text
        lambda result: (
            result.get("content") == [{"type": "text", "text": "Echo: hi"}]
            or result.get("structuredContent") == {"result": "Echo: hi"}
        ),
        sessions=True,
    )


def call_body(tool: str, arguments: dict[str, Any], *, envelope: bool) -> bytes:
    params: dict[str, Any] = {"name": tool, "arguments": arguments}
    if envelope:
        params["_meta"] = http_load.MCP_ENVELOPE
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
    return json.dumps(call, ensure_ascii=False, separators=(",", ":")).encode()


def answer_of(body: bytes) -> Any:
    """The JSON-RPC message of a JSON answer, or of the last event of an SSE one."""
    text = body.decode("utf-8", "replace")
    if not text.lstrip().startswith("{"):  # an SSE stream: its last event's data
        data = [line[5:].strip() for line in text.splitlines() if line.startswith("data:")]
        text = next((one for one in reversed(data) if one), "")
    return json.loads(text)


def checker(upstream: Upstream) -> Check:
    def check(status: int, body: bytes) -> str | None:
        try:
            result = answer_of(body).get("result")
        except (ValueError, AttributeError):
            return f"HTTP {status}, not JSON: {body[:160]!r}"
        if status == 200 and isinstance(result, dict) and upstream.expect(result):
            return None
        return f"HTTP {status}, not the answer: {body[:240].decode('utf-8', 'replace')}"

    return check


def open_session(port: int, headers: dict[str, str]) -> str | None:
    """An upstream session (initialize, then initialized), its id; None when none is given."""
    hello = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": HANDSHAKE,
            "capabilities": {},
            "clientInfo": {"name": "bench", "version": "1"},
        },
    }
    conn = http.client.HTTPConnection(HOST, port, timeout=5)
    try:
        conn.request("POST", "/mcp", json.dumps(hello).encode(), headers)
        response = conn.getresponse()
        response.read()
        session = response.getheader("mcp-session-id")
    finally:
        conn.close()
    if session is not None:
        done = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        http_load.request(
            port, "POST", "/mcp", json.dumps(done).encode(), {**headers, "mcp-session-id": session}
        )
    return session


def direct_target(upstream: Upstream) -> HttpTarget:
    if upstream.sessions:  # a session in the handshake era, as its clients open one
        headers = {**http_load.FASTMCP_HEADERS, "Mcp-Protocol-Version": HANDSHAKE}
        del headers["Mcp-Method"], headers["Mcp-Name"]
        body = call_body(upstream.tool, upstream.arguments, envelope=False)
    else:  # no session: 2026-07-28, as FastMCP's own client posts it
        headers = {**http_load.FASTMCP_HEADERS, "Mcp-Name": upstream.tool}
        body = call_body(upstream.tool, upstream.arguments, envelope=True)
    call = Call("valid", body, headers, checker(upstream))

    def ready(port: int) -> bool:
        if upstream.sessions and "mcp-session-id" not in call.headers:
            try:
                session = open_session(port, headers)
            except OSError:
                return False
            if session is None:
                return False
            call.headers["mcp-session-id"] = session  # the wrk script is written after this
        return http_load.answers(port, "POST", "/mcp", call.body, headers=call.headers)

    return HttpTarget(f"{upstream.name} directly", "", upstream.command, "/mcp", [call], ready)


def strictcall_target(workdir: Path, upstream: Upstream, upstream_url: str) -> HttpTarget:
    cli = [sys.executable, "-m", "strictcall"]
    db = workdir / "federation.sqlite3"
    made = subprocess.run(
        [*cli, "tokens", "create", "--identity", "u1", "--db", str(db)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    token = made.stdout.strip().splitlines()[-1]
    config = workdir / "federation.toml"
    config.write_text(f"[upstreams.up]\nurl = {json.dumps(upstream_url)}\n", encoding="utf-8")
    served = f"up_{upstream.tool}"
    headers = http_load.mcp_headers(token, MODERN) | {"Mcp-Name": served}
    body = call_body(served, upstream.arguments, envelope=True)
    call = Call("valid", body, headers, checker(upstream))
    serve = ["--host", HOST, "--port", "{port}", "--db", str(db)]
    return HttpTarget(
        "strictcall federate",
        "its own (uvicorn), pinning on",
        [*cli, "federate", "--config", str(config), *serve],
        "/mcp",
        [call],
        lambda port: http_load.answers(port, "GET", "/healthz"),
    )


def contextforge_python() -> Path | None:
    """bench/.venv-contextforge's python, the package installed there first if it is not."""
    python = CONTEXTFORGE_VENV / "bin" / "python"
    if python.exists():
        return python
    made = subprocess.run(
        [sys.executable, "-m", "venv", str(CONTEXTFORGE_VENV)], check=False, timeout=120
    )
    if made.returncode != 0:
        return None
    install = [str(python), "-m", "pip", "install", "--quiet", CONTEXTFORGE]
    done = subprocess.run(install, check=False, timeout=1800)
    return python if done.returncode == 0 else None


def contextforge_target(workdir: Path, upstream: Upstream, upstream_url: str) -> HttpTarget:
    name = "ContextForge"
    python = contextforge_python()
    if python is None:
        return HttpTarget(
            name, "", [], "/mcp", [], lambda port: False, unavailable="pip install failed"
        )
    version = subprocess.run(
        [str(python), "-c", f"import importlib.metadata as m; print(m.version('{CONTEXTFORGE}'))"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    data = workdir / "contextforge"
    data.mkdir(exist_ok=True)
    env = {
        **os.environ,
        "JWT_SECRET_KEY": secrets.token_hex(32),
        "AUTH_ENCRYPTION_SECRET": secrets.token_hex(32),
        "PLATFORM_ADMIN_PASSWORD": "Bench-" + secrets.token_hex(8) + "!",
        "DATABASE_URL": f"sqlite:///{data / 'mcp.db'}",
        "SSRF_ALLOW_LOCALHOST": "true",
        # its default limit, 100 MCP calls a minute per account and then a 15-minute lockout,
        # would measure the limit, not the gateway
        "RATE_LIMITING_ENABLED": "false",
    }
    token_args = ["--username", "admin@example.com", "--admin", "--exp", "600"]
    token_args += ["--secret", env["JWT_SECRET_KEY"]]
    token_run = subprocess.run(
        [str(python), "-m", "mcpgateway.utils.create_jwt_token", *token_args],
        capture_output=True,
        text=True,
        env=env,
        cwd=data,
        check=False,
        timeout=120,
    )
    token = token_run.stdout.strip().splitlines()[-1] if token_run.stdout.strip() else ""
    auth = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    headers = {**auth, "Accept": "application/json, text/event-stream"}
    headers["Mcp-Protocol-Version"] = HANDSHAKE
    served = "up-" + upstream.tool.replace("_", "-")
    body = call_body(served, upstream.arguments, envelope=False)
    call = Call("valid", body, headers, checker(upstream))
    registered: set[int] = set()

    def ready(port: int) -> bool:
        if not http_load.answers(port, "GET", "/health"):
            return False
        if port not in registered:
            gateway = {"name": "up", "url": upstream_url, "transport": "STREAMABLEHTTP"}
            status, answer = http_load.request(
                port, "POST", "/gateways", json.dumps(gateway).encode(), auth, timeout=60
            )
            if status >= 300:
                raise RuntimeError(f"registering the upstream: HTTP {status} {answer[:300]!r}")
            registered.add(port)
        status, answer = http_load.request(port, "POST", "/mcp", call.body, headers, timeout=30)
        return call.check(status, answer) is None

    return HttpTarget(
        name,
        f"{CONTEXTFORGE} {version}, `mcpgateway` with its defaults",
        [str(CONTEXTFORGE_VENV / "bin" / "mcpgateway"), "--host", HOST, "--port", "{port}"],
        "/mcp",
        [call],
        ready,
        env={**env, "PWD": str(data)},
    )


def run_upstream(upstream: Upstream, args: argparse.Namespace) -> dict[str, Any]:
    """The three targets in front of one upstream, loaded in turns."""
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        port = http_load.free_port()
        command = [part.replace("{port}", str(port)) for part in upstream.command]
        with http_load.running(command, workdir / "upstream.log") as started:
            upstream_url = f"http://{HOST}:{port}/mcp"
            probe = direct_target(upstream)
            http_load.wait_until(lambda: probe.ready(port), started, 60.0)
            targets = [
                direct_target(upstream),
                strictcall_target(workdir, upstream, upstream_url),
                contextforge_target(workdir, upstream, upstream_url),
            ]
            results = http_load.load_targets(
                targets, workdir, args.connections, args.duration, args.runs, 1, 1
            )
    load_after = os.getloadavg()
    cf = {load["connections"]: load for load in results[2].get("loads", [])}
    rows: list[dict[str, Any]] = []
    for result in results:
        for load in result.get("loads", []):
            theirs = cf.get(load["connections"])
            rows.append(
                {
                    "target": result["target"],
                    "connections": load["connections"],
                    "req_s": round(load["req_s"]),
                    "p50_ms": round(load["p50_ms"], 2),
                    "p99_ms": round(load["p99_ms"], 2),
                    "server_cpu_us_per_req": round(load["server_cpu_us_per_req"]),
                    "x_contextforge_req_s": _ratio(load["req_s"], theirs, "req_s", 1),
                    "p99_over_contextforge": _ratio(load["p99_ms"], theirs, "p99_ms", 3),
                    "non_2xx": load["non_2xx"],
                    "socket_errors": load.get("socket_errors", 0),
                }
            )
    return {
        "upstream": upstream.name,
        "load_average": [round(load_before[0], 2), round(load_after[0], 2)],
        "stacks": {result["target"]: result["stack"] for result in results},
        "rows": rows,
        "failures": [
            {"target": r["target"], "status": r.get("status"), "note": r.get("note")}
            for r in results
            if r.get("status") != "ok"
        ],
    }


def _ratio(ours: float, theirs: dict[str, Any] | None, key: str, digits: int) -> float | None:
    if theirs is None or not theirs[key]:  # no ContextForge figure, or zero: no ratio
        return None
    return round(ours / theirs[key], digits)


def main(args: argparse.Namespace) -> dict[str, Any]:
    http_load.WRK_TIMEOUT_S = args.wrk_timeout
    upstreams = [fastmcp_upstream(), everything_upstream()]
    runs = [run_upstream(up, args) for up in upstreams if up is not None]
    report = {
        "commit": http_load.commit_of(BENCH.parent),
        "duration_s": args.duration,
        "runs": args.runs,
        "wrk_timeout_s": args.wrk_timeout,
        "upstreams": runs,
    }
    write_markdown(report, args.markdown)
    return report


def write_markdown(report: dict[str, Any], path: Path) -> None:
    lines = [
        "# A federation against ContextForge, in front of the same upstream",
        "",
        f"`python bench/federation.py` at {report['commit']}; {report['runs']} wrk runs of "
        f"{report['duration_s']} s per target and load, in turns (wrk's timeout "
        f"{report['wrk_timeout_s']:g} s); 2 cores, shared with other work. Written by the script;"
        " do not edit by hand.",
        "",
        "Every target answers one tools/call over MCP streamable HTTP with the upstream's own"
        " answer, checked before and after the load. The upstream is one process the two"
        " gateways share; called directly, a second process of it is loaded alone. CPU: the"
        " server's own process group per request (the upstream's is not in a gateway's).",
    ]
    for run in report["upstreams"]:
        lines += [
            "",
            f"## {run['upstream']}",
            "",
            f"Load average {run['load_average'][0]} before, {run['load_average'][1]} after.",
            "",
        ]
        for target, stack in run["stacks"].items():
            if stack:
                lines.append(f"- {target}: {stack}")
        lines += [
            "",
            "| target | conns | req/s | x ContextForge | p50 ms | p99 ms | p99 / ContextForge's"
            " | server CPU µs/req | non-2xx | socket errors |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for row in run["rows"]:
            lines.append(
                f"| {row['target']} | {row['connections']} | {row['req_s']:,} | "
                f"{row['x_contextforge_req_s']} | {row['p50_ms']} | {row['p99_ms']} | "
                f"{row['p99_over_contextforge']} | {row['server_cpu_us_per_req']:,} | "
                f"{row['non_2xx']} | {row['socket_errors']} |"
            )
        for failure in run["failures"]:
            lines.append(f"\n{failure['target']}: {failure['status']} ({failure['note']})")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--duration", type=float, default=10.0, help="seconds per wrk run")
    parser.add_argument("--runs", type=int, default=3, help="wrk runs per target and load")
    parser.add_argument("--connections", type=int, nargs="+", default=[16, 64])
    parser.add_argument("--markdown", type=Path, default=BENCH / "FEDERATION.md")
    parser.add_argument(
        "--json",
        type=Path,
        default=BENCH / "federation-results.json",
        help="the report as JSON, which bench/run.py copies into RESULTS.md",
    )
    parser.add_argument(
        "--wrk-timeout", type=float, default=30.0, help="seconds wrk waits for an answer"
    )
    return parser.parse_args(argv)


if __name__ == "__main__":
    arguments = parse_args()
    report = main(arguments)
    arguments.json.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(report, indent=2))
