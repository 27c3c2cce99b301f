"""Resource subscriptions on /mcp of a real `strictcall proxy` and `strictcall federate` over HTTP
(127.0.0.1, port 0) in front of server-everything, whose subscribed resources are updated every
few seconds: on the handshake era a `resources/subscribe` is the caller's identity's and its
updates ride that identity's GET stream alone; on 2026-07-28 a listen's `resourceSubscriptions`
ride that listen stream; past `MAX_SUBSCRIPTIONS` is refused with the catalogue's error."""

from __future__ import annotations

import functools
import json
import re
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import ResourceUpdated

from mcp_peers import HttpProxy, everything_command
from node_client import TS_DIR, node_with_packages
from servers import create_token, lines_of
from stdio_peer import DEADLINE_S, until
from strictcall.errors import FORBIDDEN_OR_MISSING, INVALID_REQUEST, Reason, Stage
from strictcall.services.proxy.subscriptions import MAX_SUBSCRIPTIONS
from strictcall.transports.jsonrpc import ERROR_CODES
from test_mcp_change_streams import ChangeReader

TOGGLE = "toggle-subscriber-updates"
"""server-everything's tool that starts its updates (one at once, then every 5 s, of each URI
its session is subscribed to, in the order they were first subscribed)."""
UPDATED = "notifications/resources/updated"
MODERN = "2026-07-28"


def _dynamic(n: int) -> str:
    """A URI of server-everything's text template (served through the template, not listed)."""
    return f"demo://resource/dynamic/text/{n}"


def _tool(kind: str) -> str:
    return TOGGLE if kind == "proxy" else f"chat_{TOGGLE}"


def _start(kind: str, tmp: Path, db: Path, *extra: str) -> HttpProxy:
    """`strictcall proxy` or `federate` over HTTP in front of server-everything, once it listens
    (`extra`: more flags)."""
    upstream = everything_command()
    if kind == "proxy":
        front = ["proxy", "--upstream-cmd", upstream]
    else:
        config = tmp / "federation.toml"
        config.write_text(f"[upstreams.chat]\ncommand = {json.dumps(upstream)}\n", encoding="utf-8")
        front = ["federate", "--config", str(config)]
    argv = [sys.executable, "-m", "strictcall", *front, "--port", "0", "--db", str(db)]
    process = subprocess.Popen(
        [*argv, "--stream-keepalive", "0.2", *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert process.stdout is not None
    first = process.stdout.readline()  # the one line, once it listens (or "" if it died)
    match = re.search(r"listening on (http://[0-9.]+:\d+)", first)
    if match is None:
        process.kill()
        raise AssertionError(first)
    return HttpProxy(match.group(1), process)


@pytest.fixture(params=["proxy", "federate"])
def served(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, HttpProxy, Path]]:
    db = tmp_path / "front.sqlite3"
    front = _start(request.param, tmp_path, db)
    try:
        yield request.param, front, db
    finally:
        assert front.stop() == 0


def _updates(reader: ChangeReader) -> list[Any]:
    """The resource updates `reader` got so far (its queue drained)."""
    got = []
    while not reader.items.empty():
        _, item = reader.items.get_nowait()
        if isinstance(item, dict) and item.get("method") == UPDATED:
            got.append(item)
    return got


def test_the_typescript_clients_subscription_is_told_on_its_get_stream_and_nobody_elses(
    served: tuple[str, HttpProxy, Path],
) -> None:
    kind, front, db = served
    alice, bob = create_token(db, "alice"), create_token(db, "bob")
    watching = ChangeReader(front.base_url, bob)  # bob's own stream, subscribed to nothing
    assert watching.response.status_code == 200
    first, second = _dynamic(1), _dynamic(2)
    node = node_with_packages()
    script = str(TS_DIR / "resource_updates.mjs")
    argv = [node, script, front.base_url + "/mcp", alice, _tool(kind), first, second]
    client = subprocess.Popen(argv, cwd=TS_DIR, stdout=subprocess.PIPE, text=True)
    try:
        assert client.stdout is not None
        lines = lines_of(client.stdout)
        capabilities = json.loads(lines.get(timeout=DEADLINE_S) or "null")
        assert capabilities["resources"]["subscribe"] is True
        report = json.loads(lines.get(timeout=DEADLINE_S * 2) or "null")
        assert report is not None, "the client was never told"
        heard, held = report["heard"], report["held"]
        assert set(heard[:held]) == {first}
        assert heard[held:] == [second]  # no update of `first` once unsubscribed
        assert client.wait(timeout=DEADLINE_S) == 0
    finally:
        if client.poll() is None:
            client.kill()
            client.wait()
    assert _updates(watching) == []  # alice's updates never reach bob
    watching.leave()


@asynccontextmanager
async def _client(front: HttpProxy, token: str, mode: str) -> AsyncIterator[Client]:
    """The official Python client on /mcp as `token`'s identity (`mode`: "legacy" for the
    handshake era, "auto" for 2026-07-28)."""
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=DEADLINE_S) as http,
        Client(
            streamable_http_client(front.base_url + "/mcp", http_client=http),
            mode=mode,
            read_timeout_seconds=DEADLINE_S,
        ) as client,
    ):
        yield client


async def _subscribe(client: Client, uri: str) -> None:
    """resources/subscribe (the client's own method warns that 2026-07-28 removed it)."""
    params = types.SubscribeRequestParams(uri=uri)
    await client.session.send_request(types.SubscribeRequest(params=params), types.EmptyResult)


def _assert_past_the_budget(refused: MCPError | None) -> None:
    assert refused is not None and refused.code == ERROR_CODES[Stage.PROTOCOL][0]
    data = refused.error.data
    assert isinstance(data, dict)
    assert data["code"] == INVALID_REQUEST.code and data["expected"] == MAX_SUBSCRIPTIONS
    assert data["reason"] == Reason.MAX_ITEMS.value
    assert "dynamic" not in json.dumps([refused.error.message, data])  # never the URI


def test_an_identity_holds_at_most_the_budget_of_subscriptions_on_mcp(
    served: tuple[str, HttpProxy, Path],
) -> None:
    _, front, db = served
    alice, bob = create_token(db, "alice"), create_token(db, "bob")

    async def run() -> MCPError | None:
        with anyio.fail_after(DEADLINE_S * 4):
            async with _client(front, alice, "legacy") as client:
                for n in range(MAX_SUBSCRIPTIONS):
                    await _subscribe(client, _dynamic(n))
                await _subscribe(client, _dynamic(0))  # held already: still within
                try:
                    await _subscribe(client, _dynamic(MAX_SUBSCRIPTIONS))
                except MCPError as exc:
                    refused = exc
                else:
                    return None
            async with _client(front, bob, "legacy") as other:  # another identity's own budget
                await _subscribe(other, _dynamic(MAX_SUBSCRIPTIONS))
            return refused

    _assert_past_the_budget(anyio.run(run))


def test_a_2026_07_28_listen_is_told_the_updates_of_the_resources_it_names(
    served: tuple[str, HttpProxy, Path],
) -> None:
    kind, front, db = served
    alice = create_token(db, "alice")
    wanted = _dynamic(7)

    async def refusal(client: Client, uris: list[str]) -> MCPError | None:
        try:
            async with client.listen(resource_subscriptions=uris):
                return None
        except MCPError as exc:
            return exc

    async def run() -> tuple[list[str] | None, object, MCPError | None, MCPError | None]:
        with anyio.fail_after(DEADLINE_S * 2):
            async with _client(front, alice, "auto") as client:
                assert client.protocol_version == MODERN
                capabilities = client.server_capabilities
                assert capabilities is not None and capabilities.resources is not None
                assert capabilities.resources.subscribe is True
                await client.call_tool(_tool(kind), {})
                async with client.listen(resource_subscriptions=[wanted, wanted]) as subscription:
                    honored = subscription.honored.resource_subscriptions
                    event = await subscription.__anext__()
                missing = await refusal(client, [wanted, "demo://nowhere/at/all"])
                too_many = [_dynamic(n) for n in range(MAX_SUBSCRIPTIONS + 1)]
                return honored, event, missing, await refusal(client, too_many)

    honored, event, missing, past = anyio.run(run)
    assert honored == [wanted]  # asked twice, held once
    assert event == ResourceUpdated(uri=wanted)
    assert missing is not None and missing.code == ERROR_CODES[Stage.RESOURCE][0]
    data = missing.error.data
    assert isinstance(data, dict) and data["code"] == FORBIDDEN_OR_MISSING.code
    assert "nowhere" not in json.dumps([missing.error.message, data])
    _assert_past_the_budget(past)


@pytest.mark.parametrize("kind", ["proxy", "federate"])
def test_an_identitys_subscriptions_end_with_its_last_get_stream(kind: str, tmp_path: Path) -> None:
    db = tmp_path / "front.sqlite3"
    front = _start(kind, tmp_path, db, "--max-streams-per-identity", "1")
    alice = create_token(db, "alice")
    first, second = _dynamic(1), _dynamic(2)

    async def subscribe(uri: str, *, toggle: bool = False) -> None:
        with anyio.fail_after(DEADLINE_S):
            async with _client(front, alice, "legacy") as client:
                if toggle:
                    await client.call_tool(_tool(kind), {})
                await _subscribe(client, uri)

    def told(reader: ChangeReader, uri: str) -> list[str]:
        """The URIs `reader` is told until `uri` (keep-alives passed over)."""
        got: list[str] = []
        while uri not in got:
            _, item = reader.next_message(f"an update of {uri}")
            assert isinstance(item, dict) and item["method"] == UPDATED, item
            got.append(item["params"]["uri"])
        return got

    try:
        # subscribed with no stream open: held for alice, told once her stream opens
        anyio.run(functools.partial(subscribe, first, toggle=True))
        reader = ChangeReader(front.base_url, alice)
        assert set(told(reader, first)) == {first}
        reader.leave()
        reader.thread.join(DEADLINE_S)

        opened: list[ChangeReader] = []

        def opens() -> bool:  # her one place is free once the stream's end was handled
            again = ChangeReader(front.base_url, alice)
            opened.append(again)
            return again.response.status_code == 200

        until(opens, "alice's stream is seen gone")
        reader = opened[-1]
        anyio.run(subscribe, second)
        # the upstream's round tells `first` before `second`, had it been kept
        assert told(reader, second) == [second]
        reader.leave()
    finally:
        assert front.stop() == 0
