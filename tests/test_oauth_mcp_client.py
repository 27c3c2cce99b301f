"""The official MCP Python client's OAuth support (`ClientCredentialsOAuthProvider`) against a
real `strictcall serve` behind a real OpenID provider: from the 401 challenge it finds the
protected resource metadata, from there the provider, gets a token for the server's resource
by the client-credentials grant, lists the tools that token may call and calls tools with it;
a tool its token's scope does not cover is refused 403 insufficient_scope (and the client steps
up)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp.client.auth import TokenStorage
from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

from oauth_deploy import Deployment
from oidc_provider import CLIENT_ID, CLIENT_SECRET
from servers import recent_audit
from strictcall.errors import INSUFFICIENT_SCOPE

DEADLINE_S = 30


class MemoryStorage(TokenStorage):
    """The client's tokens, in memory."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


@pytest.fixture
def deployment(tmp_path: Path) -> Iterator[Deployment]:
    running = Deployment(tmp_path)
    try:
        running.provider.start()
        running.start_server()
        yield running
    finally:
        running.close()


def test_the_mcp_client_discovers_the_provider_from_the_challenge_and_calls_tools(
    deployment: Deployment,
) -> None:
    storage = MemoryStorage()
    results: dict[str, object] = {}

    async def session() -> None:
        auth = ClientCredentialsOAuthProvider(
            server_url=deployment.resource + "/mcp",
            storage=storage,
            client_id=CLIENT_ID,
            client_secret=CLIENT_SECRET,
            token_endpoint_auth_method="client_secret_post",
            scope="notes:read notes:write",
            issuer=deployment.provider.issuer,
        )
        with anyio.fail_after(DEADLINE_S):
            async with httpx2.AsyncClient(auth=auth, timeout=DEADLINE_S) as http:
                transport = streamable_http_client(deployment.resource + "/mcp", http_client=http)
                async with Client(transport, mode="legacy") as client:
                    listed = await client.list_tools()
                    results["tools"] = sorted(tool.name for tool in listed.tools)
                    # a 403 insufficient_scope: the client steps up to the scopes it names
                    created = await client.call_tool("create_note", {"text": "via oauth"})
                    results["created"] = created.is_error
                    counted = await client.call_tool("count_notes", {})
                    results["count"] = counted.structured_content
                    relisted = await client.list_tools()
                    results["tools after"] = sorted(tool.name for tool in relisted.tools)

    anyio.run(session)
    assert storage.tokens is not None  # it went through the provider
    assert storage.tokens.access_token.count(".") == 2
    assert results == {
        # the challenge asks for notes:read (every call's scope): the first token's listing
        # holds what notes:read may call, and the token stepped up to notes:write lists all
        "tools": ["count_notes", "list_notes", "read_note"],
        "created": False,
        "count": {"result": 1},
        "tools after": ["count_notes", "create_note", "delete_note", "list_notes", "read_note"],
    }
    audit = recent_audit(deployment.db, 5, lambda r: any(x.tool == "count_notes" for x in r))
    assert {r.identity for r in audit if r.tool in ("create_note", "count_notes")} == {
        "oauth:agent"
    }


def test_the_mcp_client_with_a_read_only_token_is_refused_a_write_with_insufficient_scope(
    deployment: Deployment,
) -> None:
    statuses: list[int] = []

    async def session() -> None:
        auth = ClientCredentialsOAuthProvider(
            server_url=deployment.resource + "/mcp",
            storage=MemoryStorage(),
            client_id=CLIENT_ID,
            client_secret=CLIENT_SECRET,
            token_endpoint_auth_method="client_secret_post",
            scope="notes:read",
            issuer=deployment.provider.issuer,
        )

        async def seen(response: httpx2.Response) -> None:
            statuses.append(response.status_code)

        with anyio.fail_after(DEADLINE_S):
            async with httpx2.AsyncClient(
                auth=auth, timeout=DEADLINE_S, event_hooks={"response": [seen]}
            ) as http:
                transport = streamable_http_client(deployment.resource + "/mcp", http_client=http)
                async with Client(transport, mode="legacy") as client:
                    counted = await client.call_tool("count_notes", {})
                    assert counted.structured_content == {"result": 0}
                    # the SDK tries a step-up on the 403 (and may raise when it cannot):
                    # what matters here is the server's answer, seen by the response hook
                    with contextlib.suppress(Exception):
                        await client.call_tool("create_note", {"text": "no"})

    anyio.run(session)
    assert 403 in statuses
    audit = recent_audit(
        deployment.db, 10, lambda r: any(x.code == INSUFFICIENT_SCOPE.code for x in r)
    )
    assert any(r.code == INSUFFICIENT_SCOPE.code and r.tool == "create_note" for r in audit)
