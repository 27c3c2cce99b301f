"""What an identity provider's tokens cost (issue 26): the same `strictcall serve`, configured
with an `[oauth]` block for a real OpenID provider (tests/oidc: oidc-provider on 127.0.0.1),
loaded on /rpc and on /mcp with the provider's JWT (client credentials, ES256) and with
strictcall's own token, the four in turns at the same connection counts (bench/http_load.py's
machinery; one server process per target, all alike). Both identities own the same note, so
each call does the same work but for its token's check.

Goal: with a verified JWT, at least 0.9x the requests/s of the same calls with strictcall's own
tokens at 16 and 64 connections, and p99 under 5 ms at 64.

A second figure, steadier on a shared machine: the same /rpc call answered in place
(`RpcApp.answer_now`, what the server does for a whole body that needs no await: admission,
the scope check, the gateway, the SQLite read), in process, the two tokens taking turns in
rounds; the ratio of the medians of their microseconds per call.

    python bench/oauth.py [--duration 5] [--runs 3] [--connections 16,64] [--json FILE]
    python bench/oauth.py --inprocess [--rounds 15] [--calls 5000]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))  # the provider harness

import http_load  # noqa: E402
from http_load import N1_TEXT, Call, HttpTarget, log  # noqa: E402

from oidc_provider import Provider, SigningKey, free_port  # noqa: E402

RATIO_GOAL = 0.9
P99_GOAL_MS = 5.0
MCP_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}
MCP_HEADERS = {
    "Accept": "application/json, text/event-stream",
    "Content-Type": "application/json",
    "Mcp-Protocol-Version": "2026-07-28",
    "Mcp-Method": "tools/call",
    "Mcp-Name": "read_note",
}


def mcp_body(note_id: str) -> bytes:
    params = {"name": "read_note", "arguments": {"note_id": note_id}, "_meta": MCP_META}
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
    return json.dumps(call, ensure_ascii=False, separators=(",", ":")).encode()


def check_mcp(note_id: str) -> http_load.Check:
    def check(status: int, body: bytes) -> str | None:
        try:
            result = json.loads(body).get("result")
        except (ValueError, AttributeError):
            return f"HTTP {status}, not JSON-RPC: {body[:160]!r}"
        want = {"note_id": note_id, "text": N1_TEXT}
        if status == 200 and isinstance(result, dict) and result.get("structuredContent") == want:
            return None
        return f"HTTP {status}, not the note: {body[:200].decode('utf-8', 'replace')}"

    return check


def targets(cli: list[str], workdir: Path, provider: Provider, resource: str) -> list[HttpTarget]:
    db = str(workdir / "oauth.sqlite3")
    config = workdir / "strictcall.toml"
    config.write_text(
        f'[oauth]\nissuer = "{provider.issuer}"\nresource = "{resource}"\n'
        'scopes = ["notes:read"]\n[oauth.tool_scopes]\ncreate_note = ["notes:write"]\n'
    )
    own = http_load._run([*cli, "tokens", "create", "--identity", "u1", "--db", db])
    own_token = own.stdout.strip().splitlines()[-1]
    notes = {}
    for owner in ("u1", "agent"):  # `agent`: the provider's client, the JWT's subject
        added = http_load._run(
            [*cli, "notes", "add", "--owner", owner, "--text", N1_TEXT, "--db", db]
        )
        notes[owner] = added.stdout.strip().splitlines()[-1]
    jwt = provider.token(resource, "notes:read notes:write")
    command = [*cli, "serve", "--host", http_load.HOST, "--port", "{port}", "--db", db,
               "--config", str(config)]  # fmt: skip
    made = []
    for wire in ("/rpc", "/mcp"):
        for name, token, owner in (("own token", own_token, "u1"), ("JWT", jwt, "agent")):
            headers = {"Authorization": f"Bearer {token}"}
            if wire == "/rpc":
                body = http_load.rpc_body(notes[owner])
                headers["Content-Type"] = "application/json"
                check = http_load.check_rpc_note(notes[owner], N1_TEXT)
            else:
                body = mcp_body(notes[owner])
                headers.update(MCP_HEADERS)
                check = check_mcp(notes[owner])
            made.append(
                HttpTarget(
                    f"{wire} {name}",
                    "strictcall serve with [oauth]",
                    command,
                    wire,
                    [Call("valid", body, headers, check)],
                    lambda port: http_load.answers(port, "GET", "/healthz"),
                )
            )
    return made


def inprocess(workdir: Path, rounds: int, calls: int) -> dict[str, Any]:
    """Microseconds per in-place /rpc call with each token, rounds interleaved."""
    import asyncio
    import statistics
    import time
    from contextlib import AsyncExitStack

    from strictcall.identity.settings import OAuthSettings
    from strictcall.server.app import build_app
    from strictcall.storage.sqlite import SQLiteStore

    cli = [sys.executable, "-m", "strictcall"]
    resource = f"http://127.0.0.1:{free_port()}"
    provider = Provider(workdir, {resource: "jwt"}, [SigningKey("k1")])
    provider.start()
    made = targets(cli, workdir, provider, resource)  # the tokens, notes and bodies
    settings = OAuthSettings(
        provider.issuer, resource, scopes=("notes:read",),
        tool_scopes={"create_note": ("notes:write",)},
    )  # fmt: skip
    store = SQLiteStore(str(workdir / "oauth.sqlite3"))
    app = build_app(store, oauth=settings)
    cases = {target.name: target.calls[0] for target in made if target.path == "/rpc"}

    def scope_of(call: Call) -> dict[str, Any]:
        headers = [(k.lower().encode(), v.encode()) for k, v in call.headers.items()]
        return {"type": "http", "method": "POST", "path": "/rpc", "headers": headers}

    async def run() -> dict[str, list[float]]:
        async with AsyncExitStack() as stack:
            for lifespan in app.lifespans:  # the server's start: the keys are fetched too
                await stack.enter_async_context(lifespan())
            jwt = cases["/rpc JWT"]
            deadline = time.monotonic() + 30
            while True:  # until the provider's keys are fetched, in the background
                answer = app.answer_now(scope_of(jwt), jwt.body)
                if answer is not None and answer[0] != 503:
                    break
                assert time.monotonic() < deadline, "the provider's keys were not fetched"
                await asyncio.sleep(0.05)
            samples: dict[str, list[float]] = {name: [] for name in cases}
            for name, call in cases.items():  # both answer right, in place
                answer = app.answer_now(scope_of(call), call.body)
                assert answer is not None and call.check(answer[0], answer[2]) is None, name
            for _ in range(rounds):
                for name, call in cases.items():
                    scope, body = scope_of(call), call.body
                    started = time.perf_counter_ns()
                    for _ in range(calls):
                        app.answer_now(scope, body)
                    samples[name].append((time.perf_counter_ns() - started) / calls / 1000)
            return samples

    try:
        samples = asyncio.run(run())
    finally:
        provider.stop()
        store.close()
    own = statistics.median(samples["/rpc own token"])
    jwt = statistics.median(samples["/rpc JWT"])
    result = {
        "own_us_per_call": round(own, 2),
        "jwt_us_per_call": round(jwt, 2),
        "calls_per_s_ratio": round(own / jwt, 3),
        "rounds": rounds,
        "calls": calls,
    }
    log(
        f"in place, /rpc read_note: own token {own:.1f} us, JWT {jwt:.1f} us per call:"
        f" the JWT's calls/s {own / jwt:.2f}x the own token's (goal {RATIO_GOAL})"
    )
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inprocess", action="store_true")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--calls", type=int, default=5000)
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--connections", default="16,64")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if args.inprocess:
        with tempfile.TemporaryDirectory() as tmp:
            result = inprocess(Path(tmp), args.rounds, args.calls)
        result["commit"] = http_load.commit_of(ROOT)
        if args.json is not None:
            args.json.write_text(json.dumps(result, indent=2) + "\n")
        print(json.dumps(result, indent=2))
        return 0
    connections = [int(c) for c in args.connections.split(",")]
    cli = [sys.executable, "-m", "strictcall"]
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        resource = f"http://127.0.0.1:{free_port()}"
        provider = Provider(workdir, {resource: "jwt"}, [SigningKey("k1")])
        provider.start()
        try:
            loaded = http_load.load_targets(
                targets(cli, workdir, provider, resource),
                workdir,
                connections,
                args.duration,
                args.runs,
                args.threads,
                warmup_s=1,
            )
        finally:
            provider.stop()
    by_name = {out["target"]: out for out in loaded}
    summary: dict[str, Any] = {"commit": http_load.commit_of(ROOT), "targets": loaded}
    ratios = []
    for wire in ("/rpc", "/mcp"):
        own, jwt = by_name[f"{wire} own token"], by_name[f"{wire} JWT"]
        for own_load, jwt_load in zip(own["loads"], jwt["loads"], strict=True):
            ratio = jwt_load["req_s"] / own_load["req_s"]
            row = {
                "wire": wire,
                "connections": own_load["connections"],
                "own_req_s": round(own_load["req_s"]),
                "jwt_req_s": round(jwt_load["req_s"]),
                "ratio": round(ratio, 3),
                "own_p99_ms": round(own_load["p99_ms"], 2),
                "jwt_p99_ms": round(jwt_load["p99_ms"], 2),
            }
            ratios.append(row)
            log(
                f"{wire} c={row['connections']}: own {row['own_req_s']:,} req/s, JWT"
                f" {row['jwt_req_s']:,} req/s: {ratio:.2f}x (goal {RATIO_GOAL}); p99 own"
                f" {row['own_p99_ms']} ms, JWT {row['jwt_p99_ms']} ms"
            )
    summary["ratios"] = ratios
    if args.json is not None:
        args.json.write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps(ratios, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
