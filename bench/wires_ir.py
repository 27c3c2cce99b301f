"""Instructions per call on each wire, counted by valgrind's callgrind: a machine's noise does
not move them.

    python bench/wires_ir.py [--calls N] [--bfcl-every K] [--only WIRE ...] [--keep DIR]

The same in-process calls as bench/profile_wires.py (a read_note tools/call over ASGI, in one
app: /rpc, /mcp 2025-11-25, /mcp 2026-07-28, each offered to `answer_now` first as the
server's protocol does, and the app run when it declines) and as bench/bfcl.py (the BFCL
corpus's accepted and refused calls through `Gateway.call_text`, every K-th function's: the
whole corpus takes half an hour to compile under valgrind). Each group runs in a child under
`valgrind --tool=callgrind --dump-before=binascii_crc_hqx`: each wire is warmed, then its calls
run between two calls of `binascii.crc_hqx` (a C function nothing else on these paths calls),
so that each dump holds one phase's calls and nothing else. The /rpc and /mcp wires run 4
interleaved rounds of `--calls` calls; a wire's figure is its round with the fewest
instructions per call (a round where the token cache's entry expired by the clock, which
valgrind slows 50-fold, pays a lookup the others do not). Only the main thread is counted: the
answer's own path, the audit hand-off included (the writer runs on the loop, which these calls
never yield to). The report is instructions (Ir) per call per wire, each /mcp wire's ratio to
/rpc, and BFCL's refused over accepted; one JSON document on stdout. Needs valgrind (Debian's
`valgrind`). `--keep`: the dumps, for `callgrind_annotate`.
"""

from __future__ import annotations

import argparse
import asyncio
import binascii
import gc
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

MARK = "binascii_crc_hqx"
HTTP_WIRES = ("rpc", "mcp 2025-11-25", "mcp 2026-07-28")
BFCL_WIRES = ("bfcl accepted", "bfcl refused")
ALL = HTTP_WIRES + BFCL_WIRES
ROUNDS = 4
"""Rounds of `--calls` calls per /rpc and /mcp wire."""


_KEPT: list[object] = []
PHASES: list[str] = []
"""The marks' names, in the order of the dumps they close."""


def mark(phase: str) -> None:
    """A dump of what ran since the last mark (callgrind's --dump-before)."""
    binascii.crc_hqx(b"", 0)
    PHASES.append(phase)


async def http_phases(calls: int, wanted: list[str]) -> list[tuple[str, int]]:
    """The /rpc and /mcp wires' calls, each between two marks; (wire, calls) in order."""
    from profile_wires import mcp_body, rpc_body, started, wire

    from strictcall.server.app import build_app
    from strictcall.storage.sqlite import SQLiteStore

    done: list[tuple[str, int]] = []
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteStore(str(Path(tmp) / "notes.sqlite3"))
        token = store.create_token("u1")
        note = store.add_note("u1", "The refund window is 7 days.").note_id
        app = build_app(store, observe=False)
        # never left: the child exits once counted (a shutdown under valgrind's one thread at
        # a time waits on the audit writer's thread for minutes); the function that would leave
        # it is kept, since it holds the lifespan's task (a task nothing holds is collected)
        _KEPT.append(await started(app))
        legacy = [(b"accept", b"application/json, text/event-stream")]
        modern = [
            *legacy,
            (b"mcp-protocol-version", b"2026-07-28"),
            (b"mcp-method", b"tools/call"),
            (b"mcp-name", b"read_note"),
        ]
        wires: dict[str, Callable[[], Awaitable[tuple[int, bytes]]]] = {
            "rpc": wire(app, "/rpc", token, rpc_body(note), [], in_place=True),
            "mcp 2025-11-25": wire(
                app, "/mcp", token, mcp_body("2025-11-25", note), legacy, in_place=True
            ),
            "mcp 2026-07-28": wire(
                app, "/mcp", token, mcp_body("2026-07-28", note), modern, in_place=True
            ),
        }
        for name in wanted:
            one = wires[name]
            status, body = await one()
            assert status == 200 and b"refund window" in body, (name, status, body[:300])
            for _ in range(50):  # warm: caches, verdicts kept
                await one()
        # rounds interleaved, each wire's fewest instructions per call over them: a round
        # where the token cache's entry expired (by the clock, which valgrind slows) pays
        # a lookup the others do not
        for round_ in range(ROUNDS):
            for name in wanted:
                one = wires[name]
                gc.collect()
                mark(f"{name} {round_} start")
                for _ in range(calls):
                    await one()
                mark(f"{name} {round_} end")
                done.append((f"{name} {round_}", calls))
    return done


def bfcl_phases(wanted: list[str], every: int) -> list[tuple[str, int]]:
    """The BFCL corpus's accepted calls, then its refused ones, each between two marks (every
    `every`-th function's: compiling the whole corpus under valgrind takes half an hour)."""
    from bfcl import CALL_ID, IDENTITY, build, check_answers

    gateway, accepted, refused, _facts = build(18, every)
    assert not check_answers(gateway, accepted, refused)
    done: list[tuple[str, int]] = []
    for name, calls in (("bfcl accepted", accepted), ("bfcl refused", refused)):
        if name not in wanted:
            continue
        for raw in calls:  # warm
            gateway.call_text(raw, IDENTITY, CALL_ID)
        gc.collect()
        mark(f"{name} start")
        for raw in calls:
            gateway.call_text(raw, IDENTITY, CALL_ID)
        mark(f"{name} end")
        done.append((name, len(calls)))
    return done


def child(calls: int, wanted: list[str], every: int) -> None:
    done: list[tuple[str, int]] = []
    if any(w in HTTP_WIRES for w in wanted):
        loop = asyncio.new_event_loop()  # never closed: see `http_phases`
        done += loop.run_until_complete(http_phases(calls, [w for w in HTTP_WIRES if w in wanted]))
    if any(w in BFCL_WIRES for w in wanted):
        done += bfcl_phases([w for w in BFCL_WIRES if w in wanted], every)
    print(json.dumps({"done": done, "phases": PHASES}), flush=True)
    os._exit(0)  # no shutdown: threads and the loop are left as they are


def total_ir(dump: Path) -> int:
    """A callgrind dump's total instructions (its `totals:` or `summary:` line)."""
    text = dump.read_text()
    found = re.search(r"^(?:totals|summary): (\d+)", text, re.MULTILINE)
    assert found is not None, dump
    return int(found.group(1))


def counted(calls: int, wanted: list[str], every: int, tmp: Path) -> subprocess.Popen[str]:
    """A child counting `wanted` under callgrind, its dumps in `tmp`."""
    command = [
        "valgrind",
        "--tool=callgrind",
        f"--callgrind-out-file={tmp / 'callgrind.out'}",
        f"--dump-before={MARK}",
        "--separate-threads=yes",
        sys.executable,
        __file__,
        "--child",
        "--calls",
        str(calls),
        "--bfcl-every",
        str(every),
        "--only",
        *wanted,
    ]
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    return subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )


def per_call_ir(child: subprocess.Popen[str], tmp: Path) -> dict[str, list[float]]:
    """Each counted phase's instructions per call on the thread that answers (the main one),
    once `child` is done, by wire (a /rpc or /mcp wire's rounds in order)."""
    stdout, stderr = child.communicate()
    if child.returncode != 0:
        sys.stderr.write(stderr[-4000:])
        raise SystemExit(child.returncode)
    told = json.loads(stdout.strip().splitlines()[-1])
    phases: list[str] = told["phases"]
    # dump k (1-based) holds what ran before the k-th mark (callgrind.out.<k>-01: the main
    # thread's): a phase's calls are the dump its "end" mark closes
    found: dict[str, list[float]] = {}
    for name, count in told["done"]:
        dump = tmp / f"callgrind.out.{phases.index(f'{name} end') + 1}-01"
        wire_name = name if name in BFCL_WIRES else name.rsplit(" ", 1)[0]
        found.setdefault(wire_name, []).append(total_ir(dump) / count)
    return found


def run(calls: int, wanted: list[str], every: int, keep: Path | None = None) -> dict[str, Any]:
    groups = [
        g
        for g in ([w for w in HTTP_WIRES if w in wanted], [w for w in BFCL_WIRES if w in wanted])
        if g
    ]
    with tempfile.TemporaryDirectory() as top:
        dirs = [Path(top) / str(i) for i in range(len(groups))]
        children = []
        for group, tmp in zip(groups, dirs, strict=True):
            tmp.mkdir()
            children.append(counted(calls, group, every, tmp))  # the groups run side by side
        counted_ir: dict[str, list[float]] = {}
        for child_process, tmp in zip(children, dirs, strict=True):
            counted_ir.update(per_call_ir(child_process, tmp))
        if keep is not None:  # the dumps, for callgrind_annotate
            shutil.copytree(top, keep, dirs_exist_ok=True)
    per_call = {name: min(rounds) for name, rounds in counted_ir.items()}
    report: dict[str, Any] = {"calls": calls, "rounds": ROUNDS, "bfcl_every": every}
    for name, rounds in counted_ir.items():
        report[name] = {"ir_per_call": round(min(rounds))}
        if len(rounds) > 1:
            report[name]["rounds_ir_per_call"] = [round(r) for r in rounds]
    floor = per_call.get("rpc")
    if floor:
        for name in HTTP_WIRES:
            if name in per_call:
                report[name]["x_rpc"] = round(per_call[name] / floor, 3)
        report["target_mcp_le_1_15x_rpc"] = all(
            per_call[name] / floor <= 1.15 for name in HTTP_WIRES[1:] if name in per_call
        )
    if all(name in per_call for name in BFCL_WIRES):
        ratio = per_call["bfcl refused"] / per_call["bfcl accepted"]
        report["bfcl_refused_over_accepted"] = round(ratio, 3)
        report["target_refused_le_1_2x_accepted"] = ratio <= 1.2
    return report


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--calls", type=int, default=100, help="calls per round on each /rpc and /mcp wire"
    )
    parser.add_argument("--only", nargs="+", choices=ALL, default=list(ALL))
    parser.add_argument(
        "--bfcl-every", type=int, default=8, help="every K-th BFCL function and its calls"
    )
    parser.add_argument("--keep", type=Path, help="copy callgrind's dumps into this folder")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


if __name__ == "__main__":
    args = parse_args()
    if args.child:
        child(args.calls, args.only, args.bfcl_every)
    else:
        print(json.dumps(run(args.calls, args.only, args.bfcl_every, args.keep), indent=2))
