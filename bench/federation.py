"""A federation against ContextForge, side by side: `python bench/federation.py [--duration S]
[--runs N] [--connections 16 64]`.

One upstream, the same for everyone: FastMCP's streamable HTTP server with `read_note`
(bench/fastmcp_server.py), one process the gateways share. Loaded by wrk in turns
(bench/http_load.py: run 1 of every target at every connection count, then run 2, ...) with
one `read_note` tools/call over MCP streamable HTTP, no session (a remote host's POST):

- the upstream called directly (a second process of the same server, loaded alone);
- `strictcall federate` with that upstream in its config (pinning on, as by default), called
  on /mcp at 2026-07-28 (envelope in `_meta`, `Mcp-Method`/`Mcp-Name`) as `notes_read_note`;
- ContextForge (PyPI `mcp-contextforge-gateway`, installed here into bench/.venv-contextforge)
  run by its `mcpgateway` command with its embedded defaults, the upstream registered as a
  gateway through its REST API, called on its /mcp as `notes-read-note`. Changed from the
  defaults, only what it refuses to start or to reach the upstream without: a JWT secret, an
  encryption secret and an admin password (its placeholders are refused), SQLite in a temp
  directory, and `SSRF_ALLOW_LOCALHOST=true` (the upstream is on 127.0.0.1).

Reported per target and load: req/s, p50, p99 and the server's CPU per request (its process
group's, from /proc: the upstream's own is not in a gateway's), and each gateway's figures
against the upstream's and strictcall's against ContextForge's. Writes bench/FEDERATION.md and
prints the JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import http_load
from http_load import HOST, N1_TEXT, Call, HttpTarget

BENCH = Path(__file__).resolve().parent
CONTEXTFORGE_VENV = BENCH / ".venv-contextforge"
CONTEXTFORGE = "mcp-contextforge-gateway"
MODERN = "2026-07-28"
NOTE = {"note_id": "n1", "text": N1_TEXT}


def call_body(tool: str, *, envelope: bool) -> bytes:
    params: dict[str, Any] = {"name": tool, "arguments": {"note_id": "n1"}}
    if envelope:
        params["_meta"] = http_load.MCP_ENVELOPE
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
    return json.dumps(call, ensure_ascii=False, separators=(",", ":")).encode()


def check_note(status: int, body: bytes) -> str | None:
    """The note, as structuredContent, in a JSON answer or in the one event of an SSE one."""
    text = body.decode("utf-8", "replace")
    if text.startswith(("event:", "data:", ":")):
        data = [line[5:].strip() for line in text.splitlines() if line.startswith("data:")]
        text = data[-1] if data else ""
    try:
        result = json.loads(text).get("result")
    except (ValueError, AttributeError):
        return f"HTTP {status}, not JSON: {body[:160]!r}"
    if status == 200 and isinstance(result, dict) and result.get("structuredContent") == NOTE:
        return None
    return f"HTTP {status}, not the note: {body[:240].decode('utf-8', 'replace')}"


def direct_target(upstream_cmd: list[str]) -> HttpTarget:
    headers = {**http_load.FASTMCP_HEADERS}
    call = Call("valid", call_body("read_note", envelope=True), headers, check_note)
    return HttpTarget(
        "the upstream directly (FastMCP)",
        "FastMCP 4 on uvicorn",
        [*upstream_cmd, "{port}"],
        "/mcp",
        [call],
        lambda port: http_load.answers(port, "POST", "/mcp", call.body, headers=call.headers),
    )


def strictcall_target(workdir: Path, upstream_url: str) -> HttpTarget:
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
    db_arg = ["--db", str(db)]
    config = workdir / "federation.toml"
    config.write_text(f"[upstreams.notes]\nurl = {json.dumps(upstream_url)}\n", encoding="utf-8")
    headers = http_load.mcp_headers(token, MODERN) | {"Mcp-Name": "notes_read_note"}
    call = Call("valid", call_body("notes_read_note", envelope=True), headers, check_note)
    return HttpTarget(
        "strictcall federate",
        "its own (uvicorn)",
        [*cli, "federate", "--config", str(config), "--host", HOST, "--port", "{port}", *db_arg],
        "/mcp",
        [call],
        lambda port: http_load.answers(port, "GET", "/healthz"),
    )


def contextforge_target(workdir: Path, upstream_url: str) -> HttpTarget:
    name = "ContextForge"
    python = CONTEXTFORGE_VENV / "bin" / "python"
    if not python.exists():
        made = subprocess.run(
            [sys.executable, "-m", "venv", str(CONTEXTFORGE_VENV)], check=False, timeout=120
        )
        installed = made.returncode == 0 and (
            subprocess.run(
                [str(python), "-m", "pip", "install", "--quiet", CONTEXTFORGE],
                check=False,
                timeout=1800,
            ).returncode
            == 0
        )
        if not installed:
            return HttpTarget(
                name, "", [], "/mcp", [], lambda port: False, unavailable="pip install failed"
            )
    version = subprocess.run(
        [
            str(python),
            "-c",
            "import importlib.metadata as m; print(m.version('" + CONTEXTFORGE + "'))",
        ],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    env = {
        **os.environ,
        "JWT_SECRET_KEY": secrets.token_hex(32),
        "AUTH_ENCRYPTION_SECRET": secrets.token_hex(32),
        "PLATFORM_ADMIN_PASSWORD": "Bench-" + secrets.token_hex(8) + "!",
        "DATABASE_URL": f"sqlite:///{workdir / 'contextforge.db'}",
        "SSRF_ALLOW_LOCALHOST": "true",
    }
    token_args = ["--username", "admin@example.com", "--admin", "--exp", "600"]
    token_args += ["--secret", env["JWT_SECRET_KEY"]]
    token_run = subprocess.run(
        [str(python), "-m", "mcpgateway.utils.create_jwt_token", *token_args],
        capture_output=True,
        text=True,
        env=env,
        cwd=workdir,
        check=False,
        timeout=120,
    )
    token = token_run.stdout.strip().splitlines()[-1] if token_run.stdout.strip() else ""
    auth = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    headers = {
        **auth,
        "Accept": "application/json, text/event-stream",
        "Mcp-Protocol-Version": "2025-11-25",
    }
    call = Call("valid", call_body("notes-read-note", envelope=False), headers, check_note)
    registered: dict[int, bool] = {}

    def ready(port: int) -> bool:
        if not http_load.answers(port, "GET", "/health"):
            return False
        if port not in registered:
            gateway = {"name": "notes", "url": upstream_url, "transport": "STREAMABLEHTTP"}
            status, body = http_load.request(
                port, "POST", "/gateways", json.dumps(gateway).encode(), auth, timeout=30
            )
            if status >= 300:
                raise RuntimeError(f"registering the upstream: HTTP {status} {body[:300]!r}")
            registered[port] = True
        return check_note(*http_load.request(port, "POST", "/mcp", call.body, headers)) is None

    return HttpTarget(
        name,
        f"{CONTEXTFORGE} {version}, `mcpgateway` with its defaults",
        [str(CONTEXTFORGE_VENV / "bin" / "mcpgateway"), "--host", HOST, "--port", "{port}"],
        "/mcp",
        [call],
        ready,
        env=env,
    )


def main(args: argparse.Namespace) -> dict[str, Any]:
    load_before = os.getloadavg()
    upstream_cmd = [sys.executable, str(BENCH / "fastmcp_server.py")]
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        port = http_load.free_port()
        with http_load.running([*upstream_cmd, str(port)], workdir / "upstream.log") as upstream:
            upstream_url = f"http://{HOST}:{port}/mcp"
            probe = direct_target(upstream_cmd)
            http_load.wait_until(lambda: probe.ready(port), upstream, 60.0)
            targets = [
                probe,
                strictcall_target(workdir, upstream_url),
                contextforge_target(workdir, upstream_url),
            ]
            results = http_load.load_targets(
                targets, workdir, args.connections, args.duration, args.runs, 1, 1
            )
    load_after = os.getloadavg()
    by_target = {
        result["target"]: {load["connections"]: load for load in result.get("loads", [])}
        for result in results
    }
    rows: list[dict[str, Any]] = []
    for result in results:
        for load in result.get("loads", []):
            conns = load["connections"]
            cf = by_target.get("ContextForge", {}).get(conns)
            rows.append(
                {
                    "target": result["target"],
                    "connections": conns,
                    "req_s": round(load["req_s"]),
                    "p50_ms": round(load["p50_ms"], 2),
                    "p99_ms": round(load["p99_ms"], 2),
                    "server_cpu_us_per_req": round(load["server_cpu_us_per_req"]),
                    "x_contextforge_req_s": None
                    if cf is None or not cf["req_s"]
                    else round(load["req_s"] / cf["req_s"], 1),
                    "p99_over_contextforge": None
                    if cf is None or not cf["p99_ms"]
                    else round(load["p99_ms"] / cf["p99_ms"], 3),
                    "non_2xx": load["non_2xx"],
                }
            )
    report = {
        "commit": http_load.commit_of(BENCH.parent),
        "duration_s": args.duration,
        "runs": args.runs,
        "load_average": [round(load_before[0], 2), round(load_after[0], 2)],
        "stacks": {result["target"]: result["stack"] for result in results},
        "rows": rows,
        "failures": [
            {"target": r["target"], "status": r.get("status"), "note": r.get("note")}
            for r in results
            if r.get("status") != "ok"
        ],
    }
    write_markdown(report, args.markdown)
    return report


def write_markdown(report: dict[str, Any], path: Path) -> None:
    lines = [
        "# A federation against ContextForge, the same upstream",
        "",
        f"`python bench/federation.py` at {report['commit']}; {report['runs']} wrk runs of "
        f"{report['duration_s']} s per target and load, in turns; load average "
        f"{report['load_average'][0]} before, {report['load_average'][1]} after (2 cores, "
        "shared). Written by the script; do not edit by hand.",
        "",
        "Every target answers one `read_note` tools/call over MCP streamable HTTP (no session)"
        " with the upstream's note; the upstream is FastMCP's HTTP server"
        " (bench/fastmcp_server.py), one process both gateways share. CPU: the server's own"
        " process group, per request.",
        "",
    ]
    for target, stack in report["stacks"].items():
        lines.append(f"- {target}: {stack}")
    lines += [
        "",
        "| target | conns | req/s | x ContextForge | p50 ms | p99 ms | p99 / ContextForge's |"
        " server CPU µs/req | non-2xx |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in report["rows"]:
        lines.append(
            f"| {row['target']} | {row['connections']} | {row['req_s']:,} | "
            f"{row['x_contextforge_req_s']} | {row['p50_ms']} | {row['p99_ms']} | "
            f"{row['p99_over_contextforge']} | {row['server_cpu_us_per_req']} | {row['non_2xx']} |"
        )
    for failure in report["failures"]:
        lines.append(f"\n{failure['target']}: {failure['status']} ({failure['note']})")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--duration", type=float, default=10.0, help="seconds per wrk run")
    parser.add_argument("--runs", type=int, default=3, help="wrk runs per target and load")
    parser.add_argument("--connections", type=int, nargs="+", default=[16, 64])
    parser.add_argument("--markdown", type=Path, default=BENCH / "FEDERATION.md")
    return parser.parse_args(argv)


if __name__ == "__main__":
    print(json.dumps(main(parse_args()), indent=2))
