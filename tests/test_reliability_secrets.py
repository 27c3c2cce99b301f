"""Secrets: API tokens are high-entropy random values, kept only as hashes and compared in constant
time; no token, argument value or note text reaches the server's log or the audit records, even
when calls fail (refused tokens, broken JSON, bad arguments, refusals, a tool raising)."""

from __future__ import annotations

import base64
import inspect
import logging
import math
import re
import secrets
import socket
import sys
from collections import Counter
from pathlib import Path

import httpx
import orjson
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from reliability import procs

from strictcall import Gateway, Tool
from strictcall.core.tools import ToolContext
from strictcall.errors import INTERNAL_ERROR
from strictcall.storage import hash_token
from strictcall.storage.queries import TokenCache
from strictcall.storage.sqlite import SQLiteStore

TOKEN_SHAPE = re.compile(r"sc_[A-Za-z0-9_-]{43}")


def database_bytes(db: Path) -> bytes:
    """The database file and its WAL and shared memory, as they are on disk."""
    return b"".join(
        path.read_bytes() for path in (db, Path(f"{db}-wal"), Path(f"{db}-shm")) if path.exists()
    )


def test_tokens_are_256_bit_random_values(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "tokens.sqlite3")
    try:
        tokens = [store.create_token(f"user-{i % 4}") for i in range(64)]
    finally:
        store.close()
    assert all(TOKEN_SHAPE.fullmatch(token) for token in tokens)
    assert len(set(tokens)) == len(tokens)
    for token in tokens:
        assert len(base64.urlsafe_b64decode(token[3:] + "=")) == 32
    # 64 tokens x 43 characters of a 64-symbol alphabet: random ones use nearly all symbols,
    # about evenly (Shannon entropy close to 6 bits a character).
    characters = Counter("".join(token[3:] for token in tokens))
    total = sum(characters.values())
    entropy = -sum(n / total * math.log2(n / total) for n in characters.values())
    assert len(characters) >= 60
    assert entropy > 5.85


def test_tokens_are_stored_only_as_hashes(tmp_path: Path) -> None:
    db = tmp_path / "tokens.sqlite3"
    store = SQLiteStore(db)
    try:
        tokens = {store.create_token(f"user-{i}"): f"user-{i}" for i in range(8)}
        on_disk = database_bytes(db)  # while open: the WAL holds the latest writes
        for token, identity in tokens.items():
            assert store.identity_for_token(token) == identity
            assert store.identity_for_token(token[:-1]) is None
    finally:
        store.close()
    on_disk += database_bytes(db)
    for token in tokens:
        assert token.encode() not in on_disk
        assert token[3:].encode() not in on_disk
        assert hash_token(token).encode() in on_disk


def test_tokens_are_compared_in_constant_time() -> None:
    lookup = inspect.getsource(SQLiteStore.identity_for_token)  # both stores' (SharedReads)
    compared = inspect.getsource(TokenCache.remember)
    assert "hmac.compare_digest(" in compared
    assert "self._tokens.remember(digest," in lookup
    # the lookup and the comparison are on the token's hash, never the token
    assert re.search(r"digest\s*=\s*hash_token\(token\)", lookup)
    for source in (lookup, compared):
        assert not re.search(r"token\s*==|==\s*token", source)


def sentinel(kind: str) -> str:
    return f"{kind}-sentinel-{secrets.token_hex(6)}"


def test_no_token_argument_value_or_note_text_reaches_the_log_or_the_audit(
    tmp_path: Path,
) -> None:
    db = tmp_path / "secrets.sqlite3"
    token = procs.create_token(db, "keeper")
    bad_token = "sc_" + sentinel("token")
    note_text = sentinel("note-text")
    values = [sentinel(f"value{i}") for i in range(6)]
    server = procs.HttpServer(db, tmp_path / "stderr.log")
    auth = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}

    def call(params: object, request_id: int) -> bytes:
        return orjson.dumps(
            {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
        )

    bodies = [
        call({"name": "create_note", "arguments": {"text": note_text}}, 1),
        call({"name": "read_note", "arguments": {"note_id": values[0]}}, 2),
        call({"name": "delete_note", "arguments": {"note_id": values[1]}}, 3),
        call({"name": "read_note", "arguments": {"note_id": 5, "admin": values[2]}}, 4),
        call({"name": values[3], "arguments": {}}, 5),
        call({"name": {values[4]: 1}, "arguments": {}}, 6),
        b'{"name": "' + values[5].encode() + b'", ',
        call({"name": "list_notes", "arguments": {}}, 7),
    ]
    try:
        with httpx.Client(base_url=server.base_url, timeout=30) as client:
            statuses = [
                client.post("/rpc", content=body, headers=auth).status_code for body in bodies
            ]
            refused = client.post(
                "/rpc", content=bodies[0], headers={"Authorization": f"Bearer {bad_token}"}
            )
            assert refused.status_code == 401
            listed = orjson.loads(client.post("/rpc", content=bodies[-1], headers=auth).content)
            assert listed["result"][0]["text"] == note_text  # the note was written
        # and an HTTP request the server cannot even parse, with a value in it
        host, port = server.base_url.removeprefix("http://").rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=10) as raw:
            raw.sendall(f"POST /rpc?{values[0]} HTTP/1.1\r\nX-{values[1]}\r\n\r\n".encode())
            raw.recv(4096)
    finally:
        assert server.stop() == 0
    assert 200 in statuses
    log = server.stderr_text()
    store = SQLiteStore(db)
    try:
        audit = store.recent_calls(10_000)
    finally:
        store.close()
    assert len(audit) >= len(bodies)  # the calls were audited...
    audited = repr(audit)
    for secret in (token, bad_token, note_text, *values):
        assert secret not in log  # ...but nothing of what they carried
        assert secret not in audited
    assert token.encode() not in database_bytes(db)


def test_a_tool_raising_is_logged_without_its_message_or_arguments(
    caplog: pytest.LogCaptureFixture,
) -> None:
    argument = sentinel("argument")
    message = sentinel("message")

    def explode(ctx: ToolContext, arguments: dict[str, object]) -> object:
        raise RuntimeError(f"{message} while handling {arguments['value']}")

    tool = Tool(
        name="explode",
        description="Always fails.",
        input_schema={
            "type": "object",
            "properties": {"value": {"type": "string"}},
            "required": ["value"],
        },
        output_schema={"type": "null"},
        handler=explode,
    )
    with caplog.at_level(logging.DEBUG, logger="strictcall"), Gateway([tool]) as gateway:
        answer = gateway.call(
            orjson.dumps({"name": "explode", "arguments": {"value": argument}}), "u1", "c-1"
        )
    assert answer["error"]["code"] == INTERNAL_ERROR.code
    assert answer["error"]["stage"] == INTERNAL_ERROR.stage.value
    logged = "\n".join(caplog.text.splitlines()) + "".join(
        str(record.args) + str(record.exc_info) for record in caplog.records
    )
    assert "RuntimeError" in logged  # the operator learns what failed, and where
    assert "explode" in logged
    assert argument not in logged and message not in logged
    assert argument not in repr(answer) and message not in repr(answer)
