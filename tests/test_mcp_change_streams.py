"""/mcp's change streams on a real `strictcall federate` over HTTP (127.0.0.1, port 0) in front
of a real upstream whose listing a test rewrites: a GET that accepts an event stream is told
`notifications/tools/list_changed` when what its caller may see changes, within the streams'
budgets, and every stream ends cleanly, at once, when the server stops."""

from __future__ import annotations

import functools
import json
import queue
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import mcp_types as types
import pytest
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.subscriptions import SUBSCRIPTION_ID_META_KEY, ToolsListChanged

from listing_federation import ListingFederation
from mcp_peers import start_proxy
from node_client import TS_DIR, node_with_packages
from servers import create_token, lines_of
from stdio_peer import DEADLINE_S, HANDSHAKE_VERSION, until
from strictcall.core.refusals import IDENTITY_STREAMS_FULL, STREAMS_FULL
from strictcall.errors import BUSY
from strictcall.server.app import GRACEFUL_SHUTDOWN_S

TOOLS_CHANGED = "notifications/tools/list_changed"
STREAM = {"Accept": "text/event-stream"}
MCP = {"Accept": "application/json, text/event-stream"}
MODERN = "2026-07-28"
LISTEN = "subscriptions/listen"
ENVELOPE = {
    types.PROTOCOL_VERSION_META_KEY: MODERN,
    types.CLIENT_CAPABILITIES_META_KEY: {},
    types.CLIENT_INFO_META_KEY: {"name": "listen-test", "version": "1"},
}
ENDED = "(ended)"
"""What a reader records once its stream has ended cleanly (the last chunk written)."""


class ChangeReader:
    """A GET stream on /mcp read line by line by a thread: each event's message and each
    comment, with when it arrived, then `ENDED` (or the error that cut it)."""

    def __init__(
        self, base_url: str, token: str, listen: dict[str, Any] | None = None, **headers: str
    ) -> None:
        """`listen`: POST this 2026-07-28 `subscriptions/listen` request, not a GET."""
        self.items: queue.Queue[tuple[float, Any]] = queue.Queue()
        self.opened: queue.Queue[httpx.Response] = queue.Queue()
        self._headers = {**STREAM, "Authorization": f"Bearer {token}", **headers}
        self._listen = listen
        if listen is not None:
            self._headers.update(MCP | {"MCP-Protocol-Version": MODERN, "Mcp-Method": LISTEN})
        self._url = base_url + "/mcp"
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()
        self.response = self.opened.get(timeout=DEADLINE_S)

    def _read(self) -> None:
        try:
            with (
                httpx.Client(timeout=httpx.Timeout(DEADLINE_S)) as client,
                client.stream(
                    "GET" if self._listen is None else "POST",
                    self._url,
                    headers=self._headers,
                    json=self._listen,
                ) as response,
            ):
                self.opened.put(response)
                for line in response.iter_lines():
                    if self._stop.is_set():
                        return
                    if line.startswith("data: "):
                        self.items.put((time.monotonic(), json.loads(line[6:])))
                    elif line.startswith(":"):
                        self.items.put((time.monotonic(), line))
            self.items.put((time.monotonic(), ENDED))
        except httpx.HTTPError as exc:
            self.items.put((time.monotonic(), exc))

    def next(self, what: str) -> tuple[float, Any]:
        """The next item, within the deadline."""
        try:
            return self.items.get(timeout=DEADLINE_S)
        except queue.Empty:
            raise AssertionError(f"not within {DEADLINE_S} s: {what}") from None

    def next_message(self, what: str) -> tuple[float, Any]:
        """The next event's message (or the end), keep-alive comments passed over."""
        while True:
            when, item = self.next(what)
            if not (isinstance(item, str) and item.startswith(":")):
                return when, item

    def leave(self) -> None:
        """Stop reading at the next line (the connection closes with the thread)."""
        self._stop.set()


def tools_changed(item: Any) -> bool:
    return isinstance(item, dict) and item.get("method") == TOOLS_CHANGED


def refusal_of(response: httpx.Response) -> dict[str, Any]:
    data: dict[str, Any] = response.json()["error"]["data"]
    return data


@pytest.fixture
def allow(tmp_path: Path) -> Path:
    path = tmp_path / "allow.json"
    path.write_text(json.dumps({"alice": ["one", "two"], "bob": ["one"]}), encoding="utf-8")
    return path


def federation(tmp_path: Path, *args: str) -> ListingFederation:
    return ListingFederation(
        tmp_path, {"up": {"tools": ["one"]}}, pinning=False, http=True, args=args
    )


@pytest.fixture
def served(tmp_path: Path, allow: Path) -> Iterator[tuple[ListingFederation, dict[str, str]]]:
    running = federation(tmp_path, "--allow", str(allow), "--stream-keepalive", "0.2")
    tokens = {who: create_token(running.db, who) for who in ("alice", "bob")}
    try:
        yield running, tokens
    finally:
        running.close()


def initialize(base_url: str, token: str) -> dict[str, Any]:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": HANDSHAKE_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    headers = {**MCP, "Authorization": f"Bearer {token}"}
    answer = httpx.post(base_url + "/mcp", json=body, headers=headers, timeout=DEADLINE_S)
    assert answer.status_code == 200
    result: dict[str, Any] = answer.json()["result"]
    return result


def test_initialize_on_a_federations_mcp_announces_tools_list_changed(
    served: tuple[ListingFederation, dict[str, str]],
) -> None:
    running, tokens = served
    capabilities = initialize(running.base_url, tokens["alice"])["capabilities"]
    assert capabilities["tools"]["listChanged"] is True


def test_each_identity_is_told_when_its_own_listing_changes_and_only_then(
    served: tuple[ListingFederation, dict[str, str]],
) -> None:
    running, tokens = served
    alice = ChangeReader(running.base_url, tokens["alice"])
    bob = ChangeReader(running.base_url, tokens["bob"])
    for reader in (alice, bob):
        assert reader.response.status_code == 200
        assert reader.response.headers["content-type"].startswith("text/event-stream")
    # "two" appears: alice may see it, bob may not (the allow-list)
    running.relist("up", {"tools": ["one", "two"]})
    _, told = alice.next_message("alice is told of two")
    assert told == {"jsonrpc": "2.0", "method": TOOLS_CHANGED}
    # "one" goes: both listings change
    second = time.monotonic()
    running.relist("up", {"tools": ["two"]})
    when, told = bob.next_message("bob is told one went")
    assert tools_changed(told) and when >= second  # nothing for bob before it
    _, told = alice.next_message("alice is told one went")
    assert tools_changed(told)
    alice.leave()
    bob.leave()


def test_an_idle_stream_gets_a_keep_alive_comment(
    served: tuple[ListingFederation, dict[str, str]],
) -> None:
    running, tokens = served
    reader = ChangeReader(running.base_url, tokens["alice"])
    started = time.monotonic()
    when, item = reader.next("a keep-alive comment")
    assert item == ": keep-alive"
    assert when - started < DEADLINE_S
    reader.leave()


@pytest.mark.parametrize(
    "headers",
    [{}, {"Accept": "application/json"}, {**STREAM, "MCP-Protocol-Version": "2026-07-28"}],
    ids=["no-accept", "json-only", "2026-07-28"],
)
def test_a_get_that_opens_no_stream_is_405(
    served: tuple[ListingFederation, dict[str, str]], headers: dict[str, str]
) -> None:
    running, tokens = served
    headers = {**headers, "Authorization": f"Bearer {tokens['alice']}"}
    answer = httpx.get(running.base_url + "/mcp", headers=headers, timeout=DEADLINE_S)
    assert answer.status_code == 405
    assert answer.headers["allow"] == "GET, POST"
    assert not answer.headers.get("content-type", "").startswith("text/event-stream")


def test_a_get_without_a_token_is_refused_as_a_post_is(
    served: tuple[ListingFederation, dict[str, str]],
) -> None:
    running, _ = served
    answer = httpx.get(running.base_url + "/mcp", headers=STREAM, timeout=DEADLINE_S)
    assert answer.status_code == 401


def test_streams_past_an_identitys_budget_are_429_and_past_the_total_503(
    tmp_path: Path,
) -> None:
    running = federation(
        tmp_path,
        *("--max-streams-per-identity", "2", "--max-streams", "3", "--stream-keepalive", "0.2"),
    )
    tokens = {who: create_token(running.db, who) for who in ("alice", "bob")}
    try:
        base = running.base_url
        held = [ChangeReader(base, tokens["alice"]) for _ in range(2)]
        assert [reader.response.status_code for reader in held] == [200, 200]
        headers = {**STREAM, "Authorization": f"Bearer {tokens['alice']}"}
        third = httpx.get(base + "/mcp", headers=headers, timeout=DEADLINE_S)
        assert third.status_code == 429 and third.headers["retry-after"] == "5"
        refused = refusal_of(third)
        assert (refused["code"], refused["stage"]) == (BUSY.code, BUSY.stage.value)
        assert refused["limit"] == IDENTITY_STREAMS_FULL.details["limit"]
        held.append(ChangeReader(base, tokens["bob"]))  # the third of three
        assert held[-1].response.status_code == 200
        headers = {**STREAM, "Authorization": f"Bearer {tokens['bob']}"}
        fourth = httpx.get(base + "/mcp", headers=headers, timeout=DEADLINE_S)
        assert fourth.status_code == 503
        assert refusal_of(fourth)["limit"] == STREAMS_FULL.details["limit"]
        assert tokens["bob"] not in fourth.text
        # one leaves: its place is free again once the server sees it gone
        held[0].leave()  # at its next keep-alive
        held[0].thread.join(DEADLINE_S)

        def opens() -> bool:
            reader = ChangeReader(base, tokens["bob"])
            reader.leave()
            return reader.response.status_code == 200

        until(opens, "a stream opens once one has left")
        for reader in held[1:]:
            reader.leave()
    finally:
        running.close()


def test_the_server_stops_at_once_with_streams_open_each_ended_cleanly(
    served: tuple[ListingFederation, dict[str, str]],
) -> None:
    running, tokens = served
    readers = [ChangeReader(running.base_url, tokens[who]) for who in ("alice", "bob", "bob")]
    assert [reader.response.status_code for reader in readers] == [200, 200, 200]
    started = time.monotonic()
    assert running.close() == 0
    took = time.monotonic() - started
    assert took < GRACEFUL_SHUTDOWN_S / 2, took  # not held for the grace period
    for reader in readers:
        until(functools.partial(_ended, reader), "the stream ends")
    assert "Traceback" not in running.stderr()


def _ended(reader: ChangeReader) -> bool:
    while True:
        try:
            _, item = reader.items.get_nowait()
        except queue.Empty:
            return False
        if item == ENDED:
            return True
        assert not isinstance(item, Exception), item


def test_the_official_typescript_client_is_told_on_the_get_stream_it_opens(
    served: tuple[ListingFederation, dict[str, str]],
) -> None:
    running, tokens = served
    node = node_with_packages()
    script = str(TS_DIR / "list_changed.mjs")
    client = subprocess.Popen(
        [node, script, running.base_url + "/mcp", tokens["alice"]],
        cwd=TS_DIR,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert client.stdout is not None
        lines = lines_of(client.stdout)
        assert lines.get(timeout=DEADLINE_S) == "connected\n"
        # it opens its GET stream after initialize, on its own time: change until it is told
        report = None
        for count in range(200):  # "two" comes and goes: alice's listing changes each time
            running.relist("up", {"tools": ["one", "two"] if count % 2 == 0 else ["one"]})
            try:
                report = json.loads(lines.get(timeout=0.25) or "null")
                break
            except queue.Empty:
                continue
        assert report is not None, "the client was never told"
        assert report["told"] is True
        assert report["capabilities"]["tools"]["listChanged"] is True
        assert set(report["tools"]) <= {"one", "two"}
        assert client.wait(timeout=DEADLINE_S) == 0
    finally:
        if client.poll() is None:
            client.kill()
            client.wait()


def listen(request_id: int, **notifications: Any) -> dict[str, Any]:
    """A 2026-07-28 `subscriptions/listen` request asking for `notifications`."""
    params = {"notifications": notifications, "_meta": ENVELOPE}
    return {"jsonrpc": "2.0", "id": request_id, "method": LISTEN, "params": params}


def test_a_2026_07_28_listen_is_acknowledged_then_told_its_callers_changes_stamped(
    served: tuple[ListingFederation, dict[str, str]],
) -> None:
    running, tokens = served
    asked = {"toolsListChanged": True, "resourceSubscriptions": ["file:///x"]}
    alice = ChangeReader(running.base_url, tokens["alice"], listen(7, **asked))
    bob = ChangeReader(running.base_url, tokens["bob"], listen(8, toolsListChanged=True))
    for reader, request_id in ((alice, 7), (bob, 8)):
        assert reader.response.status_code == 200
        _, ack = reader.next_message("the acknowledgement")
        assert ack["method"] == "notifications/subscriptions/acknowledged"
        # what is told: the tools' changes; never resource subscriptions (no updates here)
        assert ack["params"]["notifications"] == {"toolsListChanged": True}
        assert ack["params"]["_meta"] == {SUBSCRIPTION_ID_META_KEY: request_id}
    running.relist("up", {"tools": ["one", "two"]})  # alice's listing alone changes
    _, told = alice.next_message("alice is told")
    assert told == {
        "jsonrpc": "2.0",
        "method": TOOLS_CHANGED,
        "params": {"_meta": {SUBSCRIPTION_ID_META_KEY: 7}},
    }
    second = time.monotonic()
    running.relist("up", {"tools": ["two"]})
    when, told = bob.next_message("bob is told")
    assert tools_changed(told) and when >= second
    alice.leave()
    bob.leave()


def test_a_2026_07_28_listen_counts_in_the_streams_budget_and_ends_with_its_result_at_a_stop(
    tmp_path: Path,
) -> None:
    running = federation(tmp_path, "--max-streams-per-identity", "1")
    token = create_token(running.db, "alice")
    try:
        opened = ChangeReader(running.base_url, token, listen(1, toolsListChanged=True))
        assert opened.response.status_code == 200
        opened.next_message("the acknowledgement")
        headers = {**MCP, "Authorization": f"Bearer {token}", "MCP-Protocol-Version": MODERN}
        refused = httpx.post(
            running.base_url + "/mcp",
            json=listen(2, toolsListChanged=True),
            headers={**headers, "Mcp-Method": LISTEN},
            timeout=DEADLINE_S,
        )
        assert refused.status_code == 429
        assert refusal_of(refused)["limit"] == IDENTITY_STREAMS_FULL.details["limit"]
        get = httpx.get(running.base_url + "/mcp", headers=headers | STREAM, timeout=DEADLINE_S)
        assert get.status_code == 405  # no standing stream on 2026-07-28
        started = time.monotonic()
        assert running.close() == 0
        assert time.monotonic() - started < GRACEFUL_SHUTDOWN_S / 2
        _, result = opened.next_message("the listen's result")
        assert result["id"] == 1
        assert result["result"]["_meta"][SUBSCRIPTION_ID_META_KEY] == 1
        assert opened.next_message("the end")[1] == ENDED
    finally:
        if running.peer.process.poll() is None:  # not stopped above: a failure on the way
            running.close()


def test_the_official_python_clients_listen_on_2026_07_28_is_told_and_closed_gracefully(
    served: tuple[ListingFederation, dict[str, str]],
) -> None:
    running, tokens = served
    headers = {"Authorization": f"Bearer {tokens['alice']}"}

    async def session() -> None:
        with anyio.fail_after(DEADLINE_S * 2):
            await listened()

    async def listened() -> None:
        async with (
            httpx2.AsyncClient(headers=headers, timeout=DEADLINE_S) as http,
            Client(
                streamable_http_client(running.base_url + "/mcp", http_client=http),
                mode="auto",
                read_timeout_seconds=DEADLINE_S,
            ) as client,
        ):
            assert client.protocol_version == MODERN
            capabilities = client.server_capabilities
            assert capabilities is not None and capabilities.tools is not None
            assert capabilities.tools.list_changed is True
            async with client.listen(tools_list_changed=True) as subscription:
                assert subscription.honored.tools_list_changed is True
                running.relist("up", {"tools": ["one", "two"]})
                event = await subscription.__anext__()
                assert isinstance(event, ToolsListChanged)
                names = {tool.name for tool in (await client.list_tools()).tools}
                assert names == {"one", "two"}

    anyio.run(session)


def test_a_proxys_stream_is_told_its_upstreams_new_tool_and_resource(tmp_path: Path) -> None:
    db = tmp_path / "proxy.sqlite3"
    token = create_token(db, "agent")
    proxy = start_proxy(db)
    try:
        capabilities = initialize(proxy.base_url, token)["capabilities"]
        assert capabilities["tools"]["listChanged"] is True
        assert capabilities["resources"]["listChanged"] is True
        reader = ChangeReader(proxy.base_url, token)
        assert reader.response.status_code == 200
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "grow"}}
        headers = {**MCP, "Authorization": f"Bearer {token}"}
        grown = httpx.post(proxy.base_url + "/mcp", json=call, headers=headers, timeout=DEADLINE_S)
        assert grown.status_code == 200 and grown.json()["result"]["isError"] is False
        told = {reader.next_message("a change")[1]["method"] for _ in range(2)}
        assert told == {TOOLS_CHANGED, "notifications/resources/list_changed"}
        reader.leave()
    finally:
        assert proxy.stop() == 0
