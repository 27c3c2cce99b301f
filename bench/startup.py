"""Start-up: `import strictcall`, `strictcall call` end to end, and a server's time to /healthz.

- import: wall time of `python -c "import strictcall"` less `python -c pass` (runs
  interleaved, medians of N), and `-X importtime`'s cumulative figure for the package;
- call: wall time of `strictcall call --identity u1 RAW`, its answer checked first;
- serve: from the process's start until `GET /healthz` answers 200 (`strictcall serve`, on a
  prepared SQLite file; "not available" until the command exists).
"""

from __future__ import annotations

import json
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

import http_load
from http_load import HOST, N1_TEXT, Unavailable

VALID = '{"name":"read_note","arguments":{"note_id":"n1"}}'


def _timed(command: list[str]) -> tuple[float, subprocess.CompletedProcess[str]]:
    start = time.perf_counter()
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL, check=False
    )
    return time.perf_counter() - start, done


def import_time(python: str, n: int) -> dict[str, Any]:
    """Milliseconds that `import strictcall` adds to a bare interpreter's start."""
    _, done = _timed([python, "-c", "import strictcall"])
    if done.returncode != 0:
        return {"status": "WRONG", "note": done.stderr.strip()[-300:]}
    bare: list[float] = []
    imported: list[float] = []
    cumulative: list[float] = []
    for _ in range(n):
        bare.append(_timed([python, "-c", "pass"])[0])
        imported.append(_timed([python, "-c", "import strictcall"])[0])
        _, traced = _timed([python, "-X", "importtime", "-c", "import strictcall"])
        for line in traced.stderr.splitlines():
            parts = [p.strip() for p in line.split("|")]
            if len(parts) == 3 and parts[2] == "strictcall":
                cumulative.append(int(parts[1]) / 1000)
    return {
        "status": "ok",
        "ms": (statistics.median(imported) - statistics.median(bare)) * 1000,
        "python_bare_ms": statistics.median(bare) * 1000,
        "importtime_cumulative_ms": statistics.median(cumulative) if cumulative else None,
        "runs": n,
    }


def cli_call(cli: list[str], n: int) -> dict[str, Any]:
    """Milliseconds for `strictcall call --identity u1 RAW`, end to end."""
    command = [*cli, "call", "--identity", "u1", VALID]
    _, done = _timed(command)
    want = {"ok": True, "call_id": "call-1", "result": {"note_id": "n1", "text": N1_TEXT}}
    try:
        answer = json.loads(done.stdout)
    except ValueError:
        answer = None
    if done.returncode != 0 or answer != want:
        note = f"exit {done.returncode}: {done.stdout.strip()[:200]} {done.stderr.strip()[-200:]}"
        return {"status": "WRONG", "note": note}
    times = [_timed(command)[0] for _ in range(n)]
    return {"status": "ok", "ms": statistics.median(times) * 1000, "runs": n}


def serve_ready(cli: list[str], workdir: Path, n: int) -> dict[str, Any]:
    """Seconds from starting `strictcall serve` until GET /healthz answers 200."""
    try:
        db = http_load.prepare_strictcall_db(cli, workdir)
    except Unavailable as exc:
        return {"status": "not available", "note": str(exc)}
    times = []
    try:
        for i in range(n):
            port = http_load.free_port()
            command = [*cli, "serve", "--host", HOST, "--port", str(port), "--db", db["path"]]
            log_path = workdir / f"serve-start-{i}.log"
            with http_load.running(command, log_path) as server:
                times.append(
                    http_load.wait_until(
                        lambda port=port: http_load.answers(port, "GET", "/healthz"), server, 30.0
                    )
                )
    except RuntimeError as exc:
        return {"status": "failed", "note": str(exc)[:300]}
    return {"status": "ok", "s": statistics.median(times), "runs": n}
