"""`strictcall federate` over HTTP as a resource server (issue 26's identity provider, the real
npm oidc-provider): the config's `[oauth]` table (and the `--oauth-*` flags) as `serve --config`
reads it; tokens checked against the provider's keys, 401 pointing at the resource metadata, the
listing cut to the token's scopes, and the upstream (a real `strictcall serve` over streamable
HTTP) seeing the federation's own credentials from the config only, never the caller's token."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from oauth_deploy import MCP_HEADERS, challenge, refused, rpc, tool_call
from oidc_provider import SCOPES, Provider, SigningKey, free_port
from servers import RunningServer, create_token, recent_audit, start_server, strictcall
from strictcall.errors import FORBIDDEN_OR_MISSING, INSUFFICIENT_SCOPE, UNAUTHENTICATED
from test_federation_content import SDK_NOTES

DEADLINE_S = 30.0
STOP_S = 20
OAUTH_TABLE = """
[oauth]
scopes = ["notes:read"]
leeway_s = 5
refresh_interval_s = 1
[oauth.tool_scopes]
notes_create_note = ["notes:write"]
notes_delete_note = ["notes:write"]
sdk_summarize = ["notes:write"]
sdk_refund_note = ["notes:write"]
"""
READABLE = ["notes_count_notes", "notes_list_notes", "notes_read_note"]
EVERY_TOOL = sorted([*READABLE, "notes_create_note", "notes_delete_note"])


class Federated:
    """A provider, an upstream `strictcall serve` with its own tokens, and a federation of it
    whose config holds the `[oauth]` table."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.upstream_port, self.port = free_port(), free_port()
        self.resource = f"http://127.0.0.1:{self.port}"
        self.elsewhere = f"http://127.0.0.1:{self.upstream_port}"
        resources = {self.resource: "jwt", self.elsewhere: "jwt"}
        self.provider = Provider(tmp, resources, [SigningKey("k1")])
        self.upstream_db = tmp / "upstream.sqlite3"
        self.db = tmp / "federation.sqlite3"
        self.upstream: RunningServer | None = None
        self.process: subprocess.Popen[str] | None = None
        self.base_url = ""

    def start(self, *, in_file: bool) -> None:
        self.provider.start()
        self.upstream = start_server(self.upstream_db, "--port", str(self.upstream_port))
        own = create_token(self.upstream_db, "federation-svc")
        where = f"{self.upstream.base_url}/mcp"
        config = self.tmp / "federation.toml"
        flags: list[str] = []
        table = OAUTH_TABLE
        if in_file:
            table = table.replace(
                "[oauth]\n",
                f"[oauth]\nissuer = {json.dumps(self.provider.issuer)}\n"
                f"resource = {json.dumps(self.resource)}\n",
            )
        else:  # the issuer and resource from the flags, the rest from the file
            flags = ["--oauth-issuer", self.provider.issuer, "--oauth-resource", self.resource]
        config.write_text(
            f"[upstreams.sdk]\ncommand = {json.dumps(SDK_NOTES)}\n"
            f"[upstreams.notes]\nurl = {json.dumps(where)}\n"
            "[upstreams.notes.credentials.headers]\n"
            f"Authorization = {json.dumps('Bearer ' + own)}\n" + table,
            encoding="utf-8",
        )
        argv = [sys.executable, "-m", "strictcall", "federate", "--config", str(config)]
        self.log = self.tmp / "federation.log"
        with self.log.open("w") as log:
            self.process = subprocess.Popen(
                [*argv, "--port", str(self.port), "--db", str(self.db), *flags],
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        assert self.process.stdout is not None
        first = self.process.stdout.readline()  # one line once it listens ("" if it died)
        match = re.search(r"listening on (http://[0-9.]+:\d+)", first)
        assert match is not None, self.log.read_text()
        self.base_url = match.group(1)

    def close(self) -> None:
        try:
            if self.process is not None:
                running = self.process.poll() is None
                self.process.terminate()
                status = self.process.wait(timeout=STOP_S)
                assert self.process.stdout is not None
                self.process.stdout.close()
                assert status == 0 or not running
            if self.upstream is not None:
                assert self.upstream.stop() == 0
        finally:
            self.provider.stop()


@pytest.fixture(params=["in the file", "from the flags"])
def federated(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Federated]:
    running = Federated(tmp_path)
    try:
        running.start(in_file=request.param == "in the file")
        yield running
    finally:
        running.close()


def listed(base_url: str, token: str, endpoint: str, method: str = "tools/list") -> list[str]:
    message = {"jsonrpc": "2.0", "id": 1, "method": method}
    answer = httpx.post(
        base_url + endpoint,
        content=json.dumps(message),
        headers={**MCP_HEADERS, "Authorization": f"Bearer {token}"},
        timeout=DEADLINE_S,
    )
    assert answer.status_code == 200, answer.text
    result = answer.json()["result"]
    return sorted(listed["name"] for listed in result[method.partition("/")[0]])


def test_the_federation_takes_the_providers_tokens_and_never_passes_them_on(
    federated: Federated,
) -> None:
    base = federated.base_url
    # no token: 401 pointing at the resource metadata, which names the provider
    for endpoint in ("/rpc", "/mcp"):
        answer = httpx.post(
            base + endpoint,
            content=json.dumps(tool_call("notes_count_notes", {})),
            headers=MCP_HEADERS,
            timeout=DEADLINE_S,
        )
        refused(answer, 401, UNAUTHENTICATED)
        assert challenge(answer)["resource_metadata"] == (
            federated.resource + "/.well-known/oauth-protected-resource"
        )
    metadata = httpx.get(base + "/.well-known/oauth-protected-resource", timeout=DEADLINE_S)
    assert metadata.status_code == 200
    assert metadata.json()["authorization_servers"] == [federated.provider.issuer]
    assert metadata.json()["scopes_supported"] == sorted(SCOPES)

    # a token for another resource, or none of the provider's: 401
    elsewhere = federated.provider.token(federated.elsewhere)
    refused(rpc(base, tool_call("notes_count_notes", {}), elsewhere), 401, UNAUTHENTICATED)

    # the listing is cut to the token's scopes, on both endpoints; calls beyond them are 403
    reader = federated.provider.token(federated.resource, "notes:read")
    writer = federated.provider.token(federated.resource, "notes:read notes:write")
    for endpoint in ("/rpc", "/mcp"):  # the sdk upstream's tools need no scope
        assert [n for n in listed(base, reader, endpoint) if n.startswith("notes_")] == READABLE
        assert [n for n in listed(base, writer, endpoint) if n.startswith("notes_")] == EVERY_TOOL
    refused(
        rpc(base, tool_call("notes_create_note", {"text": "x"}), reader), 403, INSUFFICIENT_SCOPE
    )
    # resources and prompts too, by their served names' scopes
    for method in ("resources/list", "prompts/list"):
        assert listed(base, reader, "/mcp", method) == []
    assert listed(base, writer, "/mcp", "resources/list") == ["sdk_refund_note"]
    assert listed(base, writer, "/mcp", "prompts/list") == ["sdk_summarize"]
    for token, kind in ((reader, FORBIDDEN_OR_MISSING), (writer, None)):
        get = {"name": "sdk_summarize", "arguments": {"note_id": "n1"}}
        got = httpx.post(
            base + "/mcp",
            content=json.dumps({"jsonrpc": "2.0", "id": 2, "method": "prompts/get", "params": get}),
            headers={**MCP_HEADERS, "Authorization": f"Bearer {token}"},
            timeout=DEADLINE_S,
        )
        assert got.status_code == 200, got.text
        if kind is None:
            assert got.json()["result"]["messages"], got.text
        else:
            assert got.json()["error"]["data"] == kind.as_error()

    # a call through: the federation audits the provider's subject, the upstream sees only the
    # federation's own token from the config
    counted = rpc(base, tool_call("notes_count_notes", {}), reader)
    assert counted.status_code == 200 and counted.json()["result"] == {"result": 0}, counted.text
    created = rpc(base, tool_call("notes_create_note", {"text": "by scope"}), writer)
    assert created.status_code == 200 and "result" in created.json(), created.text
    mine = recent_audit(federated.db, 10, lambda r: any(x.tool == "notes_create_note" for x in r))
    assert {r.identity for r in mine if r.tool in ("notes_count_notes", "notes_create_note")} == {
        "oauth:agent"
    }
    theirs = recent_audit(
        federated.upstream_db, 10, lambda r: any(x.tool == "create_note" for x in r)
    )
    assert {r.identity for r in theirs if r.tool is not None} == {"federation-svc"}
    # the caller's token is the federation's: the upstream itself refuses it
    assert federated.upstream is not None
    refused(
        rpc(federated.upstream.base_url, tool_call("count_notes", {}), reader), 401, UNAUTHENTICATED
    )


def test_the_oauth_flags_are_for_http_and_a_bad_oauth_table_is_refused(tmp_path: Path) -> None:
    config = tmp_path / "federation.toml"
    config.write_text('[upstreams.a]\ncommand = "unused"\n[oauth]\nscopes = ["x"]\n')
    stdio = strictcall(
        "federate", "--config", str(config), "--stdio", "--identity", "u1",
        "--oauth-issuer", "http://127.0.0.1:9",
    )  # fmt: skip
    assert stdio.returncode == 2 and "--oauth-issuer" in stdio.stderr
    no_issuer = strictcall("federate", "--config", str(config), "--port", "0")
    assert no_issuer.returncode == 2 and "oauth" in no_issuer.stderr
