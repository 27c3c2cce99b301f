"""Hypothesis properties over hostile input, in process and bounded: handle(), a gateway with the
notes tools on a real SQLite file, and the JSON-RPC service behind POST /rpc.

Inputs come from the fuzzing harness's own generator (reliability/mutate.py: valid calls,
schema-derived argument mutations, grammar-aware JSON mutations, random bytes), driven by a
Hypothesis-controlled random source; every answer is checked by reliability/oracle.py: a
structured answer carrying the call id, no undeclared failure, valid UTF-8 JSON on the wire,
no trace of another owner's notes, and the same bytes for another owner's note as for a missing
one."""

from __future__ import annotations

import asyncio
import random
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from reliability import fuzz, mutate, oracle

from strictcall.core.gateway import Gateway
from strictcall.errors import FORBIDDEN_OR_MISSING
from strictcall.services.demo import handle
from strictcall.services.notes import notes_gateway
from strictcall.storage import AuditRecord
from strictcall.storage.sqlite import SQLiteStore
from strictcall.transports.jsonrpc import RpcService

IDENTITY = "fuzzer"
FAST = settings(max_examples=100, suppress_health_check=[HealthCheck.too_slow])


@dataclass(repr=False)
class Notes:
    """A gateway and a JSON-RPC service on a SQLite file with another owner's notes."""

    store: SQLiteStore
    gateway: Gateway
    service: RpcService
    world: fuzz.World
    schemas: dict[str, Any]

    def __repr__(self) -> str:
        return f"Notes({self.store.path})"


@pytest.fixture(scope="module")
def notes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Notes]:
    db = tmp_path_factory.mktemp("fuzz-properties") / "notes.sqlite3"
    world = fuzz.build_world(db, [IDENTITY], random.Random(0))
    store = SQLiteStore(db)
    gateway = notes_gateway(store)
    yield Notes(store, gateway, RpcService(gateway, discard), world, fuzz.tool_schemas(gateway))
    gateway.close()
    store.close()


def discard(record: AuditRecord) -> None:
    """The service's audit records are not what these properties are about."""


def generator_for(notes: Notes, rng: random.Random) -> mutate.Generator:
    counter = iter(range(10**9))
    return mutate.Generator(
        rng, notes.schemas, notes.world.pools[IDENTITY], rpc_ids=lambda: next(counter)
    )


@given(raw=st.binary(max_size=400), identity=st.sampled_from(["u1", "u2", "u3", ""]))
def test_handle_answers_any_bytes_with_exactly_the_seeds_members(raw: bytes, identity: str) -> None:
    answer = handle(raw, identity, "call-7")
    assert oracle.answer_problems(answer, "call-7", exact=True) == []


@FAST
@given(rng=st.randoms(use_true_random=False))
def test_handle_answers_generated_calls_and_never_reveals_the_other_seed_note(
    rng: random.Random,
) -> None:
    sides = fuzz.handle_sides(rng)
    for identity in ("u1", "u2"):
        generator, secrets = sides[identity]
        for _ in range(2):
            inp = generator.gateway_input()
            assert fuzz.check_handle(inp.data, identity, "c", secrets).problems == [], inp


@FAST
@given(rng=st.randoms(use_true_random=False))
def test_gateway_answers_every_generated_call_with_a_structured_answer_and_no_leak(
    notes: Notes, rng: random.Random
) -> None:
    generator = generator_for(notes, rng)
    for index in range(3):
        inp = generator.gateway_input()
        raw: str | bytes = inp.data
        if rng.random() < 0.25:
            raw = inp.data.decode("utf-8", "surrogateescape")
        call_id: str | int = f"call-{index}" if rng.random() < 0.5 else rng.randrange(2**63)
        checked = fuzz.check_gateway(notes.gateway, raw, IDENTITY, call_id, notes.world.secrets)
        assert checked.problems == [], (inp, call_id)


@FAST
@given(rng=st.randoms(use_true_random=False))
def test_json_rpc_service_answers_every_generated_body_by_the_spec(
    notes: Notes, rng: random.Random
) -> None:
    generator = generator_for(notes, rng)
    for _ in range(2):
        inp = generator.rpc_input()
        checked = asyncio.run(
            fuzz.check_rpc_service(notes.service, inp.data, IDENTITY, notes.world.secrets)
        )
        assert checked.problems == [], inp


@settings(max_examples=60)
@given(
    request_id=st.one_of(
        st.text(max_size=20),
        st.integers(min_value=-(2**200), max_value=2**200),
    )
)
def test_json_rpc_service_answers_any_str_or_int_id_by_the_id_policy(
    notes: Notes, request_id: str | int
) -> None:
    body = (
        b'{"jsonrpc":"2.0","id":'
        + oracle_dumps(request_id)
        + b',"method":"tools/call","params":{"name":"count_notes","arguments":{}}}'
    )
    checked = asyncio.run(fuzz.check_rpc_service(notes.service, body, IDENTITY, _NO_SECRETS))
    assert checked.problems == []


def oracle_dumps(value: str | int) -> bytes:
    """JSON for a str or an int of any size (orjson stops at 64 bits)."""
    if isinstance(value, int):
        return str(value).encode()
    return orjson.dumps(value)


_NO_SECRETS = oracle.Secrets((), ())


@settings(max_examples=80)
@given(text=st.text(st.characters(exclude_categories=["Cs"]), max_size=300))
def test_any_allowed_note_text_round_trips_unchanged(notes: Notes, text: str) -> None:
    created = notes.gateway.call(
        orjson.dumps({"name": "create_note", "arguments": {"text": text}}),
        IDENTITY,
        f"create-{uuid.uuid4()}",
    )
    assert created["ok"] is True and created["result"]["text"] == text
    note_id = created["result"]["note_id"]
    read = notes.gateway.call(
        orjson.dumps({"name": "read_note", "arguments": {"note_id": note_id}}), IDENTITY, "read"
    )
    assert read == {"ok": True, "call_id": "read", "result": {"note_id": note_id, "text": text}}
    deleted = notes.gateway.call(
        orjson.dumps({"name": "delete_note", "arguments": {"note_id": note_id}}),
        IDENTITY,
        f"delete-{note_id}",
    )
    assert deleted == {"ok": True, "call_id": f"delete-{note_id}", "result": None}


@settings(max_examples=80)
@given(index=st.integers(min_value=0, max_value=11), tool=st.sampled_from(["read", "delete"]))
def test_another_owners_note_and_a_missing_one_get_the_same_bytes(
    notes: Notes, index: int, tool: str
) -> None:
    secrets = notes.world.secrets
    victim_id = secrets.ids[index]
    name = f"{tool}_note"
    answers = []
    for note_id in (victim_id, secrets.twin_of[victim_id]):
        raw = orjson.dumps({"name": name, "arguments": {"note_id": note_id}})
        answer = notes.gateway.call_text(raw, IDENTITY, "same-call")
        answers.append(answer.replace(note_id.encode(), b"<id>"))
    assert answers[0] == answers[1]
    assert orjson.loads(answers[0])["error"]["code"] == FORBIDDEN_OR_MISSING.code
