"""An upstream tool's outputSchema is its contract as JSON Schema 2020-12 writes it, and its
own clients read its results by it: through `strictcall proxy` (and so `federate`, whose
tools are the same) it is listed as declared and a result within it passes whole, members the
schema leaves open included; a result outside it (the upstream's own closed object, a wrong
type) is refused at stage output. The official Python client reads each through the proxy as
it reads it from the server directly."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from mcp_peers import UPSTREAMS
from stdio_peer import DEADLINE_S
from strictcall.errors import INVALID_TOOL_RESULT

UPSTREAM = UPSTREAMS / "open_output_upstream.py"
WITHIN = ("open_object", "named_members")
OUTSIDE = ("closed", "wrong_type")
RAISED = "the client raised"


def _run(params: StdioServerParameters, errlog: Path) -> dict[str, Any]:
    """Each tool's listed outputSchema and its call's (isError, structuredContent, first
    text), read by the official client."""

    async def run() -> dict[str, Any]:
        with errlog.open("w") as stderr, anyio.fail_after(DEADLINE_S):
            async with Client(stdio_client(params, errlog=stderr), mode="legacy") as client:
                listed = {t.name: t.output_schema for t in (await client.list_tools()).tools}
                answers: dict[str, object] = {}
                for name in (*WITHIN, *OUTSIDE):
                    try:
                        result = await client.call_tool(name, {})
                    except RuntimeError:  # the client's own check of the result against the schema
                        answers[name] = RAISED
                        continue
                    block = result.content[0] if result.content else None
                    text = block.text if isinstance(block, types.TextContent) else None
                    answers[name] = (result.is_error, result.structured_content, text)
                return {"listed": listed, "answers": answers}

    return anyio.run(run)


@pytest.fixture(scope="module")
def direct(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    params = StdioServerParameters(command=sys.executable, args=[str(UPSTREAM)])
    return _run(params, tmp_path_factory.mktemp("direct") / "stderr")


@pytest.fixture(scope="module")
def through(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("proxy")
    args = ["-m", "strictcall", "proxy", "--upstream-cmd", f"{sys.executable} {UPSTREAM}"]
    args += ["--sandbox", "none", "--stdio", "--identity", "u1", "--db", str(tmp / "a.sqlite3")]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return _run(StdioServerParameters(command=sys.executable, args=args, env=env), tmp / "stderr")


def test_each_output_schema_is_listed_as_the_upstream_declares_it(
    direct: dict[str, Any], through: dict[str, Any]
) -> None:
    assert through["listed"] == direct["listed"]
    assert through["listed"]["open_object"] == {"type": "object"}


@pytest.mark.parametrize("name", WITHIN)
def test_a_result_within_its_schema_passes_whole_members_left_open_included(
    name: str, direct: dict[str, Any], through: dict[str, Any]
) -> None:
    is_error, structured, _ = through["answers"][name]
    assert is_error is False
    assert structured == direct["answers"][name][1]
    assert structured is not None and len(structured) >= 2  # the member no schema names kept


@pytest.mark.parametrize("name", OUTSIDE)
def test_a_result_outside_its_own_schema_is_refused_at_stage_output(
    name: str, direct: dict[str, Any], through: dict[str, Any]
) -> None:
    assert direct["answers"][name] == RAISED  # the client refuses it read directly, too
    is_error, structured, text = through["answers"][name]
    assert is_error is True and structured is None
    error = json.loads(text)
    assert (error["code"], error["stage"]) == (INVALID_TOOL_RESULT.code, INVALID_TOOL_RESULT.stage)
