"""The MCP SDK's own protocol errors, as strictcall passes them on over stdio and HTTP: audited
like any refusal, and with nothing of the caller's text in them (the SDK's -32022 repeats the
requested protocol version, whatever its length)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import mcp_types as types
import pytest

from servers import create_token, recent_audit, start_server
from strictcall.core.refusals import protocol_refusal
from strictcall.errors import (
    INTERNAL_ERROR,
    INVALID_ARGUMENTS,
    INVALID_JSON,
    INVALID_REQUEST,
    UNKNOWN_METHOD,
)
from strictcall.transports.mcp.sdk_errors import MAX_DATA, MAX_MESSAGE, scrubbed

DEADLINE_S = 60
HUGE_VERSION = "v" * 5000
SERVE_STDIO = ("serve", "--mcp-stdio", "--identity", "u1")


def test_each_sdk_code_is_audited_as_the_closest_catalogue_kind() -> None:
    assert protocol_refusal(types.METHOD_NOT_FOUND).kind is UNKNOWN_METHOD
    assert protocol_refusal(types.INVALID_PARAMS).kind is INVALID_ARGUMENTS
    assert protocol_refusal(types.PARSE_ERROR).kind is INVALID_JSON
    assert protocol_refusal(types.INTERNAL_ERROR).kind is INTERNAL_ERROR
    assert protocol_refusal(0).kind is INTERNAL_ERROR
    for code in (types.INVALID_REQUEST, types.UNSUPPORTED_PROTOCOL_VERSION, types.HEADER_MISMATCH):
        assert protocol_refusal(code).kind is INVALID_REQUEST


@pytest.mark.parametrize(
    ("error", "clean"),
    [
        (
            {
                "code": -32022,
                "message": "m",
                "data": {"supported": ["2026-07-28"], "requested": "x" * 99},
            },
            {
                "code": -32022,
                "message": "m",
                "data": {"supported": ["2026-07-28"], "requested": ""},
            },
        ),
        (
            {"code": -32022, "message": "m", "data": {"supported": [], "requested": "2025-11-25"}},
            {"code": -32022, "message": "m", "data": {"supported": [], "requested": "2025-11-25"}},
        ),
        (
            {"code": -32601, "message": "Method not found", "data": "nope" * 9},
            {"code": -32601, "message": "Method not found"},
        ),
        (
            {"code": -32602, "message": "Invalid request parameters", "data": ""},
            {"code": -32602, "message": "Invalid request parameters", "data": ""},
        ),
        ({"code": -32600, "message": "bad", "data": "echo"}, {"code": -32600, "message": "bad"}),
        (
            {"code": -32600, "message": "m" * (MAX_MESSAGE + 1)},
            {"code": -32600, "message": "Invalid Request"},
        ),
        (
            {"code": -32021, "message": "m", "data": {"x": "y" * MAX_DATA}},
            {"code": -32021, "message": "m"},
        ),
        (
            {"code": -32021, "message": "m", "data": {"needs": ["sampling"]}},
            {"code": -32021, "message": "m", "data": {"needs": ["sampling"]}},
        ),
    ],
    ids=[
        "long-version",
        "known-version",
        "method-name",
        "empty-data",
        "string-data",
        "long-message",
        "big-data",
        "small-data",
    ],
)
def test_an_sdk_error_keeps_nothing_of_the_callers_text(
    error: dict[str, Any], clean: dict[str, Any]
) -> None:
    assert scrubbed(error) == clean
    types.ErrorData.model_validate(scrubbed(error))


def enveloped(version: str) -> dict[str, Any]:
    return {types.PROTOCOL_VERSION_META_KEY: version, types.CLIENT_CAPABILITIES_META_KEY: {}}


def test_over_stdio_an_unsupported_version_is_not_echoed_and_is_audited(tmp_path: Path) -> None:
    db = tmp_path / "notes.sqlite3"
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    message["params"] = {"_meta": enveloped(HUGE_VERSION)}
    done = subprocess.run(
        [sys.executable, "-m", "strictcall", *SERVE_STDIO, "--db", str(db)],
        input=json.dumps(message).encode() + b"\n",
        capture_output=True,
        timeout=DEADLINE_S,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        check=False,
    )
    assert done.returncode == 0
    answer = json.loads(done.stdout)
    assert answer["id"] == 1 and answer["error"]["code"] == types.UNSUPPORTED_PROTOCOL_VERSION
    assert answer["error"]["data"]["requested"] == ""
    assert len(done.stdout) < 300
    audited = recent_audit(db, 5, lambda rs: any(r.code == INVALID_REQUEST.code for r in rs))
    assert [(r.identity, r.code) for r in audited] == [("u1", INVALID_REQUEST.code)]


def test_over_http_an_unsupported_version_is_not_echoed_and_is_audited(tmp_path: Path) -> None:
    db = tmp_path / "notes.sqlite3"
    token = create_token(db, "u1")
    server = start_server(db)
    try:
        headers = {
            "Accept": "application/json, text/event-stream",
            "Authorization": f"Bearer {token}",
            "MCP-Protocol-Version": HUGE_VERSION,
            "Mcp-Method": "tools/list",
        }
        message = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        message["params"] = {"_meta": enveloped(HUGE_VERSION)}
        response = httpx.post(
            server.base_url + "/mcp", json=message, headers=headers, timeout=DEADLINE_S
        )
        assert response.status_code == 400
        assert int(response.headers["content-length"]) == len(response.content) < 300
        error = response.json()["error"]
        assert error["code"] == types.UNSUPPORTED_PROTOCOL_VERSION
        assert error["data"]["requested"] == ""
        audited = recent_audit(db, 5, lambda rs: any(r.code == INVALID_REQUEST.code for r in rs))
        assert [(r.identity, r.code) for r in audited] == [("u1", INVALID_REQUEST.code)]
    finally:
        assert server.stop() == 0
