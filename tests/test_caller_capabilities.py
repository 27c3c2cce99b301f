"""A tool its upstream lists only to a client offering sampling, elicitation or roots is listed
to the callers whose client offers them, and to no other: through a proxy each caller sees what
its own client would see from the server directly.

strictcall offers its upstream all three, so that the upstream lists every tool; it learns
which tools need what from sessions of their own that offer less (`Upstream.asks`). The
official Python client is the caller, on sessions served as stdio serves them and on /mcp over
HTTP (a 2025-11-25 caller on stateless /mcp is never asked, so it offers nothing; a 2026-07-28
caller is asked in input_required rounds, so its envelope's capabilities count) and /rpc.
The upstreams are the npm server-everything and the hand-written tests/upstreams/
asking_upstream.py.
"""

from __future__ import annotations

import io
import shlex
import sys
from collections.abc import Mapping
from typing import Any

import anyio
import httpx2
import pytest
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from mcp_peers import UPSTREAMS, everything_command
from memory_session import memory_session
from servers import create_token, start_server
from stdio_peer import DEADLINE_S
from strictcall.core.policy import PolicyHolder, parse_policy
from strictcall.server.proxy import Proxy
from strictcall.services.proxy import upstream as upstream_module
from strictcall.services.proxy.config import ConfigError, federation_config
from strictcall.services.proxy.federation import Member
from strictcall.services.proxy.upstream import UpstreamSpec
from strictcall.transports.mcp.adapter import McpTools
from strictcall.transports.mcp.stdio import Answers
from strictcall.transports.serving import Serving
from test_federation_walkthrough import tickets
from test_server_requests import ALL_CALLBACKS, LEGACY, MODERN, OPEN

ASKING = [sys.executable, str(UPSTREAMS / "asking_upstream.py")]
NONE: dict[str, Any] = {}
SAMPLING = {"sampling_callback": ALL_CALLBACKS["sampling_callback"]}
SAMPLING_AND_ROOTS = {**SAMPLING, "list_roots_callback": ALL_CALLBACKS["list_roots_callback"]}
OFFERS = {"none": NONE, "sampling": SAMPLING, "all": ALL_CALLBACKS}


__all__ = ["tickets"]  # server-everything over streamable HTTP, a fixture


def _proxy(command: str | None = None, url: str | None = None) -> Proxy:
    spec = (
        UpstreamSpec.of_url(url, []) if url is not None else UpstreamSpec.of_command(command or "")
    )
    return Proxy(
        spec,
        errlog=io.StringIO(),
        policy=PolicyHolder(parse_policy(OPEN)),
    )


async def _served(proxy: Proxy, mode: str, callbacks: Mapping[str, Any]) -> set[str]:
    """The names a caller whose client offers `callbacks` is listed through `proxy` (running),
    on a session served as a proxy's stdio serves one (its tools may change: rounds on
    2026-07-28)."""

    def tools_for(answers: Answers) -> McpTools:
        return McpTools(proxy.gateway, lambda ctx: "u1", lambda: "a", Serving(tools_change=True))

    async with memory_session(tools_for, mode=mode, **callbacks) as client:
        return {tool.name for tool in (await client.list_tools()).tools}


def _direct(argv: list[str], callbacks: Mapping[str, Any]) -> set[str]:
    """The names the server lists to the official client offering `callbacks`, directly."""
    params = StdioServerParameters(command=argv[0], args=argv[1:])

    async def run() -> set[str]:
        with anyio.fail_after(DEADLINE_S):
            async with Client(stdio_client(params), mode=LEGACY, **callbacks) as client:
                return {tool.name for tool in (await client.list_tools()).tools}

    return anyio.run(run)


def _listed_offering_none(proxy: Proxy) -> set[str]:
    """The names `proxy` lists, once started, to a caller whose client offers nothing."""

    async def run() -> set[str]:
        with anyio.fail_after(DEADLINE_S):
            async with proxy.lifespan():
                return await _served(proxy, LEGACY, NONE)

    return anyio.run(run)


def _recorded(argv: list[str], pids: Any) -> str:
    """A command line running `argv` that first appends its process id to `pids`."""
    return f"sh -c {shlex.quote(f'echo $$ >> {pids}; exec {shlex.join(argv)}')}"


@pytest.fixture(scope="module")
def everything() -> Any:
    """A proxy of server-everything, started, with its command line."""
    command = everything_command()
    proxy = _proxy(command)
    served: dict[tuple[str, str], set[str]] = {}

    async def run() -> None:
        with anyio.fail_after(DEADLINE_S * 2):
            async with proxy.lifespan():
                for mode in (LEGACY, MODERN):
                    for offer, callbacks in OFFERS.items():
                        served[mode, offer] = await _served(proxy, mode, callbacks)

    anyio.run(run)
    return shlex.split(command), served


@pytest.mark.parametrize("mode", [LEGACY, MODERN])
@pytest.mark.parametrize("offer", list(OFFERS))
def test_each_caller_is_listed_what_server_everything_lists_its_client_directly(
    everything: Any, mode: str, offer: str
) -> None:
    argv, served = everything
    direct = _direct(argv, OFFERS[offer])
    assert served[mode, offer] == direct
    if offer != "all":  # the probe found the tools that need something: they are not all
        assert served[mode, offer] < served[mode, "all"]


def test_an_http_upstream_is_probed_in_sessions_of_its_own_as_a_command_is(tickets: str) -> None:
    """server-everything over streamable HTTP: each caller is listed what the official client
    offering as much is listed by the server directly."""
    proxy = _proxy(url=tickets)
    served: dict[str, set[str]] = {}
    direct: dict[str, set[str]] = {}

    async def run() -> None:
        with anyio.fail_after(DEADLINE_S):
            async with proxy.lifespan():
                for offer, callbacks in OFFERS.items():
                    served[offer] = await _served(proxy, LEGACY, callbacks)
            for offer, callbacks in OFFERS.items():
                async with (
                    httpx2.AsyncClient(timeout=DEADLINE_S) as http,
                    Client(
                        streamable_http_client(tickets, http_client=http),
                        mode=LEGACY,
                        **callbacks,
                    ) as client,
                ):
                    direct[offer] = {tool.name for tool in (await client.list_tools()).tools}

    anyio.run(run)
    assert served == direct
    assert served["none"] < served["sampling"] < served["all"]


def test_a_tool_that_needs_two_capabilities_is_listed_only_to_a_client_offering_both() -> None:
    proxy = _proxy(shlex.join(ASKING))
    seen: dict[str, set[str]] = {}

    async def run() -> None:
        with anyio.fail_after(DEADLINE_S):
            async with proxy.lifespan():
                for name, callbacks in {
                    "none": NONE,
                    "sampling": SAMPLING,
                    "sampling and roots": SAMPLING_AND_ROOTS,
                    "all": ALL_CALLBACKS,
                }.items():
                    seen[name] = await _served(proxy, LEGACY, callbacks)

    anyio.run(run)
    assert seen == {
        "none": {"plain"},
        "sampling": {"plain", "sample"},
        "sampling and roots": {"plain", "sample", "sample_in_roots"},
        "all": {"plain", "sample", "ask", "sample_in_roots"},
    }
    for name, callbacks in {"none": NONE, "sampling": SAMPLING}.items():
        assert _direct(ASKING, callbacks) == seen[name]


def test_an_upstream_that_hangs_a_probing_session_is_served_with_every_tool_listed_to_all(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Past PROBE_S the probe gives up: the upstream is served as before strictcall probed,
    each tool listed to every caller, and its log says so once."""
    monkeypatch.setattr(upstream_module, "PROBE_S", 1.0)
    proxy = _proxy(shlex.join([*ASKING, "--hang-offering-none"]))
    assert _listed_offering_none(proxy) == {"plain", "sample", "ask", "sample_in_roots"}
    assert proxy.upstream.asks == {}


def _listed_over_http(url: str, token: str, mode: str, callbacks: Mapping[str, Any]) -> set[str]:
    async def run() -> set[str]:
        with anyio.fail_after(DEADLINE_S):
            headers = {"Authorization": f"Bearer {token}"}
            async with (
                httpx2.AsyncClient(headers=headers, timeout=DEADLINE_S) as http,
                Client(
                    streamable_http_client(url, http_client=http), mode=mode, **callbacks
                ) as client,
            ):
                return {tool.name for tool in (await client.list_tools()).tools}

    return anyio.run(run)


def _listed_on_rpc(base_url: str, token: str) -> set[str]:
    """The names a tools/list on /rpc answers (/rpc carries no request of the server's)."""
    answer = httpx2.post(
        f"{base_url}/rpc",
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        headers={"Authorization": f"Bearer {token}"},
        timeout=DEADLINE_S,
    ).json()
    return {tool["name"] for tool in answer["result"]["tools"]}


def test_over_http_a_caller_is_listed_what_it_can_be_asked(tmp_path: Any) -> None:
    """/mcp on 2026-07-28 lists by the envelope's capabilities (its caller is asked in
    rounds); /mcp on 2025-11-25 and /rpc carry no request of the server's: they list what
    needs nothing."""
    db = tmp_path / "audit.sqlite3"
    token = create_token(db, "u1")
    server = start_server(db, "--upstream-cmd", shlex.join(ASKING), command="proxy")
    try:
        mcp = f"{server.base_url}/mcp"
        modern = {name: _listed_over_http(mcp, token, MODERN, c) for name, c in OFFERS.items()}
        legacy = _listed_over_http(mcp, token, LEGACY, ALL_CALLBACKS)
        rpc = _listed_on_rpc(server.base_url, token)
    finally:
        server.stop()
    assert modern == {
        "none": {"plain"},
        "sampling": {"plain", "sample"},
        "all": {"plain", "sample", "ask", "sample_in_roots"},
    }
    assert legacy == {"plain"}
    assert rpc == {"plain"}


# --- probing off: every tool listed to every caller, no session more --------------------------


def test_with_probing_off_every_tool_is_listed_to_all_and_the_upstream_started_once(
    tmp_path: Any,
) -> None:
    pids = tmp_path / "pids"
    proxy = _proxy(_recorded(ASKING, pids))
    proxy.upstream.probes_asks = False
    assert _listed_offering_none(proxy) == {"plain", "sample", "ask", "sample_in_roots"}
    assert len(pids.read_text().split()) == 1


def test_probing_on_starts_the_upstream_again_only_to_list_it(tmp_path: Any) -> None:
    """The probing processes are started and gone by the time the proxy serves; the running
    one is the first."""
    pids = tmp_path / "pids"
    proxy = _proxy(_recorded(ASKING, pids))
    seen: dict[str, int] = {}

    async def run() -> None:
        with anyio.fail_after(DEADLINE_S):
            async with proxy.lifespan():
                seen["launched"] = len(pids.read_text().split())
                await _served(proxy, LEGACY, NONE)
                seen["after a listing"] = len(pids.read_text().split())

    anyio.run(run)
    assert seen["launched"] == 1 + 1 + 3  # the running one, one offering nothing, three at once
    assert seen["after a listing"] == seen["launched"]  # a listing probes nothing


def test_the_proxys_no_probe_flag_lists_every_tool_to_every_caller(tmp_path: Any) -> None:
    db = tmp_path / "audit.sqlite3"
    token = create_token(db, "u1")
    server = start_server(db, "--upstream-cmd", shlex.join(ASKING), "--no-probe", command="proxy")
    try:
        rpc = _listed_on_rpc(server.base_url, token)
    finally:
        server.stop()
    assert rpc == {"plain", "sample", "ask", "sample_in_roots"}


def test_a_federations_upstream_probes_unless_its_config_says_probe_false() -> None:
    config = federation_config(
        {"upstreams": {"a": {"command": "a"}, "b": {"command": "b", "probe": False}}}
    )
    a, b = (Member(member, print, io.StringIO(), print) for member in config.upstreams)
    assert (a.upstream.probes_asks, b.upstream.probes_asks) == (True, False)
    for wrong in ("false", 0, None):
        with pytest.raises(ConfigError):
            federation_config({"upstreams": {"a": {"command": "a", "probe": wrong}}})
