"""The in-place path's cost per call: `answer_now` of the served app on a POST /rpc, admission
included, in process (no sockets, no wrk), for comparing two checkouts on a busy machine.

    .venv/bin/python bench/inplace_admission.py [--calls N] [--src DIR ...]

Each `--src` (a checkout's src/ folder; default: this one's) is measured in a process of its
own, the processes alternating round after round so that the machine's changing load weighs on
each alike: the median over rounds of the best of 5 timings of N calls of `count_notes` (a
SQLite read, audited), in microseconds per call, and each source's ratio to the first.
Under valgrind (`--instructions`), each source's instructions per call instead: the count of a
run of N calls less that of a run of none, so start-up cancels out.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BODY = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"count_notes"}}'

_CHILD = r"""
import json, sys, time
from strictcall.server.app import build_app
from strictcall.storage import open_store

db, calls, repeats = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
store = open_store(db)
token = store.create_token("bench")
app = build_app(store)
body = BODY
scope = {
    "type": "http", "http_version": "1.1", "method": "POST", "path": "/rpc",
    "headers": [
        (b"host", b"127.0.0.1:8765"), (b"user-agent", b"wrk"),
        (b"content-type", b"application/json"),
        (b"authorization", b"Bearer " + token.encode()),
        (b"content-length", str(len(body)).encode()),
    ],
}
answer = app.answer_now(dict(scope), bytearray(body))
assert answer is not None and answer[0] == 200 and answer[2].endswith(b'"result":0}'), answer
best = None
for _ in range(repeats):
    started = time.perf_counter()
    for _ in range(calls):
        app.answer_now(dict(scope), bytearray(body))
    took = time.perf_counter() - started
    best = took if best is None else min(best, took)
print(json.dumps({"us": (best or 0.0) / max(calls, 1) * 1e6}))
""".replace("BODY", repr(BODY))


def run_child(src: Path, db: Path, calls: int, repeats: int, valgrind: bool) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(src)}
    command = [sys.executable, "-c", _CHILD, str(db), str(calls), str(repeats)]
    if valgrind:
        out = Path(tempfile.mkstemp(prefix="callgrind.")[1])
        command = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *command]
        subprocess.run(command, env=env, check=True, capture_output=True)
        totals = [line for line in out.read_text().splitlines() if line.startswith("totals:")]
        out.unlink()
        return {"instructions": float(totals[0].split()[1])}
    done = subprocess.run(command, env=env, check=True, capture_output=True, text=True)
    return dict(json.loads(done.stdout))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--src", action="append", type=Path)
    parser.add_argument("--instructions", action="store_true", help="count them with valgrind")
    args = parser.parse_args(argv)
    sources: list[Path] = args.src or [ROOT / "src"]
    results: dict[Path, list[float]] = {src: [] for src in sources}
    with tempfile.TemporaryDirectory() as where:
        for round_ in range(args.rounds):
            for index, src in enumerate(sources):
                db = Path(where) / f"r{round_}-{index}.sqlite3"
                if args.instructions:
                    none = run_child(src, db, 0, 1, True)["instructions"]
                    db2 = Path(where) / f"r{round_}-{index}b.sqlite3"
                    some = run_child(src, db2, args.calls, 1, True)["instructions"]
                    results[src].append((some - none) / args.calls)
                else:
                    results[src].append(run_child(src, db, args.calls, 5, False)["us"])
    unit = "instructions/call" if args.instructions else "us/call"
    first = statistics.median(results[sources[0]])
    for src in sources:
        median = statistics.median(results[src])
        print(f"{src}: {median:.2f} {unit} (x{median / first:.3f}) over {results[src]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
