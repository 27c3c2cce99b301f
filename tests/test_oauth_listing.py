"""A provider's token sees exactly the tools it may call (issues #26 and #27): tools/list leaves
out the tools whose scopes the token lacks, as admission refuses their calls 403
insufficient_scope, on /rpc and on /mcp (both wire versions, strictcall's own path and the
SDK's), and through a proxy; tools that need no scope stay listed; strictcall's own tokens see
every tool. A policy rule naming `scope:S` applies to a token with that scope, and one naming an
identity to the provider's subject, one naming `group:G` to a token whose configured groups
claim names G. Against a real OpenID provider (tests/oidc_provider.py) and real servers."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from oauth_deploy import MCP_HEADERS, Deployment, refused, rpc, tool_call, write_config
from servers import create_token, recent_audit
from strictcall.errors import INSUFFICIENT_SCOPE, UNKNOWN_TOOL
from test_oauth_proxy import Gateway

DEADLINE_S = 30.0
MODERN = "2026-07-28"
ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientInfo": {"name": "listing-test", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}
EVERY_TOOL = ["count_notes", "create_note", "delete_note", "list_notes", "read_note"]
READABLE = ["count_notes", "list_notes", "read_note"]
"""What a notes:read token may call: create_note and delete_note need notes:write
(test_oauth.write_config's tool_scopes)."""


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    running = Deployment(tmp_path_factory.mktemp("oauth-listing"))
    try:
        running.provider.start()
        running.start_server()
        yield running
    finally:
        running.close()


def listed_on_rpc(base_url: str, token: str) -> list[str]:
    answer = rpc(base_url, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, token)
    assert answer.status_code == 200, answer.text
    return sorted(tool["name"] for tool in answer.json()["result"]["tools"])


MCP_LISTS = {
    "2025-11-25 direct": ({}, {}),
    "2025-11-25 sdk": ({"cursor": "x"}, {}),  # a cursor is the SDK's to answer
    "2026-07-28 direct": (
        {"_meta": ENVELOPE},
        {"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/list"},
    ),
    "2026-07-28 sdk": (
        {"_meta": ENVELOPE, "cursor": "x"},
        {"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/list"},
    ),
}


def listed_on_mcp(base_url: str, token: str, form: str) -> list[str]:
    params, headers = MCP_LISTS[form]
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": 7, "method": "tools/list"}
    if params:
        message["params"] = params
    answer = httpx.post(
        base_url + "/mcp",
        content=json.dumps(message),
        headers={**MCP_HEADERS, **headers, "Authorization": f"Bearer {token}"},
        timeout=DEADLINE_S,
    )
    assert answer.status_code == 200, answer.text
    return sorted(tool["name"] for tool in answer.json()["result"]["tools"])


def called_with_scope_refused(base_url: str, token: str) -> list[str]:
    """The tools whose calls (with no arguments: refused at shape at worst, nothing written)
    are refused 403 insufficient_scope to `token`."""
    refused_tools = []
    for name in EVERY_TOOL:
        answer = rpc(base_url, tool_call(name, {}), token)
        if answer.status_code == 403:
            refused(answer, 403, INSUFFICIENT_SCOPE)
            refused_tools.append(name)
        else:
            assert answer.status_code == 200, answer.text
    return refused_tools


def test_rpc_lists_a_token_exactly_the_tools_its_scopes_let_it_call(
    deployment: Deployment,
) -> None:
    assert deployment.server is not None
    base = deployment.server.base_url
    reader = deployment.provider.token(deployment.resource, "notes:read")
    writer = deployment.provider.token(deployment.resource, "notes:read notes:write")
    assert listed_on_rpc(base, reader) == READABLE
    assert called_with_scope_refused(base, reader) == ["create_note", "delete_note"]
    assert listed_on_rpc(base, writer) == EVERY_TOOL
    assert called_with_scope_refused(base, writer) == []


@pytest.mark.parametrize("form", sorted(MCP_LISTS))
def test_mcp_tools_list_shows_a_token_only_what_its_scopes_cover_on_both_wire_versions(
    deployment: Deployment, form: str
) -> None:
    assert deployment.server is not None
    base = deployment.server.base_url
    reader = deployment.provider.token(deployment.resource, "notes:read")
    writer = deployment.provider.token(deployment.resource, "notes:read notes:write")
    assert listed_on_mcp(base, reader, form) == READABLE
    assert listed_on_mcp(base, writer, form) == EVERY_TOOL
    # a listing kept for one scope set is never another's: the reader's again after the writer's
    assert listed_on_mcp(base, reader, form) == READABLE


def test_strictcalls_own_token_holds_no_tool_scope_and_lists_only_the_unscoped_tools(
    deployment: Deployment,
) -> None:
    assert deployment.server is not None
    base = deployment.server.base_url
    reader = deployment.provider.token(deployment.resource, "notes:read")
    assert listed_on_rpc(base, reader) == READABLE
    own = create_token(deployment.db, "agent")  # the same name as the provider's subject
    assert listed_on_rpc(base, own) == READABLE  # own_token_scopes: none by default
    assert listed_on_mcp(base, own, "2025-11-25 direct") == READABLE
    assert called_with_scope_refused(base, own) == ["create_note", "delete_note"]
    assert listed_on_rpc(base, reader) == READABLE


def write_policy(path: Path) -> Path:
    path.write_text(
        "\n".join(
            [
                "[[rule]]",
                'name = "writers"',
                'who = ["scope:notes:write"]',
                'tools = ["*"]',
                "[[rule]]",
                'name = "the-agent"',
                'who = ["oauth:agent"]',
                'tools = ["count_notes"]',
            ]
        )
        + "\n"
    )
    return path


@pytest.fixture(scope="module")
def with_policy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    tmp = tmp_path_factory.mktemp("oauth-policy")
    running = Deployment(tmp)
    try:
        running.provider.start()
        running.start_server("--policy", str(write_policy(tmp / "policy.toml")))
        yield running
    finally:
        running.close()


def test_a_policy_names_a_providers_token_by_its_scope_and_by_its_subject(
    with_policy: Deployment,
) -> None:
    assert with_policy.server is not None
    base = with_policy.server.base_url
    writer = with_policy.provider.token(with_policy.resource, "notes:read notes:write")
    reader = with_policy.provider.token(with_policy.resource, "notes:read")
    # the rule naming scope:notes:write grants the writer every tool
    assert listed_on_rpc(base, writer) == EVERY_TOOL
    for form in sorted(MCP_LISTS):
        assert listed_on_mcp(base, writer, form) == EVERY_TOOL, form
    created = rpc(base, tool_call("create_note", {"text": "by scope"}), writer)
    assert created.status_code == 200 and "result" in created.json(), created.text
    audit = recent_audit(with_policy.db, 5, lambda r: any(x.tool == "create_note" for x in r))
    assert {r.identity for r in audit if r.tool == "create_note"} == {"oauth:agent"}
    # the reader has no notes:write: only the rule naming its subject, "oauth:agent", applies
    assert listed_on_rpc(base, reader) == ["count_notes"]
    for form in sorted(MCP_LISTS):
        assert listed_on_mcp(base, reader, form) == ["count_notes"], form
    assert rpc(base, tool_call("count_notes", {}), reader).json()["result"] >= 1
    hidden = rpc(base, tool_call("list_notes", {}), reader)
    assert hidden.status_code == 200
    assert hidden.json()["error"]["data"]["code"] == UNKNOWN_TOOL.code
    # strictcall's own token for the subject's bare name is another caller: no rule names it
    own = create_token(with_policy.db, "agent")
    assert listed_on_rpc(base, own) == []


def test_a_policy_names_a_providers_token_by_its_group_claim(tmp_path: Path) -> None:
    """A token naming the group (in the configured `groups_claim`) is granted what a rule for
    `group:NAME` grants; without the claim configured, or for another group, it is not. The
    tokens are signed with the provider's own key (published in its JWKS), as the provider's
    client-credentials tokens carry no groups."""
    running = Deployment(tmp_path)
    write_config(
        running.config,
        running.provider.issuer,
        running.resource,
        groups_claim='"groups"',
    )
    policy = tmp_path / "groups.toml"
    policy.write_text(
        '[[rule]]\nname = "support"\nwho = ["group:support"]\ntools = ["*"]\n'
        '[[rule]]\nname = "others"\nwho = ["*"]\ntools = ["count_notes"]\n'
    )

    def signed(groups: object) -> str:
        now = int(time.time())
        claims = {"iss": running.provider.issuer, "aud": running.resource, "sub": "helper",
                  "scope": "notes:read notes:write", "iat": now, "exp": now + 300}  # fmt: skip
        if groups is not None:
            claims["groups"] = groups
        return running.key.sign(claims)

    try:
        running.provider.start()
        running.start_server("--policy", str(policy))
        assert running.server is not None
        base = running.server.base_url
        for groups in (["support", "sales"], "sales support"):
            token = signed(groups)
            assert listed_on_rpc(base, token) == EVERY_TOOL
            assert listed_on_mcp(base, token, "2026-07-28 direct") == EVERY_TOOL
            assert listed_on_mcp(base, token, "2025-11-25 sdk") == EVERY_TOOL
        refused_groups: list[object] = [["sales"], [], None, ["Support"], ["group:support"], 7]
        for other in refused_groups:
            assert listed_on_rpc(base, signed(other)) == ["count_notes"], other
    finally:
        running.close()


@pytest.fixture
def proxied(tmp_path: Path) -> Iterator[Gateway]:
    running = Gateway(tmp_path)
    try:
        running.start()
        yield running
    finally:
        running.close()


def test_a_proxy_over_http_lists_a_token_only_the_tools_its_scopes_let_it_call(
    proxied: Gateway,
) -> None:
    own = create_token(proxied.upstream_db, "proxy-svc")
    base = proxied.start_proxy("--upstream-header", f"Authorization: Bearer {own}")
    reader = proxied.provider.token(proxied.proxy_resource, "notes:read")
    writer = proxied.provider.token(proxied.proxy_resource, "notes:read notes:write")
    assert listed_on_rpc(base, reader) == READABLE
    assert listed_on_mcp(base, reader, "2025-11-25 direct") == READABLE
    assert listed_on_mcp(base, reader, "2026-07-28 sdk") == READABLE
    assert called_with_scope_refused(base, reader) == ["create_note", "delete_note"]
    assert listed_on_rpc(base, writer) == EVERY_TOOL
