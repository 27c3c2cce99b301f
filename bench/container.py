"""The container image: its size, and its start-to-ready time on each store.

Start-to-ready is the wall time from `docker run --detach` until `GET /healthz` answers 200 on
the host's network (127.0.0.1), the container then removed; runs alternate between a SQLite file
in a fresh volume and a fresh PostgreSQL database (127.0.0.1:5432), medians of N each.

    python bench/container.py IMAGE [N]    # IMAGE as `make image` tagged it

It writes bench/container-results.json, which bench/run.py shows in RESULTS.md (`lines`).
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import psycopg

ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
DEADLINE_S = 60.0
RESULTS = Path(__file__).resolve().parent / "container-results.json"


def docker(*args: str) -> str:
    done = subprocess.run(
        ["docker", *args], capture_output=True, text=True, timeout=120, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"docker {args[0]}: {done.stderr.strip()[-500:]}")
    return done.stdout


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1) as reply:
            return bool(reply.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def start_to_ready(image: str, options: list[str]) -> float:
    """Seconds from `docker run` to /healthz answering 200."""
    name = "strictcall-bench-" + secrets.token_hex(4)
    port = free_port()
    serve = ["serve", "--host", "127.0.0.1", "--port", str(port)]
    started = time.perf_counter()
    docker("run", "--detach", "--name", name, "--network", "host", *options, image, *serve)
    try:
        while not ready(f"http://127.0.0.1:{port}/healthz"):
            if time.perf_counter() - started > DEADLINE_S:
                raise RuntimeError("not ready: " + docker("logs", name)[-500:])
            time.sleep(0.005)
        return time.perf_counter() - started
    finally:
        docker("rm", "--force", "--volumes", name)


def on_sqlite(image: str) -> float:
    volume = "strictcall-bench-" + secrets.token_hex(4)
    docker("volume", "create", volume)
    try:
        return start_to_ready(image, ["--volume", f"{volume}:/var/lib/strictcall"])
    finally:
        docker("volume", "rm", "--force", volume)


def on_postgres(image: str) -> float:
    name = "strictcall_bench_" + secrets.token_hex(4)
    with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        url = ADMIN_URL.rsplit("/", 1)[0] + "/" + name
        return start_to_ready(image, ["--env", f"STRICTCALL_DB={url}"])
    finally:
        with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def main() -> None:
    image = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    load_start = os.getloadavg()
    size = int(docker("image", "inspect", "--format", "{{.Size}}", image))
    times: dict[str, list[float]] = {"sqlite": [], "postgres": []}
    for _ in range(n):  # alternating, so that a busy spell on the machine falls on both
        times["sqlite"].append(on_sqlite(image))
        times["postgres"].append(on_postgres(image))
    revision = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    result = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "commit": revision,
        "load_average": [list(load_start), list(os.getloadavg())],
        "image": image,
        "size_bytes": size,
        "size_mb": round(size / 1e6, 1),
        "runs": n,
        "start_to_ready_s": {
            kind: {
                "median": round(statistics.median(ts), 3),
                "min": round(min(ts), 3),
                "max": round(max(ts), 3),
            }
            for kind, ts in times.items()
        },
    }
    RESULTS.write_text(json.dumps(result, indent=2) + "\n", "utf-8")
    print("\n".join(lines(result)))


def lines(result: dict[str, Any]) -> list[str]:
    """The figures as RESULTS.md shows them."""
    times = result["start_to_ready_s"]
    load = ", ".join(" ".join(f"{x:.2f}" for x in la) for la in result["load_average"])
    return [
        f"Measured {result['date']} at {result['commit']} (`python bench/container.py IMAGE`; "
        f"bench/container-results.json), {result['runs']} starts on each store, load average "
        f"{load} (start, end). The image as `make image` builds it, here on the tests' local "
        "Debian 12 base (python3 3.11 from Debian; no image registry is reachable here, so the "
        "official slim Python base was not measured).",
        "",
        "| what | figure |",
        "|---|---|",
        f"| image size (uncompressed, `docker image inspect`) | {result['size_mb']:.0f} MB |",
        *(
            f"| start to ready, {label}: `docker run` until /healthz answers 200 | median "
            f"{times[kind]['median'] * 1000:.0f} ms (min {times[kind]['min'] * 1000:.0f}, "
            f"max {times[kind]['max'] * 1000:.0f}) |"
            for kind, label in (("sqlite", "SQLite in a new volume"), ("postgres", "PostgreSQL"))
        ),
    ]


if __name__ == "__main__":
    main()
