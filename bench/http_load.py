"""HTTP on 127.0.0.1, loaded by wrk: servers started, checked, loaded, and always stopped.

Each target is started in a process group of its own, polled until it answers (a deadline, no
fixed sleep), its answers to the valid, invalid (and cross-owner) calls checked. Then all are
loaded by wrk in turns (each run of each connection count goes to every target before the next
run starts, so that a shared machine's changing load weighs on all alike), for a bounded time,
then checked again and stopped (SIGTERM, then SIGKILL, by the process group of the process this
module started). wrk reports through a Lua
`done` hook as one JSON line: requests, duration, latency percentiles and every error count.
The server's CPU time per request is read from /proc for its process group.

Standard library only (runs in the project's venv; the servers run in whichever venv they need).
"""

from __future__ import annotations

import atexit
import contextlib
import http.client
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # reliability/, for progress

from reliability.progress import Progress

HOST = "127.0.0.1"
N1_TEXT = "退款窗口为 7 天。"
U2_TEXT = "另一份私人笔记。"

Check = Callable[[int, bytes], str | None]
WRK_TIMEOUT_S = 2.0
"""How long wrk waits for an answer before it counts a timeout (a bench may set it longer)."""


def log(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


def commit_of(root: Path) -> str:
    """The short commit `root` is at, "+ uncommitted src/ changes" when src/ differs from it."""

    def git(*args: str) -> str:
        done = subprocess.run(
            ["git", "-C", str(root), *args], capture_output=True, text=True, check=False
        )
        return done.stdout.strip()

    dirty = git("status", "--porcelain", "--", "src")
    return (git("rev-parse", "--short", "HEAD") or "unknown") + (
        " + uncommitted src/ changes" if dirty else ""
    )


# --- processes ---------------------------------------------------------------------------------

_RUNNING: list[Started] = []


class Started:
    """A server process this bench started, in a new session (so its group id is its pid)."""

    def __init__(self, command: list[str], log_path: Path, env: dict[str, str] | None = None):
        self.log_path = log_path
        self._log = log_path.open("wb")
        self.started_at = time.perf_counter()
        self.proc = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=env,
        )
        _RUNNING.append(self)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> None:
        """SIGTERM to the group, up to 5 s to exit, then SIGKILL; idempotent."""
        pgid = self.proc.pid
        if self.alive():
            _signal_group(pgid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                _signal_group(pgid, signal.SIGKILL)
                self.proc.wait(timeout=5)
        _signal_group(pgid, signal.SIGKILL)  # anything the server left behind in its group
        self._log.close()
        if self in _RUNNING:
            _RUNNING.remove(self)

    def tail(self, lines: int = 5) -> str:
        try:
            text = self.log_path.read_text("utf-8", "replace")
        except OSError:
            return ""
        return " | ".join(text.strip().splitlines()[-lines:])


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def stop_all() -> None:
    """Stop every server still running (at exit, and on the way out of any failure)."""
    for started in list(_RUNNING):
        with contextlib.suppress(Exception):
            started.stop()


atexit.register(stop_all)


@contextlib.contextmanager
def running(
    command: list[str], log_path: Path, env: dict[str, str] | None = None
) -> Iterator[Started]:
    started = Started(command, log_path, env)
    try:
        yield started
    finally:
        started.stop()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def wait_until(probe: Callable[[], bool], started: Started, deadline_s: float) -> float:
    """Poll `probe` until it is true; seconds since the process was started.

    Raises:
        RuntimeError: the process exited, or the deadline passed.
    """
    end = time.perf_counter() + deadline_s
    while True:
        if probe():
            return time.perf_counter() - started.started_at
        if not started.alive():
            raise RuntimeError(f"server exited ({started.proc.returncode}): {started.tail()}")
        if time.perf_counter() > end:
            raise RuntimeError(f"not ready within {deadline_s:.0f} s: {started.tail()}")
        time.sleep(0.005)  # poll interval, not a readiness guess


def request(
    port: int,
    method: str,
    path: str,
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
    timeout: float = 2.0,
) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection(HOST, port, timeout=timeout)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def answers(port: int, method: str, path: str, body: bytes | None = None, **kw: Any) -> bool:
    """A readiness probe: the request gets a 200."""
    try:
        status, _ = request(port, method, path, body, kw.get("headers"), timeout=0.5)
    except OSError:
        return False
    return status == 200


# --- targets -----------------------------------------------------------------------------------


@dataclass
class Call:
    """One request a target must answer right: its case, body, headers and check."""

    case: str
    body: bytes
    headers: dict[str, str]
    check: Check


@dataclass
class HttpTarget:
    name: str
    stack: str
    command: list[str]  # "{port}" is replaced by the port
    path: str
    calls: list[Call]  # the first one is the valid call, the one that is loaded
    ready: Callable[[int], bool]
    env: dict[str, str] | None = None
    unavailable: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def rpc_body(note_id: Any, request_id: int = 1) -> bytes:
    call = {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": "read_note", "arguments": {"note_id": note_id}},
    }
    return json.dumps(call, ensure_ascii=False, separators=(",", ":")).encode()


def check_rpc_note(note_id: str, text: str) -> Check:
    def check(status: int, body: bytes) -> str | None:
        try:
            reply = json.loads(body)
        except ValueError:
            return f"HTTP {status}, not JSON: {body[:160]!r}"
        want = {"jsonrpc": "2.0", "id": 1, "result": {"note_id": note_id, "text": text}}
        if status == 200 and reply == want:
            return None
        return f"HTTP {status}, not the note: {body[:200].decode('utf-8', 'replace')}"

    return check


def check_rpc_refusal(code: str | None) -> Check:
    """A JSON-RPC error reply (no result); when its data names a code, the expected one."""

    def check(status: int, body: bytes) -> str | None:
        try:
            reply = json.loads(body)
        except ValueError:
            return f"HTTP {status}, not JSON: {body[:160]!r}"
        error = reply.get("error") if isinstance(reply, dict) else None
        if not isinstance(error, dict) or "result" in reply:
            return f"HTTP {status}, not a refusal: {body[:200].decode('utf-8', 'replace')}"
        data = error.get("data")
        got = data.get("code") if isinstance(data, dict) else None
        if code is not None and got is not None and got != code:
            return f"HTTP {status}, refused as {got}, expected {code}"
        return None

    return check


def strictcall_target(cli: list[str], workdir: Path, db_url: str | None = None) -> HttpTarget:
    """`strictcall serve` on a fresh SQLite file with u1's and u2's notes and tokens, or on
    `db_url` (an empty PostgreSQL database) made the same way."""
    name = "strictcall serve" if db_url is None else "strictcall serve, PostgreSQL store"
    try:
        db = prepare_strictcall_db(cli, workdir, db_url)
    except Unavailable as exc:
        return HttpTarget(name, "", [], "/rpc", [], lambda port: False, unavailable=str(exc))
    token1, token2, note_id = db["token_u1"], db["token_u2"], db["note_u1"]

    def headers(token: str) -> dict[str, str]:
        return {"Content-Type": "application/json", "Authorization": f"Bearer {token}"}

    calls = [
        Call("valid", rpc_body(note_id), headers(token1), check_rpc_note(note_id, N1_TEXT)),
        Call("invalid", rpc_body(123), headers(token1), check_rpc_refusal("invalid_arguments")),
        Call(
            "cross_owner",
            rpc_body(note_id),
            headers(token2),
            check_rpc_refusal("forbidden_or_missing"),
        ),
    ]
    command = [*cli, "serve", "--host", HOST, "--port", "{port}", "--db", db["path"]]
    return HttpTarget(
        name,
        "its own choice (strictcall serve)",
        command,
        "/rpc",
        calls,
        lambda port: answers(port, "GET", "/healthz"),
    )


MCP_ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


def mcp_body(note_id: Any, version: str) -> bytes:
    """A tools/call on /mcp as a remote host posts it: on 2026-07-28 with its envelope."""
    params: dict[str, Any] = {"name": "read_note", "arguments": {"note_id": note_id}}
    if version == "2026-07-28":
        params["_meta"] = MCP_ENVELOPE
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
    return json.dumps(call, ensure_ascii=False, separators=(",", ":")).encode()


def mcp_headers(token: str, version: str) -> dict[str, str]:
    headers = {
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "Authorization": f"Bearer {token}",
        "Mcp-Protocol-Version": version,
    }
    if version == "2026-07-28":
        headers |= {"Mcp-Method": "tools/call", "Mcp-Name": "read_note"}
    return headers


def check_mcp_note(note_id: str, text: str) -> Check:
    def check(status: int, body: bytes) -> str | None:
        try:
            result = json.loads(body).get("result")
        except (ValueError, AttributeError):
            return f"HTTP {status}, not a JSON object: {body[:160]!r}"
        want = {"note_id": note_id, "text": text}
        if status == 200 and isinstance(result, dict) and result.get("structuredContent") == want:
            return None
        return f"HTTP {status}, not the note: {body[:200].decode('utf-8', 'replace')}"

    return check


def check_mcp_error(status: int, body: bytes) -> str | None:
    try:
        result = json.loads(body).get("result")
    except (ValueError, AttributeError):
        return f"HTTP {status}, not a JSON object: {body[:160]!r}"
    if status == 200 and isinstance(result, dict) and result.get("isError") is True:
        return None
    return f"HTTP {status}, not an error result: {body[:200].decode('utf-8', 'replace')}"


def strictcall_mcp_target(cli: list[str], workdir: Path, version: str) -> HttpTarget:
    """`strictcall serve` as `strictcall_target` makes it, loaded on /mcp at wire `version`."""
    name = f"strictcall serve /mcp {version}"
    try:
        db = prepare_strictcall_db(cli, workdir)
    except Unavailable as exc:
        return HttpTarget(name, "", [], "/mcp", [], lambda port: False, unavailable=str(exc))
    token1, token2, note_id = db["token_u1"], db["token_u2"], db["note_u1"]
    calls = [
        Call(
            "valid",
            mcp_body(note_id, version),
            mcp_headers(token1, version),
            check_mcp_note(note_id, N1_TEXT),
        ),
        Call("invalid", mcp_body(123, version), mcp_headers(token1, version), check_mcp_error),
        Call(
            "cross_owner", mcp_body(note_id, version), mcp_headers(token2, version), check_mcp_error
        ),
    ]
    command = [*cli, "serve", "--host", HOST, "--port", "{port}", "--db", db["path"]]
    return HttpTarget(
        name,
        "its own choice (strictcall serve)",
        command,
        "/mcp",
        calls,
        lambda port: mcp_answers(port, calls[0]),
    )


def mcp_answers(port: int, call: Call) -> bool:
    """A readiness probe for /mcp: `call` gets a 200. /healthz answers before the MCP SDK is
    loaded (on a thread, after start-up): a busy machine takes seconds more to load it, which
    the first check's 2 s must not count."""
    return answers(port, "POST", "/mcp", call.body, headers=call.headers)


class Unavailable(Exception):
    """A target's interface is not there yet."""


def prepare_strictcall_db(
    cli: list[str], workdir: Path, db_url: str | None = None
) -> dict[str, str]:
    """A SQLite file (or the database at `db_url`) with a token for u1 and u2 and one note
    each, made by the operator CLI.

    Raises:
        Unavailable: `strictcall serve`, `tokens create` or `notes add` is not there yet.
    """
    probe = _run([*cli, "serve", "--help"])
    if probe.returncode != 0:
        raise Unavailable(
            "waits for `strictcall serve --host H --port P --db PATH` "
            f"(`strictcall serve --help` exited {probe.returncode})"
        )
    path = str(workdir / "serve.sqlite3") if db_url is None else db_url
    out: dict[str, str] = {"path": path}
    for identity in ("u1", "u2"):
        made = _run([*cli, "tokens", "create", "--identity", identity, "--db", path])
        lines = made.stdout.strip().splitlines()
        if made.returncode != 0 or not lines:
            raise Unavailable(
                f"waits for `strictcall tokens create --identity ID --db PATH` (exit "
                f"{made.returncode}: {made.stderr.strip()[-200:]})"
            )
        out[f"token_{identity}"] = lines[-1].strip()
    for identity, text in (("u1", N1_TEXT), ("u2", U2_TEXT)):
        added = _run([*cli, "notes", "add", "--owner", identity, "--text", text, "--db", path])
        lines = added.stdout.strip().splitlines()
        if added.returncode != 0 or not lines:
            raise Unavailable(
                f"waits for `strictcall notes add --owner ID --text TEXT --db PATH` (exit "
                f"{added.returncode}: {added.stderr.strip()[-200:]})"
            )
        out[f"note_{identity}"] = lines[-1].strip()
    return out


def _run(command: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL, check=False
    )


def bare_target(
    python: str, bench_dir: Path, *, sqlite: bool = False, coalesced: bool = False
) -> HttpTarget:
    """The raw ASGI app (bench/bare_asgi.py) on uvicorn: loads, lookups, dumps, no checks.

    Reference variants: `sqlite`, the note read by one indexed sqlite3 SELECT; `coalesced`, on
    strictcall's own protocol (`strictcall.server._uvicorn`, one write per answer) instead of
    uvicorn's stock one (needs strictcall in `python`'s venv).
    """

    def headers(token: str) -> dict[str, str]:
        return {"Content-Type": "application/json", "Authorization": f"Bearer {token}"}

    calls = [
        Call("valid", rpc_body("n1"), headers("bench-token-u1"), check_rpc_note("n1", N1_TEXT)),
        Call("invalid", rpc_body(123), headers("bench-token-u1"), check_rpc_refusal(None)),
        Call("cross_owner", rpc_body("n1"), headers("bench-token-u2"), check_rpc_refusal(None)),
    ]
    if sqlite or coalesced:
        command = [python, str(bench_dir / "bare_asgi.py"), "--host", HOST, "--port", "{port}"]
        flags = [flag for flag, on in (("--sqlite", sqlite), ("--coalesced", coalesced)) if on]
        what = {
            "--sqlite": "+ one sqlite3 SELECT",
            "--coalesced": "on strictcall's coalesced writes",
        }
        return HttpTarget(
            "reference: bare endpoint " + " ".join(what[flag] for flag in flags),
            f"bench/bare_asgi.py {' '.join(flags)} ({python})",
            [*command, *flags],
            "/rpc",
            calls,
            lambda port: answers(port, "GET", "/healthz"),
        )
    command = [
        python,
        "-m",
        "uvicorn",
        "bare_asgi:app",
        "--app-dir",
        str(bench_dir),
        "--host",
        HOST,
        "--port",
        "{port}",
        "--log-level",
        "warning",
        "--no-access-log",
    ]
    return HttpTarget(
        "bare JSON endpoint (raw ASGI, no checks)",
        f"uvicorn ({python})",
        command,
        "/rpc",
        calls,
        lambda port: answers(port, "GET", "/healthz"),
    )


FASTMCP_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "fastmcp", "version": "4.2.3"},
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/logLevel": "debug",
    "progressToken": 1,
}


def fastmcp_body(note_id: Any) -> bytes:
    """The POST fastmcp.Client 4.x sends for tools/call (2026-07-28 wire, no session)."""
    call = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "read_note", "arguments": {"note_id": note_id}, "_meta": FASTMCP_META},
    }
    return json.dumps(call, ensure_ascii=False, separators=(",", ":")).encode()


FASTMCP_HEADERS = {
    "Accept": "application/json, text/event-stream",
    "Content-Type": "application/json",
    "Mcp-Protocol-Version": "2026-07-28",
    "Mcp-Method": "tools/call",
    "Mcp-Name": "read_note",
}


def _check_fastmcp(valid: bool) -> Check:
    def check(status: int, body: bytes) -> str | None:
        try:
            reply = json.loads(body)
        except ValueError:
            return f"HTTP {status}, not JSON: {body[:160]!r}"
        result = reply.get("result") if isinstance(reply, dict) else None
        if valid:
            want = {"note_id": "n1", "text": N1_TEXT}
            right = isinstance(result, dict) and result.get("structuredContent") == want
            if status == 200 and right and not result.get("isError"):
                return None
            return f"HTTP {status}, not the note: {body[:200].decode('utf-8', 'replace')}"
        refused = "error" in reply or (isinstance(result, dict) and result.get("isError") is True)
        return None if refused else f"HTTP {status}, not a refusal: {body[:200]!r}"

    return check


def fastmcp_target(python: str, bench_dir: Path) -> HttpTarget:
    calls = [
        Call("valid", fastmcp_body("n1"), FASTMCP_HEADERS, _check_fastmcp(True)),
        Call("invalid", fastmcp_body(123), FASTMCP_HEADERS, _check_fastmcp(False)),
    ]
    valid = calls[0]
    return HttpTarget(
        "FastMCP streamable HTTP",
        f"uvicorn ({python})",
        [python, str(bench_dir / "fastmcp_server.py"), "{port}"],
        "/mcp",
        calls,
        lambda port: answers(port, "POST", "/mcp", valid.body, headers=valid.headers),
    )


# --- wrk ---------------------------------------------------------------------------------------

_DONE_HOOK = r"""
function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    "WRK_JSON {\"requests\":%d,\"duration_us\":%d,\"bytes\":%d,\"connect\":%d,\"read\":%d," ..
    "\"write\":%d,\"status\":%d,\"timeout\":%d,\"p50_us\":%d,\"p90_us\":%d,\"p99_us\":%d," ..
    "\"max_us\":%d,\"mean_us\":%.1f}\n",
    summary.requests, summary.duration, summary.bytes, e.connect, e.read, e.write, e.status,
    e.timeout, latency:percentile(50), latency:percentile(90), latency:percentile(99),
    latency.max, latency.mean))
end
"""


def wrk_script(call: Call, path: Path) -> Path:
    """A Lua script that POSTs `call` and prints the results as one JSON line."""
    body = call.body.decode("utf-8")
    if "]==]" in body:
        raise ValueError("body cannot be quoted as a Lua long string")
    lines = ['wrk.method = "POST"', f"wrk.body = [==[{body}]==]"]
    for name, value in call.headers.items():
        lines.append(f'wrk.headers["{name}"] = "{value}"')
    path.write_text("\n".join(lines) + "\n" + _DONE_HOOK, "utf-8")
    return path


def run_wrk(
    url: str, script: Path, connections: int, duration_s: float, threads: int
) -> dict[str, Any]:
    threads = max(1, min(threads, connections))
    seconds = max(1, round(duration_s))  # wrk takes whole seconds only
    command = [
        "wrk",
        f"-t{threads}",
        f"-c{connections}",
        f"-d{seconds}s",
        "--timeout",
        f"{WRK_TIMEOUT_S:g}s",
        "--latency",
        "-s",
        str(script),
        url,
    ]
    done = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=seconds + 30,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    for line in done.stdout.splitlines():
        if line.startswith("WRK_JSON "):
            result: dict[str, Any] = json.loads(line[len("WRK_JSON ") :])
            result["req_s"] = result["requests"] / (result["duration_us"] / 1e6)
            result["socket_errors"] = sum(
                result[k] for k in ("connect", "read", "write", "timeout")
            )
            return result
    tail = (done.stderr + done.stdout).strip()[-300:]
    raise RuntimeError(f"wrk printed no result (exit {done.returncode}): {tail}")


def group_cpu_s(pgid: int) -> float:
    """User + system CPU seconds of every live process in the process group."""
    ticks = 0
    tck = os.sysconf("SC_CLK_TCK")
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            raw = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        rest = raw[raw.rindex(")") + 2 :].split()
        if int(rest[2]) == pgid:
            ticks += int(rest[11]) + int(rest[12])
    return ticks / tck


# --- one target, start to stop -----------------------------------------------------------------


def load_targets(
    targets: list[HttpTarget],
    workdir: Path,
    connections: list[int],
    duration_s: float,
    runs: int,
    threads: int,
    warmup_s: float,
) -> list[dict[str, Any]]:
    """Start and check every target, load them in turns, check and stop them: a result dict
    per target whatever happens.

    The loads are interleaved (run 1 of every target at every connection count, then run 2,
    ...), so that a shared machine's drifting load weighs on every target alike and the ratios
    between them stay fair; a server waits idle while another is loaded.
    """
    outs = [
        {"target": target.name, "stack": target.stack, "loads": [], "samples": {}}
        for target in targets
    ]
    with contextlib.ExitStack() as stack:
        live: list[_Live] = []
        for target, out in zip(targets, outs, strict=True):
            if target.unavailable is not None:
                out.update(status="not available", note=target.unavailable)
                continue
            try:
                live.append(_start(target, workdir, out, stack))
            except Exception as exc:
                if "status" not in out:
                    out.update(status="failed", note=f"{type(exc).__name__}: {str(exc)[:300]}")
        if warmup_s > 0:
            for one in live:
                run_wrk(one.url, one.script, connections[0], warmup_s, threads)
        loads = runs * len(connections) * len(live)
        with Progress("HTTP: wrk runs", total=loads, unit="runs") as progress:
            for _ in range(runs):
                for conns in connections:
                    for one in live:
                        if "status" not in one.out:
                            _load_once(one, conns, duration_s, threads)
                        progress.advance()
        for one in live:
            if "status" not in one.out:
                wrong_after = _check_calls(one.target, one.port)
                if wrong_after:
                    one.out.update(status="WRONG", note="after load: " + "; ".join(wrong_after))
                else:
                    one.out["status"] = "ok"
    for out in outs:
        samples = out.pop("samples")
        out["loads"] = [_summarise(c, samples[c]) for c in connections if c in samples]
    return outs


@dataclass
class _Live:
    """A started target, its result dict, and how to load it."""

    target: HttpTarget
    out: dict[str, Any]
    server: Started
    port: int
    script: Path

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}{self.target.path}"


def _start(
    target: HttpTarget, workdir: Path, out: dict[str, Any], stack: contextlib.ExitStack
) -> _Live:
    """Start `target` (stopped when `stack` closes), wait until it answers, check its answers.

    Raises:
        RuntimeError: it answered a call wrongly (also said in `out`).
    """
    port = free_port()
    command = [part.replace("{port}", str(port)) for part in target.command]
    safe = target.name.split()[0].lower()
    log(f"HTTP: starting {target.name} on {HOST}:{port}")
    server = stack.enter_context(running(command, workdir / f"{safe}-{port}.log", target.env))
    out["ready_s"] = wait_until(lambda: target.ready(port), server, 30.0)
    wrong = _check_calls(target, port)
    if wrong:
        out.update(status="WRONG", note="; ".join(wrong))
        raise RuntimeError("wrong answers")
    script = wrk_script(target.calls[0], workdir / f"{safe}-{port}.lua")
    return _Live(target, out, server, port, script)


def _load_once(one: _Live, conns: int, duration_s: float, threads: int) -> None:
    """One wrk run against `one`, its sample kept (or the target marked failed)."""
    try:
        cpu_before = group_cpu_s(one.server.proc.pid)
        result = run_wrk(one.url, one.script, conns, duration_s, threads)
        cpu = group_cpu_s(one.server.proc.pid) - cpu_before
    except Exception as exc:
        one.out.update(status="failed", note=f"{type(exc).__name__}: {exc}"[:300])
        return
    result["server_cpu_us_per_req"] = cpu / max(result["requests"], 1) * 1e6
    one.out["samples"].setdefault(conns, []).append(result)
    log(
        f"  {one.target.name} c={conns}: {result['req_s']:,.0f} req/s, "
        f"p99 {result['p99_us'] / 1000:.2f} ms, non-2xx {result['status']}, "
        f"socket errors {result['socket_errors']}"
    )


def _check_calls(target: HttpTarget, port: int) -> list[str]:
    wrong = []
    for call in target.calls:
        try:
            status, body = request(
                port, "POST", target.path, call.body, call.headers, timeout=WRK_TIMEOUT_S
            )
            why = call.check(status, body)
        except OSError as exc:
            why = f"{type(exc).__name__}: {exc}"
        if why is not None:
            wrong.append(f"{call.case}: {why}")
    return wrong


def _summarise(connections: int, samples: list[dict[str, Any]]) -> dict[str, Any]:
    def med(key: str) -> float:
        return float(statistics.median(s[key] for s in samples))

    return {
        "connections": connections,
        "runs": len(samples),
        "req_s": med("req_s"),
        "req_s_each": [round(s["req_s"]) for s in samples],
        "p50_ms": med("p50_us") / 1000,
        "p99_ms": med("p99_us") / 1000,
        "max_ms": max(s["max_us"] for s in samples) / 1000,
        "non_2xx": sum(s["status"] for s in samples),
        "socket_errors": sum(s["socket_errors"] for s in samples),
        "requests": sum(s["requests"] for s in samples),
        "server_cpu_us_per_req": med("server_cpu_us_per_req"),
    }
