"""What an audit record keeps of an error's pointer (`Gateway.audit_pointer`): member names the
call envelope or the tool's schema declares, "*" for any other name (the model's own text),
array indexes; and the pointer a real refusal carries comes out so."""

from __future__ import annotations

import pytest

from strictcall import Gateway, Tool, ToolContext
from strictcall.core.record import AUDIT_POINTER_MAX
from strictcall.errors import JSONValue


def _echo(ctx: ToolContext, args: dict[str, JSONValue]) -> JSONValue:
    return None


PROFILE = Tool(
    name="update_profile",
    description="Update a profile.",
    input_schema={
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "address": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "a/b~c": {"type": "string"}},
            },
            "labels": {"type": "object", "additionalProperties": {"type": "integer"}},
        },
        "required": ["name"],
    },
    output_schema={"type": "null"},
    handler=_echo,
)


@pytest.fixture(scope="module")
def gateway() -> Gateway:
    return Gateway([PROFILE])


@pytest.mark.parametrize(
    ("pointer", "kept"),
    [
        ("/arguments/name", "/arguments/name"),
        ("/arguments/address/city", "/arguments/address/city"),
        ("/arguments/address/a~1b~0c", "/arguments/address/a~1b~0c"),
        ("/arguments/tags/12", "/arguments/tags/12"),
        ("/arguments/SECRET-1234", "/arguments/*"),
        ("/arguments/labels/my secret key", "/arguments/labels/*"),
        ("/arguments/tags/012", "/arguments/tags/*"),
        ("/arguments/tags/99999999999", "/arguments/tags/*"),
        ("/extra", "/*"),
        ("/", "/*"),
    ],
)
def test_a_pointer_keeps_declared_names_and_indexes_only(
    gateway: Gateway, pointer: str, kept: str
) -> None:
    error = {"code": "invalid_arguments", "pointer": pointer}
    assert gateway.audit_pointer("update_profile", error) == kept


def test_a_call_naming_no_tool_keeps_only_the_envelope_names(gateway: Gateway) -> None:
    assert gateway.audit_pointer(None, {"pointer": "/arguments/x"}) == "/arguments/*"
    assert gateway.audit_pointer("nope", {"pointer": "/name"}) == "/name"


@pytest.mark.parametrize("error", [None, {}, {"pointer": ""}, {"pointer": 3}, {"pointer": "x"}])
def test_no_pointer_or_the_whole_call_is_kept_as_none(
    gateway: Gateway, error: dict[str, JSONValue] | None
) -> None:
    assert gateway.audit_pointer("update_profile", error) is None


def test_a_deep_pointer_is_cut_to_the_limit(gateway: Gateway) -> None:
    error = {"pointer": "/arguments" + "/tags" * 200}
    assert len(gateway.audit_pointer("update_profile", error) or "") == AUDIT_POINTER_MAX


def test_a_refusal_of_an_undeclared_member_is_kept_without_its_name(gateway: Gateway) -> None:
    answer = gateway.call(
        '{"name":"update_profile","arguments":{"name":"x","pw=hunter2":1}}', "u1", "c1"
    )
    assert answer["ok"] is False
    error = answer["error"]
    assert isinstance(error, dict)
    assert error["pointer"] == "/arguments/pw=hunter2"  # the agent is told where
    assert gateway.audit_pointer("update_profile", error) == "/arguments/*"  # the audit is not
