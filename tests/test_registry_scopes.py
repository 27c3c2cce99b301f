"""The registry's scoped view (`ToolRegistry.require_scopes`): a caller's claims decide what
tools/list shows it exactly as they decide what it may call, each scope set with its own kept
listing, an empty set of scopes (falsy) apart from no claims at all (strictcall's own token),
and with a policy on top."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from strictcall import Gateway, Tool, ToolContext
from strictcall.core.policy import PolicyHolder, parse_policy
from strictcall.core.policy.model import scope_claims
from strictcall.errors import UNKNOWN_TOOL, JSONValue

TOOLS = ["read_note", "create_note", "delete_note", "count_notes"]
NEEDS = {"create_note": ("notes:write",), "delete_note": ("notes:write", "notes:admin")}


def _tool(name: str) -> Tool:
    def handler(ctx: ToolContext, args: dict[str, JSONValue]) -> JSONValue:
        return name

    return Tool(
        name=name,
        description=f"{name}.",
        input_schema={"type": "object"},
        output_schema={"type": "string"},
        handler=handler,
    )


def scoped(**more: Any) -> Gateway:
    gw = Gateway([_tool(name) for name in TOOLS], **more)
    gw.require_scopes(NEEDS)
    return gw


def listed(gw: Gateway, identity: str, claims: frozenset[str] | None) -> list[str]:
    return sorted(entry["name"] for entry in gw.listing(identity, "mcp", claims))


def test_each_scope_set_lists_its_own_tools_and_no_claims_lists_every_tool() -> None:
    gw = scoped()
    read, write = scope_claims(["notes:read"]), scope_claims(["notes:read", "notes:write"])
    admin = scope_claims(["notes:write", "notes:admin"])
    for _ in range(2):  # the second time from the kept listings: the same
        assert listed(gw, "u1", read) == ["count_notes", "read_note"]
        assert listed(gw, "u1", write) == ["count_notes", "create_note", "read_note"]
        assert listed(gw, "u1", admin) == sorted(TOOLS)
        assert listed(gw, "u1", frozenset()) == ["count_notes", "read_note"]  # falsy, not absent
        assert listed(gw, "u1", None) == sorted(TOOLS)  # strictcall's own token


def test_a_tool_its_scopes_hide_is_answered_like_a_missing_one_with_its_own_available() -> None:
    gw = scoped()
    read = scope_claims(["notes:read"])
    outcome = gw.settle({"name": "create_note", "arguments": {}}, "u1", "c1", claims=read)
    error = outcome.answer["error"]
    assert type(error) is dict
    assert (error["code"], error["stage"]) == (UNKNOWN_TOOL.code, UNKNOWN_TOOL.stage.value)
    assert error["available"] == ["count_notes", "read_note"]
    allowed = gw.settle({"name": "read_note", "arguments": {}}, "u1", "c2", claims=read)
    assert allowed.answer == {"ok": True, "call_id": "c2", "result": "read_note"}
    own = gw.settle({"name": "create_note", "arguments": {}}, "u1", "c3")
    assert own.answer["ok"] is True


def test_new_scopes_and_new_tools_are_never_answered_from_an_old_listing() -> None:
    gw = scoped()
    read = scope_claims(["notes:read"])
    assert listed(gw, "u1", read) == ["count_notes", "read_note"]
    gw.require_scopes({"read_note": ("notes:secret",)})
    assert listed(gw, "u1", read) == ["count_notes", "create_note", "delete_note"]
    gw.replace_tools([_tool("read_note"), _tool("create_note")])
    assert listed(gw, "u1", read) == ["create_note"]


def test_scopes_narrow_what_a_policy_grants() -> None:
    policy = parse_policy(
        '[[rule]]\nname = "writers"\nwho = ["scope:notes:write"]\ntools = ["*"]\n'
        '[[rule]]\nname = "u1"\nwho = ["u1"]\ntools = ["read_note", "create_note"]\n'
    )
    gw = scoped(policy=PolicyHolder(policy))
    assert listed(gw, "u1", scope_claims(["notes:read"])) == ["read_note"]
    assert listed(gw, "u1", None) == ["create_note", "read_note"]
    write = scope_claims(["notes:write"])
    assert listed(gw, "u2", write) == ["count_notes", "create_note", "read_note"]
    assert listed(gw, "u2", None) == []


@given(
    scopes=st.none() | st.frozensets(st.sampled_from(["notes:read", "notes:write", "notes:admin"]))
)
@settings(max_examples=50, deadline=None)
def test_the_listing_and_the_call_agree_for_any_scope_set(scopes: frozenset[str] | None) -> None:
    gw = scoped()
    claims = None if scopes is None else scope_claims(scopes)
    shown = listed(gw, "u1", claims)
    for name in TOOLS:
        outcome = gw.settle({"name": name, "arguments": {}}, "u1", "c1", claims=claims)
        assert (outcome.answer["ok"] is True) == (name in shown)
