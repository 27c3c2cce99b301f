"""An identity provider's bad day, against a real `strictcall serve`: a key rotated under the
same `kid` is followed at once (the JWKS fetched again, at most once per interval), a provider
that answers a 100,000-deep or a 100 MB JWKS is a fault answered 503 `auth_unavailable` (no
traceback, the answer not read whole) and counted apart from the store's faults, a token's
times must be numbers and its `typ` RFC 9068's, and strictcall's own tokens and the provider's
identities never name the same caller."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from oauth_deploy import DEADLINE_S, Deployment, refused, rpc, tool_call, write_config
from oidc_provider import SigningKey, free_port
from servers import create_token, metric, start_server
from strictcall.errors import AUTH_UNAVAILABLE, INSUFFICIENT_SCOPE, UNAUTHENTICATED
from strictcall.identity.fetch import MAX_ANSWER_BYTES

COUNT = tool_call("count_notes", {})


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    running = Deployment(tmp_path_factory.mktemp("oauth-ops"))
    try:
        running.provider.start()
        running.start_server()
        yield running
    finally:
        running.close()


def claims_for(deployment: Deployment, **more: Any) -> dict[str, Any]:
    now = int(time.time())
    claims = {"iss": deployment.provider.issuer, "aud": deployment.resource, "sub": "signed",
              "scope": "notes:read notes:write", "iat": now, "exp": now + 300}  # fmt: skip
    return {**claims, **more}


def answered_within(base_url: str, token: str, status: int) -> httpx.Response:
    """The answer to a count, asked again (polled) until it is `status` or the deadline."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        answer = rpc(base_url, COUNT, token)
        if answer.status_code == status or time.monotonic() > deadline:
            return answer
        time.sleep(0.1)


def test_a_key_rotated_under_the_same_kid_is_followed_without_a_lockout(tmp_path: Path) -> None:
    deployment = Deployment(tmp_path)
    try:
        deployment.provider.start()
        server = deployment.start_server()
        first = deployment.provider.token(deployment.resource)
        assert rpc(server.base_url, COUNT, first).status_code == 200
        # forged on the known kid: each fails its signature; the JWKS is fetched at most once a
        # second (refresh_interval_s = 1), however many come
        forger = SigningKey("k1")
        deployment.provider.jwks_fetches()
        started = time.monotonic()
        for _ in range(30):
            forged = forger.sign(claims_for(deployment, sub="forger"))
            refused(rpc(server.base_url, COUNT, forged), 401, UNAUTHENTICATED)
        elapsed = time.monotonic() - started
        assert deployment.provider.jwks_fetches() <= int(elapsed) + 2
        # the provider rotates its key and keeps the kid "k1"
        deployment.provider.restart([SigningKey("k1")])
        second = deployment.provider.token(deployment.resource)
        answer = answered_within(server.base_url, second, 200)
        assert answer.status_code == 200, answer.text
    finally:
        deployment.close()


@pytest.mark.parametrize(
    ("name", "change"),
    [
        ("exp-a-string", {"exp": str(int(time.time()) + 300)}),
        ("exp-infinite", {"exp": float("inf")}),
        ("nbf-a-string", {"nbf": "0"}),
        ("iat-a-string", {"iat": "0"}),
        ("exp-true", {"exp": True}),
    ],
)
def test_a_token_whose_times_are_not_numbers_is_401(
    deployment: Deployment, name: str, change: dict[str, Any]
) -> None:
    assert deployment.server is not None
    token = deployment.key.sign(claims_for(deployment, **change))
    refused(rpc(deployment.server.base_url, COUNT, token), 401, UNAUTHENTICATED)


@pytest.mark.parametrize("typ", ["JWT", "id_token+jwt", "dpop+jwt", "secevent+jwt", 7])
def test_a_jwt_whose_typ_is_not_an_access_tokens_is_401(
    deployment: Deployment, typ: object
) -> None:
    assert deployment.server is not None
    token = deployment.key.sign(claims_for(deployment), typ=typ)
    refused(rpc(deployment.server.base_url, COUNT, token), 401, UNAUTHENTICATED)


@pytest.mark.parametrize("typ", ["at+jwt", "application/at+jwt", "AT+JWT", None])
def test_an_access_tokens_typ_or_none_is_accepted(deployment: Deployment, typ: str | None) -> None:
    import jwt

    assert deployment.server is not None
    claims = claims_for(deployment)
    if typ is None:  # PyJWT writes a typ unless told not to
        token = jwt.encode(
            claims, deployment.key.private, algorithm="ES256", headers={"kid": "k1", "typ": None}
        )
        assert "typ" not in jwt.get_unverified_header(token)
    else:
        token = deployment.key.sign(claims, typ=typ)
    answer = rpc(deployment.server.base_url, COUNT, token)
    assert answer.status_code == 200, answer.text


def test_an_own_token_and_the_providers_client_of_one_name_are_two_callers(
    deployment: Deployment,
) -> None:
    assert deployment.server is not None
    base = deployment.server.base_url
    provider = deployment.provider.token(deployment.resource)  # its subject: the client "agent"
    created = rpc(base, tool_call("create_note", {"text": "the provider's agent's"}), provider)
    assert created.status_code == 200 and "result" in created.json(), created.text
    assert rpc(base, COUNT, provider).json()["result"] >= 1
    own = create_token(deployment.db, "agent")
    assert rpc(base, COUNT, own).json()["result"] == 0  # none of the provider's agent's notes
    impostor = create_token(deployment.db, "oauth:agent")  # the provider's namespace: refused
    refused(rpc(base, COUNT, impostor), 401, UNAUTHENTICATED)


def test_an_own_token_holds_no_tool_scope_unless_own_token_scopes_grants_it(
    tmp_path: Path,
) -> None:
    deployment = Deployment(tmp_path)
    try:
        deployment.provider.start()
        server = deployment.start_server()
        own = create_token(deployment.db, "u1")
        write = tool_call("create_note", {"text": "x"})
        refused(rpc(server.base_url, write, own), 403, INSUFFICIENT_SCOPE)
        assert rpc(server.base_url, COUNT, own).status_code == 200  # `scopes` is not its to hold
        assert server.stop() == 0
        write_config(
            deployment.config,
            deployment.provider.issuer,
            deployment.resource,
            own_token_scopes='["notes:write"]',
        )
        server = deployment.start_server()
        written = rpc(server.base_url, write, own)
        assert written.status_code == 200 and "result" in written.json(), written.text
    finally:
        deployment.close()


# --- a hostile provider ------------------------------------------------------------------------


class HostileProvider:
    """An issuer on 127.0.0.1 whose metadata is sound and whose JWKS is `jwks`: "deep" (100,000
    nested arrays), "huge" (100 MB, chunked, never a length) or "sound" (no key at all);
    it counts the bytes of JWKS it managed to send."""

    def __init__(self) -> None:
        self.jwks = "deep"
        self.sent = 0
        self.port = free_port()
        self.issuer = f"http://127.0.0.1:{self.port}"
        hostile = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                if self.path.startswith("/.well-known/"):
                    body = json.dumps(
                        {"issuer": hostile.issuer, "jwks_uri": hostile.issuer + "/jwks"}
                    )
                    self._send(body.encode())
                elif hostile.jwks == "deep":
                    self._send(b'{"keys": ' + b"[" * 100_000 + b"]" * 100_000 + b"}")
                elif hostile.jwks == "huge":
                    self._huge()
                else:
                    self._send(b'{"keys": []}')

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", "0"))
                self.rfile.read(length)
                self._send(b'{"active": ' + b"[" * 100_000 + b"]" * 100_000 + b"}")

            def _send(self, body: bytes) -> None:
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _huge(self) -> None:
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("transfer-encoding", "chunked")
                self.end_headers()
                chunk = b" " * 65536
                framed = b"%x\r\n%s\r\n" % (len(chunk), chunk)
                sent = 0
                try:
                    self.wfile.write(b'b\r\n{"keys": [ \r\n')
                    for _ in range(100 * 1024 * 1024 // len(chunk)):
                        self.wfile.write(framed)
                        sent += len(chunk)
                        hostile.sent = max(hostile.sent, sent)  # the most one fetch took
                    self.wfile.write(b"2\r\n]}\r\n0\r\n\r\n")
                except OSError:
                    self.close_connection = True

        self.http = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.http.daemon_threads = True
        self._thread = threading.Thread(target=self.http.serve_forever, daemon=True)

    def __enter__(self) -> HostileProvider:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.http.shutdown()
        self.http.server_close()


def test_a_hostile_jwks_is_503_auth_unavailable_counted_apart_from_the_store(
    tmp_path: Path,
) -> None:
    with HostileProvider() as hostile:
        resource = f"http://127.0.0.1:{free_port()}"
        config = write_config(tmp_path / "strictcall.toml", hostile.issuer, resource)
        port = resource.rsplit(":", 1)[1]
        server = start_server(tmp_path / "notes.sqlite3", "--port", port, "--config", str(config))
        try:
            token = SigningKey("k1").sign(
                {"iss": hostile.issuer, "aud": resource, "sub": "x", "exp": int(time.time()) + 300}
            )
            data = refused(answered_within(server.base_url, token, 503), 503, AUTH_UNAVAILABLE)
            assert data["retry_after_ms"] >= 250
            hostile.jwks = "huge"
            deadline = time.monotonic() + DEADLINE_S
            while hostile.sent == 0 and time.monotonic() < deadline:  # fetched after the backoff
                refused(rpc(server.base_url, COUNT, token), 503, AUTH_UNAVAILABLE)
                time.sleep(0.1)
            assert hostile.sent > 0
            refused(rpc(server.base_url, COUNT, token), 503, AUTH_UNAVAILABLE)
            time.sleep(0.5)  # what the provider managed to send once the server stopped reading
            assert hostile.sent < 16 * MAX_ANSWER_BYTES  # read to the limit, not the 100 MB
            own = create_token(tmp_path / "notes.sqlite3", "u1")
            assert rpc(server.base_url, COUNT, own).status_code == 200
            text = httpx.get(server.base_url + "/metrics", timeout=DEADLINE_S).text
            assert metric(text, "strictcall_store_faults_total", where="auth") == 0
            assert metric(text, "strictcall_store_available") == 1
            assert metric(text, "strictcall_calls_total", code=AUTH_UNAVAILABLE.code) >= 2
        finally:
            assert server.stop() == 0
        output = [*server.lines, *server.output_after_exit()]
        assert not any("Traceback" in line for line in output)
        assert not any("store unavailable" in line for line in output)


def test_a_hostile_introspection_answer_is_a_provider_fault_not_a_crash() -> None:
    import asyncio

    from strictcall.identity.fetch import ProviderClient, ProviderUnavailable

    async def asked(url: str) -> None:
        client = ProviderClient(DEADLINE_S)
        try:
            await client.post_form(url, {"token": "t"}, auth=("c", "s"))
        finally:
            await client.aclose()

    with HostileProvider() as hostile, pytest.raises(ProviderUnavailable):
        asyncio.run(asked(hostile.issuer + "/introspect"))


def test_a_flood_of_made_up_opaque_tokens_does_not_stand_before_a_real_new_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from concurrent.futures import ThreadPoolExecutor

    from oidc_provider import RS_CLIENT_ID, RS_CLIENT_SECRET
    from strictcall.identity.settings import SECRET_ENV

    deployment = Deployment(tmp_path, opaque=True)
    write_config(
        deployment.config,
        deployment.provider.issuer,
        deployment.resource,
        identity_claim='"client_id"',
        introspection=f'{{ client_id = "{RS_CLIENT_ID}" }}',
    )
    monkeypatch.setenv(SECRET_ENV, RS_CLIENT_SECRET)
    try:
        deployment.provider.start()
        server = deployment.start_server()
        real = deployment.provider.token(deployment.resource)
        local = threading.local()
        clients: list[httpx.Client] = []

        def made_up(n: int) -> int:
            client = getattr(local, "client", None)
            if client is None:
                transport = httpx.HTTPTransport(local_address="127.0.0.2")
                client = local.client = httpx.Client(timeout=DEADLINE_S, transport=transport)
                clients.append(client)
            headers = {"Authorization": f"Bearer made-up-{n:04d}-opaque-token"}
            answer = client.post(server.base_url + "/rpc", json=COUNT, headers=headers)
            return answer.status_code

        with ThreadPoolExecutor(max_workers=64) as pool:
            flood = [pool.submit(made_up, n) for n in range(600)]
            deadline = time.monotonic() + DEADLINE_S
            while sum(f.done() for f in flood) < 64 and time.monotonic() < deadline:
                time.sleep(0.01)  # until the flood is under way
            assert not all(f.done() for f in flood)
            deployment.provider.requests_seen()  # forget the questions so far
            answer = rpc(server.base_url, COUNT, real)
            asked = deployment.provider.requests_seen().count("/token/introspection")
            statuses = [f.result() for f in flood]
        for client in clients:
            client.close()
        assert answer.status_code == 200, answer.text
        # the real token waited behind a few of the flood's questions, not hundreds
        assert asked <= 40, asked  # 14 measured; 99 before (every one queued in front)
        assert set(statuses) <= {401, 429} and statuses.count(429) > 0
    finally:
        deployment.close()
