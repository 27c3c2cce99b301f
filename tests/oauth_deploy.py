"""A provider and a `strictcall serve` that accepts its tokens (tests/oidc_provider.py's
oidc-provider and servers.py's server), on ports chosen before either starts, and the helpers
the OAuth tests call them with."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx

from oidc_provider import Provider, SigningKey, free_port
from servers import RunningServer, start_server
from strictcall.errors import ErrorKind
from strictcall.transports.jsonrpc import ERROR_CODES

DEADLINE_S = 30.0
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def write_config(path: Path, issuer: str, resource: str, **more: str) -> Path:
    lines = [
        "[oauth]",
        f'issuer = "{issuer}"',
        f'resource = "{resource}"',
        'scopes = ["notes:read"]',
        "leeway_s = 5",
        "refresh_interval_s = 1",
        *(f"{key} = {value}" for key, value in more.items()),
        "[oauth.tool_scopes]",
        'create_note = ["notes:write"]',
        'delete_note = ["notes:write"]',
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


class Deployment:
    """A provider and a server that accepts its tokens, on ports chosen before either starts."""

    def __init__(self, tmp: Path, *, opaque: bool = False) -> None:
        self.port = free_port()
        self.resource = f"http://127.0.0.1:{self.port}"
        self.key = SigningKey("k1")
        self.provider = Provider(
            tmp,
            {self.resource: "opaque" if opaque else "jwt", "https://other.example/": "jwt"},
            [self.key],
        )
        self.db = tmp / "notes.sqlite3"
        self.config = write_config(tmp / "strictcall.toml", self.provider.issuer, self.resource)
        self.server: RunningServer | None = None

    def start_server(self, *extra: str) -> RunningServer:
        self.server = start_server(
            self.db, "--port", str(self.port), "--config", str(self.config), *extra
        )
        return self.server

    def close(self) -> None:
        try:
            if self.server is not None:
                assert self.server.stop() == 0
        finally:
            self.provider.stop()


def rpc(base_url: str, body: dict[str, Any] | bytes, token: str | None) -> httpx.Response:
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return httpx.post(base_url + "/rpc", content=content, headers=headers, timeout=DEADLINE_S)


def tool_call(name: str, arguments: dict[str, Any], request_id: int = 1) -> dict[str, Any]:
    params = {"name": name, "arguments": arguments}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


def refused(response: httpx.Response, status: int, kind: ErrorKind) -> dict[str, Any]:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["code"] == ERROR_CODES[kind.stage][0]
    data: dict[str, Any] = error["data"]
    assert (data["code"], data["stage"], data["retryable"]) == (
        kind.code,
        kind.stage.value,
        kind.retryable,
    )
    return data


def challenge(response: httpx.Response) -> dict[str, str]:
    """The parameters of a `WWW-Authenticate: Bearer k="v", ...` header."""
    scheme, _, rest = response.headers["www-authenticate"].partition(" ")
    assert scheme == "Bearer"
    params = {}
    for part in rest.split(", "):
        key, _, value = part.partition("=")
        params[key] = json.loads(value)
    return params
