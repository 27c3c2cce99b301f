"""The fuzzing harness: `python reliability/fuzz.py --inputs N` (`make fuzz`, N=20000).

Feeds N inputs (see `reliability.mutate`: valid calls, schema-derived argument mutations,
grammar-aware JSON mutations, random bytes) to each target and checks every answer against the
invariants of `reliability.oracle`:

    handle   strictcall.handle(), the seed's read_note over its two demo notes, as u1 and u2
    gateway  a Gateway with the notes tools on a temporary SQLite store
    http     POST /rpc of a real `strictcall serve` on 127.0.0.1 (httpx, a connection pool,
             one worker per pooled connection, each its own identity and valid token; a few
             inputs with a bad token)
    mcp      a real `strictcall serve --mcp-stdio` process after the MCP handshake, one line at
             a time, each followed by a ping to tell "no answer" from "not yet"
    mcp-http POST /mcp of a real `strictcall serve` (MCP streamable HTTP, stateless)

Another owner ("victim") holds notes with distinctive texts; no answer may hold one of those
texts or ids, and an input naming one of its notes gets, byte for byte, the answer that the
same input naming a missing note gets (its twin, sent alongside). Afterwards the victim's notes
are checked unchanged, the servers still alive (and exiting 0), their stderr free of tracebacks.

Prints inputs per target, answers by code and every kind of failure with an example; exits 1
on any broken invariant. A run is reproducible from its --seed (the store's own random note ids
aside).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import random
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx

from reliability import mutate, oracle, procs
from reliability.progress import Progress
from strictcall.core.gateway import Gateway, encode_answer
from strictcall.errors import UNAUTHENTICATED
from strictcall.services.demo import NOTES as SEED_NOTES
from strictcall.services.demo import READ_NOTE_INPUT, handle
from strictcall.services.notes import notes_gateway
from strictcall.storage import IdempotencyKey, new_note_id
from strictcall.storage.sqlite import SQLiteStore
from strictcall.transports.jsonrpc import RpcService

TARGETS = ("handle", "gateway", "http", "mcp", "mcp-http")
VICTIM = "victim"
STATEFUL_TOOLS = ("create_note", "list_notes", "count_notes")
HOUSEKEEPING_EVERY = 200
OWN_NOTES = 8
MAX_OWN_NOTES = 100
EXAMPLES_PER_PROBLEM = 3
MCP_EXTRA_WAIT_S = 5.0


@dataclass
class Tally:
    """What one target saw: inputs by family, answers by outcome, failures by kind."""

    target: str
    inputs: int = 0
    twins: int = 0
    seconds: float = 0.0
    families: Counter[str] = field(default_factory=Counter)
    outcomes: Counter[str] = field(default_factory=Counter)
    failures: Counter[str] = field(default_factory=Counter)
    examples: list[dict[str, str]] = field(default_factory=list)

    def record(
        self,
        family: str,
        data: bytes | str,
        outcome: str,
        problems: Sequence[str],
        call_id: str | int | None = None,
    ) -> None:
        self.inputs += 1
        if _PROGRESS:
            _PROGRESS[-1].advance()
        self.families[family] += 1
        self.outcomes[outcome] += 1
        self.fail(problems, family, data, call_id)

    def fail(
        self,
        problems: Sequence[str],
        family: str = "-",
        data: bytes | str = b"",
        call_id: str | int | None = None,
    ) -> None:
        for problem in dict.fromkeys(problems):
            self.failures[problem] += 1
            if self.failures[problem] <= EXAMPLES_PER_PROBLEM:
                example = {"problem": problem, "family": family, "input": repr(data[:400])}
                if call_id is not None:
                    example["call_id"] = repr(call_id)
                self.examples.append(example)

    @property
    def failed(self) -> int:
        return sum(self.failures.values())

    def as_dict(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "inputs": self.inputs,
            "twins": self.twins,
            "seconds": round(self.seconds, 1),
            "families": dict(self.families.most_common()),
            "outcomes": dict(self.outcomes.most_common()),
            "failures": dict(self.failures.most_common()),
            "examples": self.examples,
        }


# --- the world: another owner's notes, the fuzzing identities' own ------------------------------


@dataclass
class World:
    """The seeded store: the victim's notes, and pools of note ids per fuzzing identity."""

    db: Path
    secrets: oracle.Secrets
    victim_notes: dict[str, str]
    pools: dict[str, mutate.Pools]


def fresh_note_id() -> str:
    """A note id in the server's own format (its own generator: same length and alphabet, so
    the same parse path) that no note has."""
    return new_note_id()


def build_world(db: Path, identities: Sequence[str], rng: random.Random) -> World:
    """Seed `db`: twelve victim notes with distinctive texts, eight notes per identity."""
    store = SQLiteStore(db)
    try:
        victim: dict[str, str] = {}
        for index in range(12):
            mark = rng.randbytes(6).hex()
            text = rng.choice(
                (
                    f"VICTIM-SECRET-{mark}",
                    f"victim secret 秘密 {mark} 😀",
                    f"the victim's card 4111-{mark}",
                )
            )
            # An empty text is a note too (the first one), though not a text to search for.
            text = text if index else ""
            victim[store.add_note(VICTIM, text).note_id] = text
        pools = {}
        for identity in identities:
            own = [store.add_note(identity, f"own note {i}").note_id for i in range(OWN_NOTES)]
            missing = [fresh_note_id() for _ in range(10)]
            pools[identity] = mutate.Pools(own, list(victim), missing)
    finally:
        store.close()
    secrets = oracle.Secrets(
        texts=tuple(text for text in victim.values() if text),
        ids=tuple(victim),
        twin_of={note_id: fresh_note_id() for note_id in victim},
    )
    return World(db, secrets, victim, pools)


def housekeep(store: SQLiteStore, identity: str, pools: mutate.Pools) -> None:
    """Keep an identity's notes few (list_notes answers stay small) and its pool of own ids
    current: the oldest notes stay, the newest go."""
    notes = store.list_notes(identity)
    if len(notes) > MAX_OWN_NOTES:
        for note in notes[OWN_NOTES:]:
            key = IdempotencyKey(f"housekeeping-{uuid.uuid4()}", "housekeeping")
            store.delete_note(identity, note.note_id, key)
    while len(notes) < 3:
        notes.append(store.add_note(identity, "replenished"))
    pools.own_ids[:] = [note.note_id for note in notes[:OWN_NOTES]]


def victim_problems(db: Path, world: World) -> list[str]:
    """The victim's notes must be exactly as seeded: nothing written or deleted across owners."""
    store = SQLiteStore(db)
    try:
        now = {note.note_id: note.text for note in store.list_notes(VICTIM)}
    finally:
        store.close()
    return [] if now == world.victim_notes else ["another owner's notes changed"]


def twin_eligible(data: bytes | str, secrets: oracle.Secrets) -> bool:
    """An input naming another owner's note that reads no state another call may change."""
    if not secrets.named_in(data):
        return False
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    if any(name.encode() in raw for name in STATEFUL_TOOLS):
        return False
    # An escaped tool name would hide from the byte search: look in the parsed strings too.
    value, problems = oracle.wire_problems(raw)
    return problems != [] or not any(
        name in s for s in oracle.strings_in(value) for name in STATEFUL_TOOLS
    )


def pick_call_id(rng: random.Random, index: int) -> str | int:
    """A call id as transports make them: str or int, int beyond 64 bits included."""
    roll = rng.random()
    if roll < 0.5:
        return f"call-{index}"
    if roll < 0.8:
        return index
    if roll < 0.9:
        return f"调用-{index}-😀"
    if roll < 0.95:
        return -index - 1
    return 2**64 + index


# --- handle() ----------------------------------------------------------------------------------


TWIN_PROBLEM = "twin: another owner's note answered unlike a missing one"


@dataclass(frozen=True)
class Checked:
    """One input's verdict: its outcome, what was wrong, and whether a twin was compared."""

    outcome: str
    problems: list[str]
    twinned: bool = False


def check_handle(raw: str | bytes, identity: str, call_id: str, secrets: oracle.Secrets) -> Checked:
    """handle() on one input: a structured answer of exactly the seed's members, no leak, and
    the twin's answer byte-identical."""
    answer, wire, problems = _handle_answer(raw, identity, call_id, secrets)
    twinned = twin_eligible(raw, secrets)
    if twinned:
        _, twin_wire, _ = _handle_answer(secrets.twin(raw), identity, call_id, secrets)
        if secrets.untwin(twin_wire) != wire:
            problems.append(TWIN_PROBLEM)
    return Checked(oracle.outcome_of(answer), problems, twinned)


def _handle_answer(
    raw: str | bytes, identity: str, call_id: str, secrets: oracle.Secrets
) -> tuple[Any, bytes, list[str]]:
    try:
        answer = handle(raw, identity, call_id)
    except Exception as exc:
        return None, b"", [f"handle raised {type(exc).__name__}"]
    problems = oracle.answer_problems(answer, call_id, exact=True)
    wire = encode_answer(answer)
    value, wire_problems = oracle.wire_problems(wire)
    return answer, wire, problems + wire_problems + oracle.leak_problems(wire, value, secrets)


def handle_sides(rng: random.Random) -> dict[str, tuple[mutate.Generator, oracle.Secrets]]:
    """For u1 and u2 of the seed: a generator of read_note inputs and the other one's note."""
    schemas = {"read_note": READ_NOTE_INPUT}
    sides = {}
    for me, other, missing in (("u1", "u2", "n7"), ("u2", "u1", "n8")):
        ((other_id, other_text),) = SEED_NOTES[other].items()
        ((own_id, _),) = SEED_NOTES[me].items()
        secrets = oracle.Secrets((other_text,), (other_id,), {other_id: missing})
        pools = mutate.Pools([own_id], [other_id], ["n0", "n3", "nx", "N1"])
        sides[me] = (mutate.Generator(rng, schemas, pools), secrets)
    return sides


def run_handle(inputs: int, seed: int) -> Tally:
    """strictcall.handle as u1 and u2 (the seed's read_note, its two demo notes)."""
    tally = Tally("handle")
    rng = random.Random(seed)
    started = time.monotonic()
    sides = handle_sides(rng)
    for index in range(inputs):
        identity = "u1" if index % 2 == 0 else "u2"
        generator, secrets = sides[identity]
        inp = generator.gateway_input()
        raw: str | bytes = inp.data
        if rng.random() < 0.25:
            raw = inp.data.decode("utf-8", "surrogateescape")
        checked = check_handle(raw, identity, f"call-{index}", secrets)
        tally.record(inp.family, raw, checked.outcome, checked.problems)
        tally.twins += checked.twinned
    tally.seconds = time.monotonic() - started
    return tally


# --- the gateway -------------------------------------------------------------------------------


def tool_schemas(gateway: Gateway) -> dict[str, Any]:
    """Each tool's input schema, as the gateway enforces and lists it."""
    return {tool["name"]: tool["inputSchema"] for tool in gateway.list_tools("mcp")}


def notes_schemas(workdir: Path) -> dict[str, Any]:
    """The notes tools' input schemas (from a gateway on a scratch store)."""
    store = SQLiteStore(workdir / "schemas.sqlite3")
    try:
        with notes_gateway(store) as gateway:
            return tool_schemas(gateway)
    finally:
        store.close()


def check_gateway(
    gateway: Gateway, raw: str | bytes, identity: str, call_id: str | int, secrets: oracle.Secrets
) -> Checked:
    """A gateway on one input: a structured answer carrying the call id, no undeclared
    failure, valid UTF-8 JSON when written, no leak, and the twin's answer byte-identical."""
    answer, wire, problems = _gateway_answer(gateway, raw, identity, call_id, secrets)
    twinned = twin_eligible(raw, secrets)
    if twinned:
        twin = secrets.twin(raw)
        _, twin_wire, _ = _gateway_answer(gateway, twin, identity, call_id, secrets)
        if secrets.untwin(twin_wire) != wire:
            problems.append(TWIN_PROBLEM)
    return Checked(oracle.outcome_of(answer), problems, twinned)


def _gateway_answer(
    gateway: Gateway, raw: str | bytes, identity: str, call_id: str | int, secrets: oracle.Secrets
) -> tuple[Any, bytes, list[str]]:
    try:
        answer = gateway.call(raw, identity, call_id)
    except Exception as exc:
        return None, b"", [f"gateway raised {type(exc).__name__}"]
    problems = oracle.answer_problems(answer, call_id)
    wire = encode_answer(answer)
    value, wire_problems = oracle.wire_problems(wire)
    return answer, wire, problems + wire_problems + oracle.leak_problems(wire, value, secrets)


def run_gateway(inputs: int, seed: int, workdir: Path) -> Tally:
    """A Gateway with the notes tools on a SQLite store, as identity "fuzzer"."""
    tally = Tally("gateway")
    rng = random.Random(seed + 1)
    started = time.monotonic()
    identity = "fuzzer"
    db = workdir / "gateway.sqlite3"
    world = build_world(db, [identity], rng)
    store = SQLiteStore(db)
    gateway = notes_gateway(store)
    pools = world.pools[identity]
    generator = mutate.Generator(rng, tool_schemas(gateway), pools)
    try:
        for index in range(inputs):
            if index % HOUSEKEEPING_EVERY == 0:
                housekeep(store, identity, pools)
            inp = generator.gateway_input()
            raw: str | bytes = inp.data
            if rng.random() < 0.25:
                raw = inp.data.decode("utf-8", "surrogateescape")
            call_id = pick_call_id(rng, index)
            checked = check_gateway(gateway, raw, identity, call_id, world.secrets)
            tally.record(inp.family, raw, checked.outcome, checked.problems, call_id)
            tally.twins += checked.twinned
    finally:
        gateway.close()
        store.close()
    tally.fail(victim_problems(db, world))
    tally.seconds = time.monotonic() - started
    return tally


# --- JSON-RPC, in process ----------------------------------------------------------------------


async def check_rpc_service(
    service: RpcService, body: bytes, identity: str, secrets: oracle.Secrets
) -> Checked:
    """strictcall's JSON-RPC service on one body, in process (what POST /rpc answers with a
    valid token, without the HTTP server around it)."""
    status, content, problems = await _service_answer(service, body, identity)
    if problems:
        return Checked("raised", problems)
    replies, problems = oracle.rpc_body_problems(body, status, content)
    value, _ = oracle.wire_problems(content) if content else (None, [])
    problems += oracle.leak_problems(content, value, secrets)
    twinned = twin_eligible(body, secrets)
    if twinned:
        twin_status, twin_content, _ = await _service_answer(service, secrets.twin(body), identity)
        if (twin_status, secrets.untwin(twin_content)) != (status, content):
            problems.append(TWIN_PROBLEM)
    return Checked(_rpc_outcome(status, replies), problems, twinned)


async def _service_answer(
    service: RpcService, body: bytes, identity: str
) -> tuple[int, bytes, list[str]]:
    try:
        reply = await service.answer(body, identity)
    except Exception as exc:
        return 500, b"", [f"the JSON-RPC service raised {type(exc).__name__}"]
    return (204, b"", []) if reply is None else (200, reply, [])


# --- HTTP --------------------------------------------------------------------------------------


def run_http(inputs: int, seed: int, workdir: Path, workers: int = 4) -> Tally:
    """POST /rpc on a real server, `workers` connections at once, each its own identity."""
    tally = Tally("http")
    rng = random.Random(seed + 2)
    started = time.monotonic()
    db = workdir / "http.sqlite3"
    identities = [f"fuzzer-{k}" for k in range(workers)]
    world = build_world(db, identities, rng)
    tokens = {identity: procs.create_token(db, identity) for identity in identities}
    schemas = notes_schemas(workdir)
    server = procs.HttpServer(db, workdir / "http-stderr.log")
    try:
        asyncio.run(_http_run(server, world, tokens, schemas, inputs, rng, tally))
        if not server.alive():
            tally.fail(["the server died"])
        elif httpx.get(server.base_url + "/healthz", timeout=30).status_code != 200:
            tally.fail(["/healthz failed after the run"])
    finally:
        status = server.stop()
    if status != 0:
        tally.fail([f"the server exited {status} on SIGTERM"])
    tally.fail(_traceback_problems(server.stderr_text()))
    tally.fail(victim_problems(db, world))
    tally.seconds = time.monotonic() - started
    return tally


async def _http_run(
    server: procs.HttpServer,
    world: World,
    tokens: dict[str, str],
    schemas: dict[str, Any],
    inputs: int,
    rng: random.Random,
    tally: Tally,
) -> None:
    limits = httpx.Limits(max_connections=len(tokens), max_keepalive_connections=len(tokens))
    store = SQLiteStore(world.db)
    try:
        async with httpx.AsyncClient(
            base_url=server.base_url, limits=limits, timeout=60.0
        ) as client:
            shares = [
                inputs // len(tokens) + (k < inputs % len(tokens)) for k in range(len(tokens))
            ]
            await asyncio.gather(
                *(
                    _http_worker(
                        k,
                        client,
                        store,
                        world,
                        identity,
                        token,
                        schemas,
                        share,
                        random.Random(rng.random()),
                        tally,
                    )
                    for k, ((identity, token), share) in enumerate(
                        zip(tokens.items(), shares, strict=True)
                    )
                )
            )
    finally:
        store.close()


def _bad_authorization(rng: random.Random, token: str) -> str | None:
    flipped = token[:-1] + ("A" if token[-1] != "A" else "B")
    return rng.choice(
        (
            None,
            "Bearer " + flipped,
            "Bearer " + token + "x",
            "Bearer sc_" + rng.randbytes(32).hex(),
            "Basic dTE6cA==",
            "Bearer",
            token,
        )
    )


async def _http_worker(
    k: int,
    client: httpx.AsyncClient,
    store: SQLiteStore,
    world: World,
    identity: str,
    token: str,
    schemas: dict[str, Any],
    share: int,
    rng: random.Random,
    tally: Tally,
) -> None:
    counter = iter(range(10**9))

    def next_id() -> str | int:
        n = next(counter)
        return f"w{k}-{n}" if n % 2 else k * 10**9 + n

    pools = world.pools[identity]
    generator = mutate.Generator(rng, schemas, pools, rpc_ids=next_id)
    good = {"Content-Type": "application/json", "Authorization": "Bearer " + token}
    for index in range(share):
        if index % HOUSEKEEPING_EVERY == 0:
            housekeep(store, identity, pools)
        inp = generator.rpc_input()
        if rng.random() < 0.03:
            authorization = _bad_authorization(rng, token)
            headers = {"Content-Type": "application/json"}
            if authorization is not None:
                headers["Authorization"] = authorization
            status, content, problems = await _post(client, inp.data, headers)
            if not problems:
                problems = _refused_problems(status, content, world.secrets)
            tally.record("bad-token", inp.data, f"HTTP {status}", problems)
            continue
        status, content, problems = await _post(client, inp.data, good)
        outcome = f"HTTP {status}"
        if not problems:
            replies, problems = oracle.rpc_body_problems(inp.data, status, content)
            value, _ = oracle.wire_problems(content) if content else (None, [])
            problems += oracle.leak_problems(content, value, world.secrets)
            outcome = _rpc_outcome(status, replies)
        tally.record(inp.family, inp.data, outcome, problems)
        if twin_eligible(inp.data, world.secrets):
            tally.twins += 1
            twin_status, twin_content, _ = await _post(client, world.secrets.twin(inp.data), good)
            if (twin_status, world.secrets.untwin(twin_content)) != (status, content):
                tally.fail([TWIN_PROBLEM], "twin", inp.data)


async def _post(
    client: httpx.AsyncClient, body: bytes, headers: dict[str, str]
) -> tuple[int, bytes, list[str]]:
    try:
        response = await client.post("/rpc", content=body, headers=headers)
    except httpx.HTTPError as exc:
        return 0, b"", [f"transport error: {type(exc).__name__}"]
    return response.status_code, response.content, []


def _refused_problems(status: int, content: bytes, secrets: oracle.Secrets) -> list[str]:
    if status != 401:
        return [f"bad token: HTTP {status}, expected 401"]
    value, problems = oracle.wire_problems(content)
    if problems:
        return problems
    problems = oracle.reply_problems(value)
    if not problems and (
        value["id"] is not None or value["error"]["data"]["code"] != UNAUTHENTICATED.code
    ):
        problems = ["bad token: not an unauthenticated error with id null"]
    return problems + oracle.leak_problems(content, value, secrets)


def _rpc_outcome(status: int, replies: list[Any]) -> str:
    if status != 200 or not replies:
        return f"HTTP {status}"
    if len(replies) > 1:
        return "batch"
    reply = replies[0]
    if type(reply) is dict and type(reply.get("error")) is dict:
        data = reply["error"].get("data")
        return str(data.get("code")) if type(data) is dict else "error"
    return "ok"


def _traceback_problems(stderr: str) -> list[str]:
    """One problem per distinct exception a server logged (the last line of a traceback)."""
    problems = []
    lines = stderr.splitlines()
    for index, line in enumerate(lines):
        if line.startswith("Traceback"):
            end = index + 1
            while end < len(lines) and (lines[end].startswith(" ") or not lines[end]):
                end += 1
            last = lines[end] if end < len(lines) else "?"
            problems.append(f"the server logged an exception: {last[:120]}")
    return list(dict.fromkeys(problems))


# --- MCP on stdio ------------------------------------------------------------------------------


def mcp_available() -> bool:
    """Whether strictcall has its MCP server (strictcall.transports.mcp and the SDK)."""
    try:
        import strictcall.transports.mcp  # noqa: F401
    except ImportError:
        return False
    return True


def sdk_acceptor() -> Callable[[Any], bool]:
    """Whether the MCP SDK's message model takes a message."""
    import mcp_types
    from pydantic import ValidationError

    def accepts(message: Any) -> bool:
        try:
            mcp_types.jsonrpc_message_adapter.validate_python(message, by_name=False)
        except ValidationError:
            return False
        return True

    return accepts


def run_mcp(inputs: int, seed: int, workdir: Path) -> Tally:
    """A real `strictcall serve --mcp-stdio` process, one line at a time."""
    tally = Tally("mcp")
    rng = random.Random(seed + 3)
    started = time.monotonic()
    identity = "fuzzer-mcp"
    db = workdir / "mcp.sqlite3"
    world = build_world(db, [identity], rng)
    schemas = notes_schemas(workdir)
    accepts = sdk_acceptor()
    counter = iter(range(10**9))

    def next_id() -> str | int:
        n = next(counter)
        return f"m-{n}" if n % 2 else n

    pools = world.pools[identity]
    generator = mutate.Generator(rng, schemas, pools, rpc_ids=next_id)
    server = procs.McpStdioServer(db, identity, workdir / "mcp-stderr.log")
    store = SQLiteStore(db)
    status = None
    try:
        server.initialize()
        for index in range(inputs):
            if index % HOUSEKEEPING_EVERY == 0:
                housekeep(store, identity, pools)
            inp = generator.rpc_input(batches=False)
            line = inp.data.replace(b"\n", b"\r")
            answers, problems = _mcp_exchange(server, line, f"probe-{index}", accepts)
            problems += [
                p
                for wire, value in answers
                for p in oracle.leak_problems(wire, value, world.secrets)
            ]
            tally.record(inp.family, line, _mcp_outcome(answers), problems)
            if not server.alive():
                tally.fail(["the MCP server died"], inp.family, line)
                break
            if twin_eligible(line, world.secrets):
                tally.twins += 1
                twin = world.secrets.twin(line)
                twin_answers, _ = _mcp_exchange(server, twin, f"probe-{index}-twin", accepts)
                if [world.secrets.untwin(w) for w, _ in twin_answers] != [w for w, _ in answers]:
                    tally.fail([TWIN_PROBLEM], "twin", line)
        if server.alive():
            final = server.request("tools/call", {"name": "count_notes", "arguments": {}})
            if final.get("result", {}).get("isError") is not False:
                tally.fail(["the MCP server stopped serving"])
    except (TimeoutError, RuntimeError) as exc:
        tally.fail([f"the MCP server stopped answering: {exc}"])
    finally:
        store.close()
        status = server.close()
    if status != 0:
        tally.fail([f"the MCP server exited {status} when its stdin closed"])
    tally.fail(_traceback_problems((workdir / "mcp-stderr.log").read_text("utf-8", "replace")))
    tally.fail(victim_problems(db, world))
    tally.seconds = time.monotonic() - started
    return tally


def _mcp_exchange(
    server: procs.McpStdioServer, line: bytes, probe: str, accepts: Callable[[Any], bool]
) -> tuple[list[tuple[bytes, Any]], list[str]]:
    """Send `line` then a ping; collect the answers to `line` (those before the ping's, and the
    one expected if it comes after)."""
    expected = oracle.mcp_expectation(line, accepts)
    server.send(line)
    server.send(b'{"jsonrpc":"2.0","id":"' + probe.encode() + b'","method":"ping"}')
    answers: list[tuple[bytes, Any]] = []
    problems: list[str] = []
    deadline = time.monotonic() + procs.REPLY_DEADLINE_S
    probe_seen = False
    while not (probe_seen and len(answers) >= expected.answers):
        try:
            out = server.next_line(deadline)
        except TimeoutError:
            problems.append("MCP: no answer before the deadline")
            break
        if out is None:
            problems.append("MCP: stdout closed")
            break
        wire = out.rstrip(b"\n")
        value, wire_problems = oracle.wire_problems(wire)
        if wire_problems:
            problems += wire_problems
            continue
        if type(value) is dict and value.get("id") == probe:
            probe_seen = True
            deadline = min(deadline, time.monotonic() + MCP_EXTRA_WAIT_S)
            continue
        answers.append((wire, value))
    if len(answers) != expected.answers:
        problems.append(f"MCP: {len(answers)} answers to a line that must get {expected.answers}")
    for _, value in answers:
        problems += oracle.mcp_reply_problems(value)
        if expected.answers == 1 and not oracle.same_id(
            value.get("id") if type(value) is dict else ..., expected.request_id
        ):
            problems.append("MCP: the answer's id is not the request's")
    return answers, problems


def run_mcp_http(inputs: int, seed: int, workdir: Path) -> Tally:
    """MCP over streamable HTTP (POST /mcp of a real `strictcall serve`, stateless, JSON
    answers): one JSON-RPC answer per request, 202 and no body for a notification or a
    response, never a 5xx, every body strict JSON and UTF-8, no leak."""
    tally = Tally("mcp-http")
    rng = random.Random(seed + 4)
    started = time.monotonic()
    identity = "fuzzer-mcp-http"
    db = workdir / "mcp-http.sqlite3"
    world = build_world(db, [identity], rng)
    token = procs.create_token(db, identity)
    accepts = sdk_acceptor()
    counter = iter(range(10**9))

    def next_id() -> str | int:
        n = next(counter)
        return f"h-{n}" if n % 2 else n

    pools = world.pools[identity]
    generator = mutate.Generator(rng, notes_schemas(workdir), pools, rpc_ids=next_id)
    headers = {
        "Authorization": "Bearer " + token,
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": procs.MCP_PROTOCOL_VERSION,
    }
    server = procs.HttpServer(db, workdir / "mcp-http-stderr.log")
    store = SQLiteStore(db)
    try:
        with httpx.Client(base_url=server.base_url, headers=headers, timeout=60.0) as client:
            for index in range(inputs):
                if index % HOUSEKEEPING_EVERY == 0:
                    housekeep(store, identity, pools)
                inp = generator.rpc_input(batches=False)
                status, content, problems = _mcp_post(client, inp.data, accepts, world.secrets)
                value = oracle.wire_problems(content)[0] if content else None
                outcome = _mcp_outcome([(content, value)]) if value is not None else "no answer"
                tally.record(inp.family, inp.data, f"HTTP {status} {outcome}", problems)
                if twin_eligible(inp.data, world.secrets):
                    tally.twins += 1
                    twin_status, twin_content, _ = _mcp_post(
                        client, world.secrets.twin(inp.data), accepts, world.secrets
                    )
                    if (twin_status, world.secrets.untwin(twin_content)) != (status, content):
                        tally.fail([TWIN_PROBLEM], "twin", inp.data)
        if not server.alive():
            tally.fail(["the server died"])
    finally:
        store.close()
        status = server.stop()
    if status != 0:
        tally.fail([f"the server exited {status} on SIGTERM"])
    tally.fail(_traceback_problems(server.stderr_text()))
    tally.fail(victim_problems(db, world))
    tally.seconds = time.monotonic() - started
    return tally


def _mcp_post(
    client: httpx.Client, body: bytes, accepts: Callable[[Any], bool], secrets: oracle.Secrets
) -> tuple[int, bytes, list[str]]:
    """POST /mcp with one message, and what is wrong with the answer."""
    try:
        response = client.post("/mcp", content=body)
    except httpx.HTTPError as exc:
        return 0, b"", [f"transport error: {type(exc).__name__}"]
    status, content = response.status_code, response.content
    if status >= 500:
        return status, content, [f"HTTP {status}"]
    expected = oracle.mcp_expectation(body, accepts)
    if not body.strip(b" \t\r"):  # a blank line is no message on stdio; a blank body is one
        expected = oracle.McpExpectation(1, None)
    if expected.answers == 0:
        if status != 202 or content:
            return status, content, [f"nothing to answer, got HTTP {status}"]
        return status, content, []
    value, problems = oracle.wire_problems(content)
    if problems:
        return status, content, problems
    problems = oracle.mcp_reply_problems(value) + oracle.leak_problems(content, value, secrets)
    if not oracle.same_id(value.get("id") if type(value) is dict else ..., expected.request_id):
        problems.append("MCP: the answer's id is not the request's")
    return status, content, problems


def _mcp_outcome(answers: list[tuple[bytes, Any]]) -> str:
    if not answers:
        return "no answer"
    value = answers[0][1]
    if type(value) is not dict:
        return "?"
    if type(value.get("error")) is dict:
        data = value["error"].get("data")
        return str(data.get("code")) if type(data) is dict else f"sdk {value['error'].get('code')}"
    result = value.get("result")
    if type(result) is dict and result.get("isError") is True:
        blocks = result.get("content")
        try:
            error = json.loads(blocks[0]["text"]) if type(blocks) is list and blocks else None
        except (KeyError, TypeError, ValueError):
            error = None
        return str(error.get("code")) if type(error) is dict else "tool error"
    return "ok"


# --- the command -------------------------------------------------------------------------------


class _CountingHandler(logging.Handler):
    """Counts the in-process tools' failure logs instead of printing them."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        self.count += 1


def run(
    targets: Sequence[str],
    inputs: int,
    seed: int,
    workdir: Path,
    workers: int,
    *,
    quiet: bool = False,
) -> list[Tally]:
    """Fuzz each target with `inputs` inputs (`quiet`: no lines printed, no progress shown,
    as in a shard of a parallel run, which prints its own)."""
    tallies: list[Tally] = []
    logger = logging.getLogger("strictcall")
    handler = _CountingHandler()
    logger.addHandler(handler)
    propagate, logger.propagate = logger.propagate, False
    for target in targets:
        if quiet:
            _run_target(target, inputs, seed, workdir, workers, tallies)
        else:
            with Progress(f"fuzz: {target}", total=inputs, unit="inputs") as progress:
                _PROGRESS.append(progress)
                try:
                    _run_target(target, inputs, seed, workdir, workers, tallies)
                finally:
                    _PROGRESS.pop()
        if tallies and tallies[-1].target == target and not quiet:
            print(summary_line(tallies[-1]), flush=True)
    logger.removeHandler(handler)
    logger.propagate = propagate
    if handler.count and not quiet:
        print(f"(the in-process tools logged {handler.count} failures, not shown)")
    return tallies


_PROGRESS: list[Progress] = []
"""The running target's progress, advanced by each input its tally records."""


def _run_target(
    target: str, inputs: int, seed: int, workdir: Path, workers: int, tallies: list[Tally]
) -> None:
    """Fuzz one target, its tally appended to `tallies` (none when it is not available)."""
    if target == "handle":
        tallies.append(run_handle(inputs, seed))
    elif target == "gateway":
        tallies.append(run_gateway(inputs, seed, workdir))
    elif target == "http":
        tallies.append(run_http(inputs, seed, workdir, workers))
    elif target in ("mcp", "mcp-http"):
        if not mcp_available():
            print(f"{target}: strictcall.transports.mcp is not available; the target was skipped")
        elif target == "mcp":
            tallies.append(run_mcp(inputs, seed, workdir))
        else:
            tallies.append(run_mcp_http(inputs, seed, workdir))


def summary_line(tally: Tally) -> str:
    return (
        f"{tally.target:8} {tally.inputs:>8} inputs  {tally.twins:>6} twins  "
        f"{tally.failed:>5} invariant failures  {tally.seconds:7.1f} s"
    )


def print_summary(tallies: Sequence[Tally]) -> None:
    print("\n== fuzz summary ==")
    for tally in tallies:
        print(summary_line(tally))
        print("   families: " + ", ".join(f"{k} {v}" for k, v in tally.families.most_common()))
        print("   answers:  " + ", ".join(f"{k} {v}" for k, v in tally.outcomes.most_common()))
        for problem, count in tally.failures.most_common():
            print(f"   FAILURE x{count}: {problem}")
        for example in tally.examples:
            where = f" call_id={example['call_id']}" if "call_id" in example else ""
            print(
                f"     e.g. [{example['family']}]{where} {example['problem']}: {example['input']}"
            )
    total = sum(t.failed for t in tallies)
    print(f"total: {sum(t.inputs for t in tallies)} inputs, {total} invariant failures")


# --- a long run: shards across processes, progress, and a state file to resume from ------------

SHARD_INPUTS = 20_000
"""Inputs per shard of a parallel run: one shard is one target's run on its own seed."""


@dataclass(frozen=True)
class Shard:
    """One piece of a long run: `inputs` inputs of `target` from seed `seed`."""

    target: str
    index: int
    inputs: int
    seed: int

    @property
    def key(self) -> str:
        return f"{self.target}/{self.index}"


def plan_shards(
    targets: Sequence[str], total: int, seed: int, shard_inputs: int = SHARD_INPUTS
) -> list[Shard]:
    """`total` inputs split evenly across `targets`, each target's share cut into shards of
    at most `shard_inputs`, each on a seed of its own (derived from the run's seed)."""
    shards = []
    for position, target in enumerate(targets):
        share = total // len(targets) + (1 if position < total % len(targets) else 0)
        index = 0
        while share > 0:
            inputs = min(shard_inputs, share)
            shards.append(
                Shard(target, index, inputs, seed * 1_000_003 + position * 10_007 + index)
            )
            share -= inputs
            index += 1
    # alternate targets, so the servers' shards and the in-process ones share the cores
    return sorted(shards, key=lambda shard: (shard.index, targets.index(shard.target)))


def run_shard(shard: Shard, workers: int) -> dict[str, Any]:
    """One shard in a fresh temporary directory, its tally as a dict (run in a worker process)."""
    with tempfile.TemporaryDirectory(prefix="strictcall-fuzz-") as tmp:
        tallies = run([shard.target], shard.inputs, shard.seed, Path(tmp), workers, quiet=True)
    if not tallies:
        return Tally(shard.target).as_dict()
    return tallies[0].as_dict()


def merge(tallies: Sequence[dict[str, Any]], target: str) -> Tally:
    """One target's tally from its shards' dicts."""
    merged = Tally(target)
    for one in tallies:
        merged.inputs += one["inputs"]
        merged.twins += one["twins"]
        merged.seconds += one["seconds"]
        merged.families.update(one["families"])
        merged.outcomes.update(one["outcomes"])
        merged.failures.update(one["failures"])
        for example in one["examples"]:
            seen = sum(1 for e in merged.examples if e["problem"] == example["problem"])
            if seen < EXAMPLES_PER_PROBLEM:
                merged.examples.append(example)
    return merged


def run_parallel(
    targets: Sequence[str],
    total: int,
    seed: int,
    processes: int,
    workers: int,
    state_path: Path,
    shard_inputs: int = SHARD_INPUTS,
) -> list[Tally]:
    """`total` inputs across `targets` in shards over `processes` processes, a progress line
    per shard, each finished shard written to `state_path` at once, so that a run stopped
    half-way continues where it stopped when started again with the same arguments."""
    import multiprocessing

    shards = plan_shards(targets, total, seed, shard_inputs)
    plan = {"targets": list(targets), "total": total, "seed": seed, "shard_inputs": shard_inputs}
    done: dict[str, dict[str, Any]] = {}
    if state_path.exists():
        state = json.loads(state_path.read_text("utf-8"))
        if state.get("plan") == plan:
            done = state.get("done", {})
            print(f"resuming from {state_path}: {len(done)} of {len(shards)} shards done")
        else:
            print(f"{state_path} is of another run's plan: starting afresh")
    todo = [shard for shard in shards if shard.key not in done]
    started = time.monotonic()
    finished_inputs = 0
    todo_inputs = sum(shard.inputs for shard in todo)

    def save() -> None:
        partial = state_path.with_name(state_path.name + ".partial")
        partial.write_text(json.dumps({"plan": plan, "done": done}, ensure_ascii=False), "utf-8")
        partial.replace(state_path)  # never a half-written state file

    context = multiprocessing.get_context("spawn")
    with context.Pool(processes, maxtasksperchild=1) as pool:
        pending = {shard.key: pool.apply_async(run_shard, (shard, workers)) for shard in todo}
        for shard in todo:
            result = pending[shard.key].get()
            done[shard.key] = result
            save()
            finished_inputs += shard.inputs
            elapsed = time.monotonic() - started
            rate = finished_inputs / elapsed if elapsed > 0 else 0.0
            left = (todo_inputs - finished_inputs) / rate if rate > 0 else 0.0
            failed = sum(result["failures"].values())
            print(
                f"[{len(done)}/{len(shards)}] {shard.key}: {shard.inputs} inputs, "
                f"{failed} failures; {finished_inputs}/{todo_inputs} this session, "
                f"{rate:,.0f} inputs/s, about {left / 60:.1f} min left",
                flush=True,
            )
    return [
        merge([done[s.key] for s in shards if s.target == target], target) for target in targets
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--inputs", type=int, default=20_000, help="inputs per target")
    parser.add_argument(
        "--total",
        type=int,
        help="inputs in all, split across the targets and run in shards in parallel "
        "(--processes), with progress and a state file to resume from (--state)",
    )
    parser.add_argument("--processes", type=int, default=os.cpu_count() or 1)
    parser.add_argument(
        "--state",
        type=Path,
        default=Path(".fuzz-state.json"),
        help="a --total run's state file (default .fuzz-state.json); removed when it completes",
    )
    parser.add_argument("--seed", type=int, default=7, help="the run's seed (default 7)")
    parser.add_argument(
        "--targets", default=",".join(TARGETS), help="comma-separated: " + ",".join(TARGETS)
    )
    parser.add_argument("--workers", type=int, default=4, help="HTTP connections (default 4)")
    parser.add_argument("--json", type=Path, help="also write the summary as JSON here")
    args = parser.parse_args(argv)
    targets = [t for t in args.targets.split(",") if t]
    unknown = set(targets) - set(TARGETS)
    bad = args.inputs < 0 or args.workers < 1 or args.processes < 1
    if unknown or bad or (args.total is not None and args.total < 0) or not targets:
        parser.error(f"unknown targets {sorted(unknown)}" if unknown else "bad arguments")
    began = time.monotonic()
    if args.total is not None:
        print(
            f"fuzzing {','.join(targets)} with {args.total} inputs in all, seed {args.seed}, "
            f"{args.processes} processes"
        )
        tallies = run_parallel(
            targets, args.total, args.seed, args.processes, args.workers, args.state
        )
    else:
        print(f"fuzzing {','.join(targets)} with {args.inputs} inputs each, seed {args.seed}")
        with tempfile.TemporaryDirectory(prefix="strictcall-fuzz-") as tmp:
            tallies = run(targets, args.inputs, args.seed, Path(tmp), args.workers)
    print_summary(tallies)
    print(f"wall time: {time.monotonic() - began:.0f} s")
    if args.json is not None:
        report = {
            "seed": args.seed,
            "inputs": args.inputs if args.total is None else args.total,
            "per_target": args.total is None,
            "wall_s": round(time.monotonic() - began),
            "targets": [t.as_dict() for t in tallies],
        }
        args.json.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    if args.total is not None and args.state.exists():
        args.state.unlink()  # complete: the next run starts afresh
    return 1 if any(t.failed for t in tallies) else 0


if __name__ == "__main__":
    sys.exit(main())
