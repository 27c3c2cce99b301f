"""Eight real MCP servers (tests/real_servers.py) called directly and through `strictcall
federate`, with the official Python client: every tool's listing and the answers of two or
three calls of each are the upstream's own but for the documented changes
(`real_servers.through_listing`, `through_result`), on all four pairings of
downstream (stdio, /mcp) and wire version (2025-11-25, 2026-07-28).

One federation process per pairing serves all eight (a pairing's calls change its upstreams'
state, so each has its own); everything is gathered once per module.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Final

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp.client.client import Client
from mcp.client.session import ClientRequestContext
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from real_servers import (
    DEADLINE_S,
    NAMES,
    PREFIXES,
    Place,
    calls,
    compared_answers,
    expected_listings,
    http_federation,
    make_place,
    notes_server,
    page_server,
    require_servers,
    served_names,
    stdio_federate_argv,
    stdio_upstreams,
    upstream_env,
)

HANDSHAKE: Final = "2025-11-25"
MODERN: Final = "2026-07-28"
READ_AS: Final = {"isError": False, "resultType": "complete"}
"""What the Python client's result model writes where the wire has no such member."""


def dumped(model: Any) -> dict[str, Any]:
    out: dict[str, Any] = model.model_dump(by_alias=True, mode="json", exclude_none=True)
    return out


async def answer_of(client: Client, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """A call's result as JSON, or what the client raised reading it (its kind)."""
    try:
        return dumped(await client.call_tool(name, arguments))
    except (RuntimeError, ValueError) as exc:  # the client's own checks of the result
        return {"client raised": type(exc).__name__}


@dataclass
class Run:
    """What one run saw: each tool's listing and each call's answer, by prefix."""

    place: Place
    version: str = ""
    listings: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    answers: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    served: list[str] = field(default_factory=list)


async def collect(client: Client, run: Run, page: str, names: dict[str, str] | None = None) -> None:
    """List and call through one session: `names` maps a prefix to its served-name prefix."""
    run.version = client.protocol_version or ""
    listed = [dumped(tool) for tool in (await client.list_tools()).tools]
    run.served = [tool["name"] for tool in listed]
    for prefix, sequence in calls(run.place, page).items():
        if names is None:
            if prefix not in run.listings:
                continue
            served = ""
        else:
            served = names[prefix]
            run.listings[prefix] = {
                tool["name"][len(served) :]: tool
                for tool in listed
                if tool["name"].startswith(served)
            }
        answers = run.answers.setdefault(prefix, [])
        for name, arguments in sequence:
            answers.append(await answer_of(client, served + name, arguments))


async def _no_sampling(
    context: ClientRequestContext, params: types.CreateMessageRequestParams
) -> types.ErrorData:
    """The direct client's answer to an upstream's sampling request (none is made here)."""
    return _NOT_OFFERED


async def _no_elicitation(
    context: ClientRequestContext, params: types.ElicitRequestParams
) -> types.ErrorData:
    """The direct client's answer to an upstream's elicitation request."""
    return _NOT_OFFERED


async def _no_roots(context: ClientRequestContext) -> types.ErrorData:
    """The direct client's answer to an upstream's roots/list request."""
    return _NOT_OFFERED


_NOT_OFFERED: Final = types.ErrorData(code=types.INVALID_REQUEST, message="not offered here")


def session(params: StdioServerParameters, mode: str) -> Client:
    """A direct client offering what strictcall offers its upstreams (sampling, elicitation,
    roots): servers such as server-everything list the tools that need them only then."""
    return Client(
        stdio_client(params),
        mode=mode,
        read_timeout_seconds=DEADLINE_S,
        sampling_callback=_no_sampling,
        elicitation_callback=_no_elicitation,
        list_roots_callback=_no_roots,
    )


async def direct_run(run: Run, page: str, notes_url: str) -> None:
    """Each server on its own, with the official client (2025-11-25)."""
    base_env = {"PATH": os.environ["PATH"], "HOME": str(run.place.base)}
    for prefix, argv in stdio_upstreams(run.place).items():
        params = StdioServerParameters(
            command=argv[0], args=argv[1:], env={**base_env, **upstream_env(prefix, run.place)}
        )
        async with session(params, "legacy") as client:
            run.listings[prefix] = {
                tool.name: dumped(tool) for tool in (await client.list_tools()).tools
            }
            sequence = calls(run.place, page)[prefix]
            run.answers[prefix] = [
                await answer_of(client, name, arguments) for name, arguments in sequence
            ]
    async with (
        httpx2.AsyncClient(timeout=DEADLINE_S) as http,
        Client(streamable_http_client(notes_url, http_client=http), mode="legacy") as client,
    ):
        run.listings["notes"] = {
            tool.name: dumped(tool) for tool in (await client.list_tools()).tools
        }
        run.answers["notes"] = [
            await answer_of(client, name, arguments)
            for name, arguments in calls(run.place, page)["notes"]
        ]


@dataclass
class World:
    direct: Run
    stdio: Run
    http: Run
    stdio_modern: Run
    """The stdio downstream on 2026-07-28 (its own place: the calls change their upstreams)."""
    http_legacy: Run
    """The /mcp downstream on 2025-11-25 (its own federation and place, for the same reason)."""
    versions: dict[tuple[str, str], tuple[str, list[str]]]
    """(downstream, mode) -> the negotiated version and the served names listed."""


def http_client(url: str, token: str, mode: str) -> AbstractAsyncContextManager[Client]:
    @asynccontextmanager
    async def opened() -> AsyncIterator[Client]:
        headers = {"Authorization": f"Bearer {token}"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=DEADLINE_S) as http,
            Client(
                streamable_http_client(url, http_client=http),
                mode=mode,
                read_timeout_seconds=DEADLINE_S,
                sampling_callback=_no_sampling,  # offered as the direct client offers them
                elicitation_callback=_no_elicitation,
                list_roots_callback=_no_roots,
            ) as client,
        ):
            yield client

    return opened()


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    require_servers()
    tmp = tmp_path_factory.mktemp("real-servers")
    with notes_server() as notes_url, page_server() as page:
        direct = Run(make_place(tmp / "direct"))
        stdio = Run(make_place(tmp / "stdio"))
        http = Run(make_place(tmp / "http"))
        stdio_modern = Run(make_place(tmp / "stdio-modern"))
        http_legacy = Run(make_place(tmp / "http-legacy"))
        versions: dict[tuple[str, str], tuple[str, list[str]]] = {}

        async def gather() -> None:
            with anyio.fail_after(DEADLINE_S * 4):
                await direct_run(direct, page, notes_url)
                for run, mode in ((stdio, "legacy"), (stdio_modern, "auto")):
                    argv = stdio_federate_argv(run.place, notes_url)
                    params = StdioServerParameters(
                        command=argv[0], args=argv[1:], env=dict(os.environ)
                    )
                    async with session(params, mode) as client:
                        await collect(client, run, page, NAMES)
                for run, mode in ((http, "auto"), (http_legacy, "legacy")):
                    with http_federation(run.place, notes_url) as (url, token):
                        async with http_client(url, token, mode) as client:
                            await collect(client, run, page, NAMES)
                for key, run in (
                    (("stdio", "legacy"), stdio),
                    (("stdio", "auto"), stdio_modern),
                    (("http", "auto"), http),
                    (("http", "legacy"), http_legacy),
                ):
                    versions[key] = (run.version, run.served)

        anyio.run(gather)
        yield World(direct, stdio, http, stdio_modern, http_legacy, versions)


@pytest.mark.parametrize("prefix", PREFIXES)
@pytest.mark.parametrize("wire", ["stdio", "http", "stdio_modern", "http_legacy"])
def test_every_tool_is_listed_as_its_upstream_lists_it(
    world: World, prefix: str, wire: str
) -> None:
    through = getattr(world, wire).listings[prefix]
    # /mcp at 2025-11-25 never asks its caller anything (`real_servers.ASKING`)
    expected = expected_listings(prefix, world.direct.listings[prefix], wire != "http_legacy")
    assert sorted(through) == sorted(expected)
    for name in expected:
        assert through[name] == expected[name], name


@pytest.mark.parametrize("prefix", PREFIXES)
@pytest.mark.parametrize("wire", ["stdio", "http", "stdio_modern", "http_legacy"])
def test_every_call_answers_as_its_upstream_answers(world: World, prefix: str, wire: str) -> None:
    run: Run = getattr(world, wire)
    direct = (world.direct.place, world.direct.answers[prefix])
    for name, expected, got in compared_answers(
        prefix, direct, (run.place, run.answers[prefix]), run.version, READ_AS
    ):
        assert got == expected, name


@pytest.mark.parametrize(
    ("wire", "mode", "version"),
    [
        ("stdio", "legacy", HANDSHAKE),
        ("stdio", "auto", MODERN),
        ("http", "legacy", HANDSHAKE),
        ("http", "auto", MODERN),
    ],
)
def test_hosts_on_both_wire_versions_get_the_same_tools(
    world: World, wire: str, mode: str, version: str
) -> None:
    negotiated, names = world.versions[(wire, mode)]
    assert negotiated == version
    asked = (wire, mode) != ("http", "legacy")
    assert sorted(names) == served_names(world.direct.listings, asked)
