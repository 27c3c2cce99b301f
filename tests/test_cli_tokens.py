"""`tokens list` and `tokens revoke`: real commands on real stores, audited, and a revoked token
refused by every server sharing the store within the token cache's time (shortened here by its
documented setting, STRICTCALL_TOKEN_CACHE_S); `serve --demo` mints its tokens once listening.
"""

from __future__ import annotations

import json
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from servers import RunningServer, create_token, start_server, strictcall
from strictcall.errors import FORBIDDEN_OR_MISSING, UNAUTHENTICATED
from strictcall.storage import TOKEN_CACHE_ENV, TOKEN_CACHE_S, TOKEN_ID_LENGTH, open_store

EXIT_OK = 0
EXIT_FAILED = 1
CACHE_S = 1.0
"""The cache time the servers here are started with."""
SLACK_S = 10.0
"""A bound, not a wait, for a loaded machine: the refusal is polled for until then."""


@pytest.fixture(params=["sqlite", "postgres"])
def any_db(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A store of each kind in turn: a SQLite file's path, then a fresh PostgreSQL URL."""
    if request.param == "sqlite":
        return str(tmp_path / "s.sqlite3")
    return str(request.getfixturevalue("pg_url"))


def listed(db: str) -> list[list[str]]:
    """`tokens list`'s rows (after its header), each split into id, role, created, identity."""
    done = strictcall("tokens", "list", "--db", db)
    assert done.returncode == EXIT_OK, done.stderr
    rows = done.stdout.splitlines()
    return [row.split(None, 3) for row in rows[1:]]


def audited_tools(db: str) -> list[tuple[str | None, str | None, str | None]]:
    store = open_store(db)
    try:
        return [(r.tool, r.identity, r.code) for r in store.recent_calls(100)]
    finally:
        store.close()


def test_tokens_list_shows_ids_and_identities_never_a_token(any_db: str) -> None:
    token = create_token(any_db, "u1")
    operator = strictcall("tokens", "create", "--operator", "--identity", "ops", "--db", any_db)
    assert operator.returncode == EXIT_OK
    rows = listed(any_db)
    assert sorted((row[1], row[3]) for row in rows) == [("agent", "u1"), ("operator", "ops")]
    assert all(len(row[0]) == TOKEN_ID_LENGTH for row in rows)
    done = strictcall("tokens", "list", "--db", any_db)
    assert token not in done.stdout
    assert ("tokens list", None, None) in audited_tools(any_db)


def test_tokens_create_prints_the_id_that_tokens_list_shows(tmp_path: Path) -> None:
    db = str(tmp_path / "s.sqlite3")
    done = strictcall("tokens", "create", "--identity", "u1", "--db", db)
    (row,) = listed(db)
    assert row[0] in done.stdout.splitlines()[0]


def test_tokens_list_on_a_store_without_tokens_says_so_and_exits_0(tmp_path: Path) -> None:
    done = strictcall("tokens", "list", "--db", str(tmp_path / "s.sqlite3"))
    assert done.returncode == EXIT_OK
    assert done.stdout == ""
    assert len(done.stderr.splitlines()) == 1
    assert done.stderr.startswith("strictcall: ")


def test_a_revoked_token_no_longer_opens_the_store_and_the_revocation_is_audited(
    any_db: str,
) -> None:
    kept, revoked = create_token(any_db, "u1"), create_token(any_db, "u2")
    (u2,) = [row for row in listed(any_db) if row[3] == "u2"]
    done = strictcall("tokens", "revoke", u2[0], "--db", any_db)
    assert done.returncode == EXIT_OK, done.stderr
    assert [row[3] for row in listed(any_db)] == ["u1"]
    store = open_store(any_db)
    try:
        assert store.identity_for_token(revoked) is None
        assert store.identity_for_token(kept) == "u1"
    finally:
        store.close()
    assert ("tokens revoke", "u2", None) in audited_tools(any_db)


def test_revoke_takes_the_token_itself_or_every_token_of_an_identity(tmp_path: Path) -> None:
    db = str(tmp_path / "s.sqlite3")
    token = create_token(db, "u1")
    create_token(db, "u2")
    create_token(db, "u2")
    assert strictcall("tokens", "revoke", token, "--db", db).returncode == EXIT_OK
    assert token not in strictcall("tokens", "revoke", token, "--db", db).stderr
    done = strictcall("tokens", "revoke", "--identity", "u2", "--db", db)
    assert done.returncode == EXIT_OK
    assert listed(db) == []


def test_revoking_what_is_not_there_is_one_line_exit_1_and_audited_as_refused(
    tmp_path: Path,
) -> None:
    db = str(tmp_path / "s.sqlite3")
    create_token(db, "u1")
    done = strictcall("tokens", "revoke", "0" * TOKEN_ID_LENGTH, "--db", db)
    assert done.returncode == EXIT_FAILED
    (line,) = done.stderr.splitlines()
    assert line.startswith("strictcall tokens revoke: ")
    assert "Traceback" not in done.stderr
    assert ("tokens revoke", None, FORBIDDEN_OR_MISSING.code) in audited_tools(db)
    assert len(listed(db)) == 1


def test_revoke_needs_an_id_or_an_identity(tmp_path: Path) -> None:
    done = strictcall("tokens", "revoke", "--db", str(tmp_path / "s.sqlite3"))
    assert done.returncode == 2
    assert done.stderr.startswith("usage: strictcall tokens revoke")


def status_of(server: RunningServer, token: str) -> int:
    """The HTTP status of one count_notes call to `server` with `token`."""
    body = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"count_notes"}}'
    request = urllib.request.Request(
        server.base_url + "/rpc",
        data=body,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as refused:
        data = json.loads(refused.read())["error"]["data"]
        assert data["code"] == UNAUTHENTICATED.code
        return int(refused.code)


@pytest.fixture
def two_servers(any_db: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[RunningServer]]:
    """Two servers on one store, each remembering a known token for CACHE_S."""
    monkeypatch.setenv(TOKEN_CACHE_ENV, str(CACHE_S))
    servers = [start_server(any_db)]
    try:
        servers.append(start_server(any_db))
        yield servers
    finally:
        for server in servers:
            server.stop()


def test_a_revoked_token_is_refused_by_every_server_sharing_the_store_within_the_cache_time(
    two_servers: list[RunningServer],
) -> None:
    db = str(two_servers[0].db)
    token = create_token(db, "u1")
    for server in two_servers:
        assert status_of(server, token) == 200  # known now: in each server's cache
    revoked_at = time.monotonic()
    assert strictcall("tokens", "revoke", token, "--db", db).returncode == EXIT_OK
    for server in two_servers:
        while status_of(server, token) != 401:
            assert time.monotonic() - revoked_at < CACHE_S + SLACK_S
    # a server caches a token it answered for at most CACHE_S; the documented default is 5 s
    assert TOKEN_CACHE_S == 5.0


def test_serve_demo_mints_no_token_when_it_cannot_start(tmp_path: Path) -> None:
    db = str(tmp_path / "s.sqlite3")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        done = strictcall("serve", "--demo", "--port", port, "--db", db)
    assert done.returncode == EXIT_FAILED
    assert len(done.stderr.splitlines()) == 1
    assert listed(db) == []


def test_each_serve_demo_replaces_the_demo_tokens_and_the_printed_ones_work(
    tmp_path: Path,
) -> None:
    db = tmp_path / "strictcall.sqlite3"
    for _ in range(2):
        server = start_server(db, "--demo")
        try:
            printed = [
                line.split(": ", 1)[1].strip() for line in server.lines if "token for" in line
            ]
            assert len(printed) == 2
            assert all(status_of(server, token) == 200 for token in printed)
        finally:
            assert server.stop() == 0
    assert sorted(row[3] for row in listed(str(db))) == ["u1", "u2"]
