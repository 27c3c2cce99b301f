"""What `strictcall proxy` adds to a tools/call: the same call to the same upstream MCP server,
through the official client, directly, through a relay that only forwards bytes (the floor of
any second process hop) and through the proxy, timed in the same rounds.

    .venv/bin/python bench/proxy_overhead.py [--calls N] [--rounds R]

Upstreams: @modelcontextprotocol/server-everything's `echo` (node; tests/upstreams, `npm ci`
there first), the tests' FastMCP server's `read_note`, and bench/stdio_payload.py's canned
answers by shape (a short text, 64 KiB of text, a 64 KiB image), so that what is measured
behind them is the proxy. Relays: bench/relay.py (Python and
uvloop, as the proxy moves bytes) and socat when installed. Each round makes N calls on every
way, one at a time, the ways taking turns call by call, each call's answer checked; a figure is
the median over the rounds of each round's median per call, an added cost the median over the
rounds of (the way's median - direct's). The relays' and the proxy's CPU per call is read from
/proc: first over the interleaved rounds, then in blocks of calls back to back, the ways taking
turns block by block, the median of the blocks (the CPU from each thread's schedstat, in ns).
Targets: added cost <= max(10 % of the direct round trip, 50 µs) (issue 19); the proxy's
process's CPU per call back to back <= 150 µs for a text answer and a 64 KiB image (issue 38);
redaction <= 5 % of the proxy's CPU per call on 64 KiB of text, from the proxy run with
`--redact off` beside it, block by block (issue 38).
Writes bench/PROXY.md and prints it.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any, NamedTuple

import anyio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
EVERYTHING_JS = (
    ROOT / "tests/upstreams/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
)
FASTMCP_NOTES = ROOT / "tests/upstreams/fastmcp_notes.py"
PAYLOAD = BENCH / "stdio_payload.py"
TARGET_SHARE = 0.10
TARGET_FLOOR_US = 50.0
BLOCKS = 10
BLOCK_CALLS = 200
"""After the rounds, each way makes BLOCKS blocks of BLOCK_CALLS calls back to back, the ways
taking turns block by block, for its CPU per call back to back (the median of the blocks)."""
PROXY_CPU_TARGET_US = 150
"""Issue 38: the proxy's process's CPU per call back to back, at most, for a text answer and a
64 KiB image answer."""
REDACTION_SHARE_TARGET = 0.05
"""Issue 38: redaction's share of a proxied call's CPU on a 64 KiB text answer, at most."""
SIZE = 64 * 1024


def upstreams() -> list[tuple[str, list[str], str, dict[str, Any], Callable[[Any], bool]]]:
    """(label, command, tool, arguments, check of the result)."""
    found: list[tuple[str, list[str], str, dict[str, Any], Callable[[Any], bool]]] = []
    node = shutil.which("node")
    if node is not None and EVERYTHING_JS.exists():
        found.append(
            (
                "server-everything (node) echo",
                [node, str(EVERYTHING_JS), "stdio"],
                "echo",
                {"message": "hi"},
                lambda r: "Echo: hi" in r.content[0].text,
            )
        )
    else:
        print("skipped server-everything: no node, or no `npm ci` in tests/upstreams")
    found.append(
        (
            "FastMCP 4 (python) read_note",
            [sys.executable, str(FASTMCP_NOTES)],
            "read_note",
            {"note_id": "n1"},
            lambda r: r.structured_content["note_id"] == "n1",
        )
    )
    payload = [sys.executable, str(PAYLOAD)]
    found += [
        (
            "canned (python) short text",
            payload,
            "text",
            {},
            lambda r: r.content[0].text == "Echo: hi",
        ),
        (
            "canned (python) 64 KiB image",
            payload,
            "image_64k",
            {},
            lambda r: r.content[0].type == "image" and len(r.content[0].data) == SIZE,
        ),
        (
            TEXT_64K,
            payload,
            "text_64k",
            {},
            lambda r: r.content[0].type == "text" and len(r.content[0].text) == SIZE,
        ),
    ]
    return found


TEXT_64K = "canned (python) 64 KiB text"
"""The upstream whose answer redaction's share is measured on."""
PROXY_TARGETED = (
    "server-everything (node) echo",
    "FastMCP 4 (python) read_note",
    "canned (python) short text",
    "canned (python) 64 KiB image",
)
"""The upstreams whose proxy CPU issue 38 bounds (text answers and the 64 KiB image)."""


async def timed_calls(
    session: ClientSession,
    tool: str,
    arguments: dict[str, Any],
    check: Callable[[Any], bool],
    n: int,
) -> list[int]:
    times = []
    for _ in range(n):
        started = time.perf_counter_ns()
        result = await session.call_tool(tool, arguments)
        times.append(time.perf_counter_ns() - started)
        if result.is_error or not check(result):
            raise SystemExit(f"WRONG answer from {tool}: {result}")
    return times


class Target(NamedTuple):
    """One way of reaching the upstream: its row's name, how it is started, and the word of
    its command line that finds its process (None: the client talks to the upstream itself)."""

    name: str
    params: StdioServerParameters
    process_word: str | None


FEDERATE = "strictcall federate (one upstream)"
FEDERATE_CPU_TARGET_US = 150
"""Issue 28: the CPU a proxied call adds, at most (the proxy's process, back to back)."""
PROXY = "strictcall proxy"
REDACT_OFF = "strictcall proxy --redact off"
"""The 64 KiB text's way with redaction of results off: redaction's share is measured on it."""
IN_PROCESS = "strictcall's stdio server, the tool in-process"
"""Echo's reference row: what strictcall's checks cost with no upstream (stdio_echo.py)."""


AGAINST = "strictcall proxy, the --against source"
"""With `--against SRC`: the proxy run from another checkout's src/, in the same rounds."""


def targets(command: list[str], tool: str, db: str, against: Path | None = None) -> list[Target]:
    """Direct, through each relay (the floor of a second process hop), through the proxy (and
    the proxy from the `against` source), and for echo strictcall's own stdio server answering
    it in-process."""
    env = dict(os.environ)
    found = [
        Target(
            "direct", StdioServerParameters(command=command[0], args=command[1:], env=env), None
        ),
        Target(
            "relay (Python, uvloop)",
            StdioServerParameters(
                command=sys.executable, args=[str(BENCH / "relay.py"), *command], env=env
            ),
            "relay.py",
        ),
    ]
    socat = shutil.which("socat")
    if socat is not None:
        found.append(
            Target(
                "relay (socat)",
                StdioServerParameters(
                    command=socat, args=["STDIO", f"EXEC:{shlex.join(command)}"], env=env
                ),
                "socat",
            )
        )
    proxy_args = [
        "-m",
        "strictcall",
        "proxy",
        "--upstream-cmd",
        shlex.join(command),
        "--stdio",
        "--identity",
        "bench",
        "--db",
        db,
    ]
    found.append(
        Target(
            PROXY,
            StdioServerParameters(command=sys.executable, args=proxy_args, env=env),
            "strictcall",
        )
    )
    if against is not None:
        found.append(
            Target(
                AGAINST,
                StdioServerParameters(
                    command=sys.executable,
                    args=proxy_args,
                    env={**env, "PYTHONPATH": str(against)},
                ),
                "strictcall",
            )
        )
    if tool == "text_64k":
        found.append(
            Target(
                REDACT_OFF,
                StdioServerParameters(
                    command=sys.executable, args=[*proxy_args, "--redact", "off"], env=env
                ),
                "strictcall",
            )
        )
    # the same upstream as a federation of one (no prefix, pinning on as by default)
    config = Path(db).with_name(f"federation-{tool}.toml")
    config.write_text(
        f'[upstreams.up]\ncommand = {json.dumps(shlex.join(command))}\nprefix = ""\n',
        encoding="utf-8",
    )
    federate_args = ["-m", "strictcall", "federate", "--config", str(config), "--stdio"]
    found.append(
        Target(
            FEDERATE,
            StdioServerParameters(
                command=sys.executable,
                args=[*federate_args, "--identity", "bench", "--db", db],
                env=env,
            ),
            "federate",
        )
    )
    if tool == "echo":
        found.append(
            Target(
                IN_PROCESS,
                StdioServerParameters(
                    command=sys.executable, args=[str(BENCH / "stdio_echo.py"), db], env=env
                ),
                "stdio_echo.py",
            )
        )
    return found


class Measured(NamedTuple):
    """A target's per-round medians (µs per call) and its process's CPU per call (µs), in the
    interleaved rounds and with calls back to back (the median of the blocks, and each
    block's)."""

    rounds_us: list[float]
    cpu_us: float | None
    alone_cpu_us: float | None
    blocks_cpu_us: list[float] | None


async def measure(
    command: list[str],
    tool: str,
    arguments: dict[str, Any],
    check: Callable[[Any], bool],
    calls: int,
    rounds: int,
    db: str,
    against: Path | None = None,
) -> dict[str, Measured]:
    """Every target's calls, the targets taking turns within each round."""
    ways = targets(command, tool, db, against)
    with open(os.devnull, "w") as quiet:
        async with AsyncExitStack() as stack:
            sessions: list[ClientSession] = []
            pids: list[int | None] = []
            for way in ways:
                before = _children()
                read, write = await stack.enter_async_context(stdio_client(way.params, quiet))
                session = await stack.enter_async_context(ClientSession(read, write))
                await session.initialize()
                await session.list_tools()
                await timed_calls(session, tool, arguments, check, 50)  # warm-up
                sessions.append(session)
                word = way.process_word
                pids.append(None if word is None else _child_pid(word, before))
            per_round: list[list[float]] = [[] for _ in ways]
            cpu_before = [_cpu_s(pid) for pid in pids]
            for _ in range(rounds):
                # call by call, the ways in turn: every way meets the same moments of a shared
                # machine, not one way a quiet second and the next a busy one
                times: list[list[int]] = [[] for _ in ways]
                for _ in range(calls):
                    for i, session in enumerate(sessions):
                        times[i] += await timed_calls(session, tool, arguments, check, 1)
                for i, taken in enumerate(times):
                    per_round[i].append(statistics.median(taken) / 1000)
            cpu_after = [_cpu_s(pid) for pid in pids]
            # then calls back to back, block by block, the ways taking turns: the CPU a call
            # costs when calls come one after another (the audit's batches shared by many), not
            # one every few ms, each way meeting the same moments of the machine
            blocks: list[list[float]] = [[] for _ in ways]
            for _ in range(BLOCKS):
                for i, session in enumerate(sessions):
                    start = _cpu_s(pids[i])
                    await timed_calls(session, tool, arguments, check, BLOCK_CALLS)
                    end = _cpu_s(pids[i])
                    if start is not None and end is not None:
                        blocks[i].append((end - start) / BLOCK_CALLS * 1e6)
    measured = {}
    for i, way in enumerate(ways):
        before_s, after_s = cpu_before[i], cpu_after[i]
        cpu_us = None
        if before_s is not None and after_s is not None:
            cpu_us = (after_s - before_s) / (calls * rounds) * 1e6
        mine = blocks[i] or None
        alone_us = None if mine is None else statistics.median(mine)
        measured[way.name] = Measured(per_round[i], cpu_us, alone_us, mine)
    return measured


def _children() -> set[int]:
    """The pids of this process's children now."""
    return {pid for pid, _ in _child_processes()}


def _child_processes() -> list[tuple[int, str]]:
    """This process's children (Linux /proc): pid and command line."""
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            if int(stat[1]) == os.getpid():
                found.append((int(entry.name), (entry / "cmdline").read_text()))
        except (OSError, ValueError, IndexError):
            continue
    return found


def _child_pid(word: str, before: set[int]) -> int | None:
    """The child started since `before` whose command line holds `word`, or None."""
    for pid, cmdline in _child_processes():
        if pid not in before and word in cmdline:
            return pid
    return None


def _cpu_s(pid: int | None) -> float | None:
    """The CPU time `pid`'s threads have used, in seconds (each live thread's schedstat, in
    ns: /proc's utime and stime count clock ticks, 10 ms, too coarse for a block of calls), or
    None."""
    if pid is None:
        return None
    total = 0
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            try:
                total += int((task / "schedstat").read_text().split()[0])
            except (OSError, ValueError, IndexError):
                continue  # a thread that ended meanwhile
    except OSError:
        return None
    return total / 1e9


def rows_of(label: str, measured: dict[str, Measured]) -> list[str]:
    """The table's rows for one upstream: every way, the added cost against direct's."""
    direct = statistics.median(measured["direct"].rounds_us)
    allowed = max(TARGET_SHARE * direct, TARGET_FLOOR_US)
    rows = []
    for name, found in measured.items():
        median = statistics.median(found.rounds_us)
        cpu = "" if found.cpu_us is None else f"{found.cpu_us:.0f}"
        if found.alone_cpu_us is not None:
            cpu += f" / {found.alone_cpu_us:.0f}"
        if name == "direct":
            rows.append(f"| {label} | {name} | {median:.0f} | | | {cpu} | |")
            continue
        if name == IN_PROCESS:  # no upstream: nothing added to anything
            rows.append(f"| {label} | {name} | {median:.0f} | | | {cpu} | reference |")
            continue
        added = added_of(found, measured["direct"])
        verdict = "floor (reference)"
        if name == PROXY:
            verdict = (
                f"added ≤ {allowed:.0f} µs (issue 19): {'pass' if added <= allowed else 'MISS'}"
            )
            if label in PROXY_TARGETED and found.alone_cpu_us is not None:
                met = found.alone_cpu_us <= PROXY_CPU_TARGET_US
                verdict += (
                    f"; CPU ≤ {PROXY_CPU_TARGET_US} µs (issue 38): {'pass' if met else 'MISS'}"
                )
        if name == AGAINST:
            verdict = "the --against source (reference)"
        if name == REDACT_OFF:
            share = redaction_share(measured)
            verdict = "redaction's share: not measured"
            if share is not None:
                met = share <= REDACTION_SHARE_TARGET
                verdict = (
                    f"redaction {100 * share:.1f} % of the proxy's CPU, ≤"
                    f" {100 * REDACTION_SHARE_TARGET:.0f} % (issue 38): {'pass' if met else 'MISS'}"
                )
        if name == FEDERATE and found.alone_cpu_us is not None:
            met = found.alone_cpu_us <= FEDERATE_CPU_TARGET_US
            verdict = f"CPU ≤ {FEDERATE_CPU_TARGET_US} µs (issue 28): {'pass' if met else 'MISS'}"
        rows.append(
            f"| {label} | {name} | {median:.0f} | {added:.0f} | {100 * added / direct:.0f} % "
            f"| {cpu} | {verdict} |"
        )
    return rows


def redaction_share(measured: dict[str, Measured]) -> float | None:
    """Redaction's share of the proxy's CPU per call back to back: the median over the blocks
    of (redact on - redact off) / redact on, the two ways' blocks taken in turn; None where
    the upstream has no `--redact off` way."""
    on, off = measured.get(PROXY), measured.get(REDACT_OFF)
    if on is None or off is None or on.blocks_cpu_us is None or off.blocks_cpu_us is None:
        return None
    return statistics.median(
        (with_ - without) / with_
        for with_, without in zip(on.blocks_cpu_us, off.blocks_cpu_us, strict=True)
    )


def added_of(found: Measured, direct: Measured) -> float:
    """A way's added µs per call: the median over rounds of each round's own difference, so
    that a slow moment of the machine counts once."""
    return statistics.median(
        way - alone for way, alone in zip(found.rounds_us, direct.rounds_us, strict=True)
    )


def verdict_of(label: str, measured: dict[str, Measured]) -> str:
    """The target's verdict for one upstream, with the reason written from the run's figures."""
    direct = measured["direct"]
    allowed = max(TARGET_SHARE * statistics.median(direct.rounds_us), TARGET_FLOOR_US)
    proxy = measured[PROXY]
    added = added_of(proxy, direct)
    verdict = "met" if added <= allowed else "missed"
    text = (
        f"{label}: the proxy added {added:.0f} µs per call against a target of"
        f" {allowed:.0f} µs: {verdict}."
    )
    if label in PROXY_TARGETED and proxy.alone_cpu_us is not None:
        met = "met" if proxy.alone_cpu_us <= PROXY_CPU_TARGET_US else "missed"
        text += (
            f" Its process spent {proxy.alone_cpu_us:.0f} µs of CPU per call back to back"
            f" against issue 38's target of {PROXY_CPU_TARGET_US} µs: {met}."
        )
    share = redaction_share(measured)
    off = measured.get(REDACT_OFF)
    if share is not None and off is not None and off.alone_cpu_us is not None:
        met = "met" if share <= REDACTION_SHARE_TARGET else "missed"
        text += (
            f" With redaction of results off its process spent {off.alone_cpu_us:.0f} µs per"
            f" call: redaction is {100 * share:.1f} % of the proxied call's CPU (the median of"
            f" {BLOCKS} blocks taken in turn) against issue 38's target of"
            f" {100 * REDACTION_SHARE_TARGET:.0f} %: {met}."
        )
    federate = measured.get(FEDERATE)
    if federate is not None and federate.alone_cpu_us is not None:
        met = "met" if federate.alone_cpu_us <= FEDERATE_CPU_TARGET_US else "missed"
        text += (
            f" As a federation of one (pinning on), its process spent"
            f" {federate.alone_cpu_us:.0f} µs of CPU per call back to back against issue 28's"
            f" target of {FEDERATE_CPU_TARGET_US} µs: {met}."
        )
    relay = measured.get("relay (Python, uvloop)")
    if relay is None or relay.alone_cpu_us is None or proxy.alone_cpu_us is None:
        return text
    relay_added = added_of(relay, direct)
    return (
        f"{text} A relay that only forwards the bytes added {relay_added:.0f} µs"
        f" ({relay.alone_cpu_us:.0f} µs of its CPU per call back to back): the second process"
        f" hop alone. The proxy's CPU per call back to back was {proxy.alone_cpu_us:.0f} µs,"
        f" {proxy.alone_cpu_us - relay.alone_cpu_us:.0f} µs more than the relay's: the request"
        " read strictly, the gateway's checks, the upstream's answer read and validated once,"
        " the result checked against its schema, the answer and its audit record written, in"
        " Python." + _in_process_of(measured.get(IN_PROCESS))
    )


def figures_of(label: str, measured: dict[str, Measured]) -> dict[str, Any]:
    """One upstream's figures for bench/proxy-results.json (bench/run.py copies them into
    RESULTS.md): every way's µs per call, added µs and CPU, and both targets judged."""
    direct = measured["direct"]
    allowed = max(TARGET_SHARE * statistics.median(direct.rounds_us), TARGET_FLOOR_US)
    ways: dict[str, dict[str, float | None]] = {}
    for name, found in measured.items():
        ways[name] = {
            "us_per_call": round(statistics.median(found.rounds_us), 1),
            "added_us": None
            if name in ("direct", IN_PROCESS)
            else round(added_of(found, direct), 1),
            "cpu_us_interleaved": None if found.cpu_us is None else round(found.cpu_us, 1),
            "cpu_us_back_to_back": None
            if found.alone_cpu_us is None
            else round(found.alone_cpu_us, 1),
        }
    proxy_added = ways[PROXY]["added_us"]
    proxy_cpu = ways[PROXY]["cpu_us_back_to_back"]
    federate = ways.get(FEDERATE, {}).get("cpu_us_back_to_back")
    share = redaction_share(measured)
    targeted = label in PROXY_TARGETED and proxy_cpu is not None
    return {
        "upstream": label,
        "ways": ways,
        "proxy_added_target_us": round(allowed, 1),
        "proxy_added_met": proxy_added is not None and proxy_added <= allowed,
        "proxy_cpu_target_us": PROXY_CPU_TARGET_US if targeted else None,
        "proxy_cpu_met": None if not targeted else proxy_cpu <= PROXY_CPU_TARGET_US,
        "federate_cpu_target_us": FEDERATE_CPU_TARGET_US,
        "federate_cpu_met": None if federate is None else federate <= FEDERATE_CPU_TARGET_US,
        "redaction_share": None if share is None else round(share, 4),
        "redaction_share_target": None if share is None else REDACTION_SHARE_TARGET,
        "redaction_share_met": None if share is None else share <= REDACTION_SHARE_TARGET,
    }


def _in_process_of(found: Measured | None) -> str:
    if found is None or found.alone_cpu_us is None:
        return ""
    return (
        f" strictcall's own stdio server spends {found.alone_cpu_us:.0f} µs of CPU per call"
        " back to back on the same call answered by an in-process tool (no upstream)."
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument(
        "--json",
        type=Path,
        default=BENCH / "proxy-results.json",
        help="the figures as JSON, which bench/run.py copies into RESULTS.md",
    )
    parser.add_argument(
        "--only", help="measure only the upstreams whose label holds this (no files written)"
    )
    parser.add_argument(
        "--against",
        type=Path,
        help="another checkout's src/: its proxy measured in the same rounds (no files written)",
    )
    args = parser.parse_args()
    started = time.monotonic()
    load_before = " ".join(f"{x:.2f}" for x in os.getloadavg())
    rows: list[str] = []
    verdicts: list[str] = []
    figures: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for label, command, tool, arguments, check in upstreams():
            if args.only is not None and args.only not in label:
                continue
            measured = anyio.run(
                measure,
                command,
                tool,
                arguments,
                check,
                args.calls,
                args.rounds,
                str(Path(tmp) / "audit.sqlite3"),
                args.against,
            )
            rows.extend(rows_of(label, measured))
            verdicts.append(verdict_of(label, measured))
            figures.append(figures_of(label, measured))
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    ).stdout.strip()
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    text = "\n".join(
        [
            "# What `strictcall proxy` adds to a call",
            "",
            f"Latest run: {now}, strictcall at {commit}; {time.monotonic() - started:.0f} s;"
            f" load average at the start {load_before}, at the end {load} (2 cores, shared)."
            " Written by `bench/proxy_overhead.py`; do not edit by hand.",
            "",
            f"One tools/call at a time through the official MCP client (`ClientSession.call_tool`"
            f" over stdio), {args.calls} calls per round, {args.rounds} rounds, the ways taking"
            " turns call by call; a figure is the median of the rounds' medians, in µs per"
            " call, and an added cost the median over rounds of (that way's median - direct's"
            " median). Direct: the client talks to the upstream. Relay: a second process that"
            " forwards the bytes both ways and reads nothing of them (`bench/relay.py`, written"
            " as the proxy moves bytes; socat, the same in C): the floor of any extra hop on"
            " this machine. Proxy: `strictcall proxy --stdio` (a second process hop, the"
            " upstream's session, the gateway's checks and the audit record). For echo,"
            " strictcall's own stdio server with the same tool in-process (`bench/stdio_echo.py`):"
            " what strictcall's checks cost with no upstream. CPU: the CPU time"
            " the relay's or the proxy's process used per call (user + system, from /proc),"
            " which a busy machine inflates less than the wall-clock figures: first in the"
            " interleaved rounds (one call every few ms: caches cold, the audit's batch of a"
            f" few records per transaction), then back to back, the median of {BLOCKS} blocks"
            f" of {BLOCK_CALLS} calls, the ways taking turns block by block (each thread's"
            " schedstat, in ns). The canned upstream (`bench/stdio_payload.py`) answers from"
            " lines written at its start, so that what is measured behind it is the proxy;"
            " on its 64 KiB text the proxy runs beside itself with `--redact off`, and"
            " redaction's share is the median over the blocks of (on - off) / on.",
            "",
            "| upstream and tool | way | µs per call | added µs | added / direct"
            " | its process's CPU µs/call (interleaved / back to back) | target |",
            "|---|---|---:|---:|---:|---:|---|",
            *rows,
            "",
            *(f"{verdict}\n" for verdict in verdicts),
        ]
    )
    if args.only is not None or args.against is not None:
        print(text)
        return
    (BENCH / "PROXY.md").write_text(text, encoding="utf-8")
    report = {
        "at": now,
        "commit": commit,
        "calls": args.calls,
        "rounds": args.rounds,
        "load_average": [load_before, load],
        "upstreams": figures,
    }
    args.json.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
