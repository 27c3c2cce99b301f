"""`strictcall proxy` over HTTP as a resource server: callers come with the provider's tokens,
and the upstream (a real `strictcall serve` over streamable HTTP) sees the proxy's own
credentials only, never the caller's token (MCP's "no token passthrough"): a static header, or
the proxy's own client-credentials grant at the same provider."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx2
import pytest

from oauth_deploy import refused, rpc, tool_call, write_config
from oidc_provider import RS_CLIENT_ID, RS_CLIENT_SECRET, Provider, SigningKey, free_port
from servers import RunningServer, create_token, recent_audit, start_server
from strictcall.cli.identity import UPSTREAM_SECRET_ENV
from strictcall.errors import UNAUTHENTICATED
from strictcall.services.proxy.credentials import ClientCredentials, ClientCredentialsAuth

STOP_S = 20


class Gateway:
    """A provider, an upstream `strictcall serve` that accepts its tokens, and a proxy port."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.upstream_port, self.proxy_port = free_port(), free_port()
        self.upstream_resource = f"http://127.0.0.1:{self.upstream_port}"
        self.proxy_resource = f"http://127.0.0.1:{self.proxy_port}"
        self.provider = Provider(
            tmp, {self.upstream_resource: "jwt", self.proxy_resource: "jwt"}, [SigningKey("k1")]
        )
        self.upstream_db = tmp / "upstream.sqlite3"
        self.proxy_db = tmp / "proxy.sqlite3"
        self.upstream: RunningServer | None = None
        self.proxy: subprocess.Popen[str] | None = None

    def start(self) -> None:
        self.provider.start()
        config = write_config(
            self.tmp / "upstream.toml",
            self.provider.issuer,
            self.upstream_resource,
            own_token_scopes='["notes:write"]',  # the proxy's own token may call every tool
        )
        self.upstream = start_server(
            self.upstream_db, "--port", str(self.upstream_port), "--config", str(config)
        )

    def start_proxy(self, *upstream_auth: str, env: dict[str, str] | None = None) -> str:
        config = write_config(self.tmp / "proxy.toml", self.provider.issuer, self.proxy_resource)
        argv = [
            sys.executable, "-m", "strictcall", "proxy",
            "--upstream-url", self.upstream_resource + "/mcp", *upstream_auth,
            "--port", str(self.proxy_port), "--db", str(self.proxy_db), "--config", str(config),
        ]  # fmt: skip
        self.proxy_log = self.tmp / "proxy.log"
        with self.proxy_log.open("w") as log:
            self.proxy = subprocess.Popen(
                argv,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
                env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
            )
        assert self.proxy.stdout is not None
        first = self.proxy.stdout.readline()  # one line once it listens ("" if it died)
        match = re.search(r"listening on (http://[0-9.]+:\d+)", first)
        assert match is not None, self.proxy_log.read_text()
        return match.group(1)

    def close(self) -> None:
        try:
            if self.proxy is not None:
                running = self.proxy.poll() is None
                self.proxy.terminate()
                status = self.proxy.wait(timeout=STOP_S)
                assert self.proxy.stdout is not None
                self.proxy.stdout.close()
                assert status == 0 or not running
            if self.upstream is not None:
                assert self.upstream.stop() == 0
        finally:
            self.provider.stop()


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[Gateway]:
    running = Gateway(tmp_path)
    try:
        running.start()
        yield running
    finally:
        running.close()


def upstream_identities(gateway: Gateway) -> set[str | None]:
    records = recent_audit(
        gateway.upstream_db, 20, lambda r: any(x.tool == "count_notes" for x in r)
    )
    return {record.identity for record in records}


def test_the_upstream_sees_the_proxys_static_credentials_and_never_the_callers_token(
    gateway: Gateway,
) -> None:
    own = create_token(gateway.upstream_db, "proxy-svc")
    base = gateway.start_proxy("--upstream-header", f"Authorization: Bearer {own}")
    caller = gateway.provider.token(gateway.proxy_resource)
    answer = rpc(base, tool_call("count_notes", {}), caller)
    assert answer.status_code == 200 and answer.json()["result"] == {"result": 0}, answer.text
    assert upstream_identities(gateway) == {"proxy-svc"}
    # the caller's token is for the proxy: the upstream itself refuses it
    refused(
        rpc(gateway.upstream_resource, tool_call("count_notes", {}), caller), 401, UNAUTHENTICATED
    )


def test_the_proxy_gets_its_own_token_by_client_credentials_for_the_upstream(
    gateway: Gateway,
) -> None:
    base = gateway.start_proxy(
        "--upstream-token-url", gateway.provider.issuer + "/token",
        "--upstream-client-id", RS_CLIENT_ID,
        "--upstream-scope", "notes:read notes:write",
        "--upstream-resource", gateway.upstream_resource,
        env={UPSTREAM_SECRET_ENV: RS_CLIENT_SECRET},
    )  # fmt: skip
    caller = gateway.provider.token(gateway.proxy_resource)
    for _ in range(3):
        answer = rpc(base, tool_call("count_notes", {}), caller)
        assert answer.status_code == 200, answer.text
    proxy_audit = recent_audit(gateway.proxy_db, 5, lambda r: len(r) >= 3)
    assert {record.identity for record in proxy_audit} == {"oauth:agent"}
    assert upstream_identities(gateway) == {"oauth:" + RS_CLIENT_ID}


def test_the_proxys_own_token_is_fetched_once_then_again_before_it_expires(tmp_path: Path) -> None:
    resource = "http://127.0.0.1:9/"
    provider = Provider(tmp_path, {resource: "jwt"}, [SigningKey("k1")])
    provider.start()
    now = [0.0]
    credentials = ClientCredentials(
        provider.issuer + "/token", RS_CLIENT_ID, RS_CLIENT_SECRET, resource=resource
    )
    auth = ClientCredentialsAuth(credentials, clock=lambda: now[0])
    seen: list[str] = []

    async def requests(at: list[float]) -> None:
        async with httpx2.AsyncClient(auth=auth) as http:
            for moment in at:
                now[0] = moment
                answer = await http.get(provider.issuer + "/jwks")
                seen.append(answer.request.headers["authorization"])

    try:
        # the provider's tokens live 300 s: refreshed once 60 s (a fifth) are left
        anyio.run(requests, [0.0, 100.0, 239.0])
        assert auth.fetched == 1 and len(set(seen)) == 1
        anyio.run(requests, [240.0, 300.0])
        assert auth.fetched == 2 and len(set(seen)) == 2
    finally:
        provider.stop()


def test_the_proxys_token_is_fetched_again_once_after_a_401_and_a_refused_grant_says_why(
    gateway: Gateway,
) -> None:
    from strictcall.services.proxy.credentials import UpstreamAuthFailed

    # a token for another resource: the upstream answers 401, the proxy tries one new token
    wrong = ClientCredentials(
        gateway.provider.issuer + "/token",
        RS_CLIENT_ID,
        RS_CLIENT_SECRET,
        resource=gateway.proxy_resource,
    )
    auth = ClientCredentialsAuth(wrong)
    statuses: list[int] = []

    async def call(with_auth: ClientCredentialsAuth) -> None:
        async with httpx2.AsyncClient(auth=with_auth) as http:
            answer = await http.post(
                gateway.upstream_resource + "/rpc",
                json=tool_call("count_notes", {}),
            )
            statuses.append(answer.status_code)

    anyio.run(call, auth)
    assert statuses == [401] and auth.fetched == 2
    refused_grant = ClientCredentials(
        gateway.provider.issuer + "/token", RS_CLIENT_ID, "not-the-secret"
    )
    with pytest.raises(UpstreamAuthFailed, match=r"HTTP 401 \(invalid_client\)"):
        anyio.run(call, ClientCredentialsAuth(refused_grant))
