"""strictcall as an OAuth 2.1 resource server (MCP authorization), against a real OpenID provider
(tests/oidc_provider.py: oidc-provider on 127.0.0.1) and a real `strictcall serve`: the
provider's JWTs and opaque tokens are accepted for this server's resource, strictcall's own
tokens still are, the metadata and the challenges lead a client to the provider, a missing scope
is 403 insufficient_scope on both wires, and every hostile token is 401 with the challenge."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from oauth_deploy import (
    DEADLINE_S,
    MCP_HEADERS,
    Deployment,
    challenge,
    refused,
    rpc,
    tool_call,
    write_config,
)
from oidc_provider import SCOPES, SigningKey
from servers import create_token, recent_audit
from strictcall.errors import AUTH_UNAVAILABLE, INSUFFICIENT_SCOPE, UNAUTHENTICATED
from strictcall.identity.settings import SECRET_ENV


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    running = Deployment(tmp_path_factory.mktemp("oauth"))
    try:
        running.provider.start()
        running.start_server()
        yield running
    finally:
        running.close()


def test_a_jwt_from_the_provider_is_accepted_and_its_subject_is_the_identity(
    deployment: Deployment,
) -> None:
    assert deployment.server is not None
    token = deployment.provider.token(deployment.resource)
    created = rpc(deployment.server.base_url, tool_call("create_note", {"text": "mine"}), token)
    assert created.status_code == 200 and "result" in created.json(), created.text
    counted = rpc(deployment.server.base_url, tool_call("count_notes", {}), token)
    assert counted.json()["result"] >= 1
    audit = recent_audit(deployment.db, 5, lambda r: any(x.tool == "count_notes" for x in r))
    assert {record.identity for record in audit if record.tool == "count_notes"} == {"oauth:agent"}


def test_strictcalls_own_tokens_still_work_beside_the_providers(deployment: Deployment) -> None:
    assert deployment.server is not None
    own = create_token(deployment.db, "u1")
    answered = rpc(deployment.server.base_url, tool_call("count_notes", {}), own)
    assert answered.status_code == 200 and answered.json()["result"] == 0


@pytest.mark.parametrize("path", ["", "/mcp", "/rpc"])
def test_protected_resource_metadata_names_the_resource_and_its_issuer(
    deployment: Deployment, path: str
) -> None:
    assert deployment.server is not None
    url = deployment.server.base_url + "/.well-known/oauth-protected-resource" + path
    answer = httpx.get(url, timeout=DEADLINE_S)
    assert answer.status_code == 200
    assert answer.json() == {
        "resource": deployment.resource,
        "authorization_servers": [deployment.provider.issuer],
        "bearer_methods_supported": ["header"],
        "scopes_supported": sorted(SCOPES),
    }


@pytest.mark.parametrize("endpoint", ["/rpc", "/mcp"])
def test_a_401_without_a_token_points_at_the_metadata_and_names_no_error(
    deployment: Deployment, endpoint: str
) -> None:
    assert deployment.server is not None
    answer = httpx.post(
        deployment.server.base_url + endpoint,
        content=json.dumps(tool_call("count_notes", {})),
        headers=MCP_HEADERS,
        timeout=DEADLINE_S,
    )
    refused(answer, 401, UNAUTHENTICATED)
    assert challenge(answer) == {
        "resource_metadata": deployment.resource + "/.well-known/oauth-protected-resource",
        "scope": "notes:read",
    }


def test_a_token_without_a_tools_scope_is_403_insufficient_scope_on_both_wires(
    deployment: Deployment,
) -> None:
    assert deployment.server is not None
    reader = deployment.provider.token(deployment.resource, "notes:read")
    base = deployment.server.base_url
    for answer in (
        rpc(base, tool_call("create_note", {"text": "x"}), reader),
        httpx.post(
            base + "/mcp",
            content=json.dumps(tool_call("create_note", {"text": "x"})),
            headers={**MCP_HEADERS, "Authorization": f"Bearer {reader}"},
            timeout=DEADLINE_S,
        ),
    ):
        data = refused(answer, 403, INSUFFICIENT_SCOPE)
        assert data["scope"] == "notes:read notes:write"
        params = challenge(answer)
        assert params["error"] == "insufficient_scope"
        assert params["scope"] == "notes:read notes:write"
    # the same token may call what its scope allows
    assert rpc(base, tool_call("count_notes", {}), reader).status_code == 200
    audit = recent_audit(
        deployment.db, 20, lambda r: sum(x.code == INSUFFICIENT_SCOPE.code for x in r) >= 2
    )
    scoped = [record for record in audit if record.code == INSUFFICIENT_SCOPE.code]
    assert len(scoped) >= 2
    assert {(r.identity, r.tool, r.stage) for r in scoped} == {
        ("oauth:agent", "create_note", "auth")
    }


def test_a_token_without_the_scope_every_call_needs_is_403(deployment: Deployment) -> None:
    assert deployment.server is not None
    writer = deployment.provider.token(deployment.resource, "notes:write")
    answer = rpc(deployment.server.base_url, tool_call("count_notes", {}), writer)
    refused(answer, 403, INSUFFICIENT_SCOPE)
    assert challenge(answer)["scope"] == "notes:read"


def hostile_tokens(deployment: Deployment) -> dict[str, str]:
    """Each a token that must be refused: 401, invalid_token."""
    import base64

    from cryptography.hazmat.primitives import serialization

    now = int(time.time())
    claims = {
        "iss": deployment.provider.issuer,
        "aud": deployment.resource,
        "sub": "intruder",
        "scope": " ".join(SCOPES),
        "iat": now,
        "exp": now + 300,
    }
    public_pem = deployment.key.private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )

    def b64(data: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()

    # PyJWT refuses to sign HS256 with a PEM key (the very attack): the MAC is made by hand
    import hashlib
    import hmac

    hs_input = f"{b64({'alg': 'HS256', 'typ': 'JWT', 'kid': 'k1'})}.{b64(claims)}"
    hs_mac = hmac.new(public_pem, hs_input.encode(), hashlib.sha256).digest()
    hs_token = hs_input + "." + base64.urlsafe_b64encode(hs_mac).rstrip(b"=").decode()
    return {
        "alg-none": f"{b64({'alg': 'none', 'kid': 'k1'})}.{b64(claims)}.",
        "hs256-with-the-public-key": hs_token,
        "wrong-audience": deployment.provider.token("https://other.example/"),
        "expired": deployment.key.sign({**claims, "iat": now - 900, "exp": now - 600}),
        "skew-beyond-leeway": deployment.key.sign({**claims, "nbf": now + 600, "iat": now + 600}),
        "kid-not-in-jwks": SigningKey("k-unknown").sign(claims),
        "wrong-issuer": deployment.key.sign({**claims, "iss": "https://evil.example"}),
        "no-exp": deployment.key.sign({k: v for k, v in claims.items() if k != "exp"}),
        "garbage-4kib": "x" * 4096,
        "garbage-jwt-shaped-4kib": "a" * 1365 + "." + "b" * 1365 + "." + "c" * 1364,
    }


HOSTILE = [
    "alg-none",
    "hs256-with-the-public-key",
    "wrong-audience",
    "expired",
    "skew-beyond-leeway",
    "kid-not-in-jwks",
    "wrong-issuer",
    "no-exp",
    "garbage-4kib",
    "garbage-jwt-shaped-4kib",
]


@pytest.mark.parametrize("endpoint", ["/rpc", "/mcp"])
def test_every_hostile_token_is_401_invalid_token_and_nothing_of_it_is_echoed(
    deployment: Deployment, endpoint: str
) -> None:
    assert deployment.server is not None
    tokens = hostile_tokens(deployment)
    assert sorted(tokens) == sorted(HOSTILE)
    for name, token in tokens.items():
        answer = httpx.post(
            deployment.server.base_url + endpoint,
            content=json.dumps(tool_call("create_note", {"text": "x"})),
            headers={**MCP_HEADERS, "Authorization": f"Bearer {token}"},
            timeout=DEADLINE_S,
        )
        refused(answer, 401, UNAUTHENTICATED)
        params = challenge(answer)
        assert params["error"] == "invalid_token", name
        assert params["resource_metadata"].endswith("/.well-known/oauth-protected-resource")
        assert token[-40:] not in answer.text, name
        assert token[-40:] not in answer.headers["www-authenticate"], name
    audit = recent_audit(deployment.db, 50, lambda r: True)
    assert "intruder" not in {record.identity for record in audit}


@pytest.mark.parametrize(
    "authorization",
    ["Bearer", "Basic dTE6cA==", "bearer-without-space", "Bearer \u00e9t\u00e9"],
    ids=["empty", "basic", "no-scheme", "latin-1"],
)
def test_a_malformed_authorization_header_is_401_with_the_challenge_and_no_error(
    deployment: Deployment, authorization: str
) -> None:
    assert deployment.server is not None
    answer = httpx.post(
        deployment.server.base_url + "/rpc",
        content=json.dumps(tool_call("count_notes", {})),
        headers={b"Authorization": authorization.encode("latin-1")},
        timeout=DEADLINE_S,
    )
    refused(answer, 401, UNAUTHENTICATED)
    assert "error" not in challenge(answer)  # no token was read from it
    assert "resource_metadata" in challenge(answer)


def test_workers_each_check_the_providers_tokens(tmp_path: Path) -> None:
    deployment = Deployment(tmp_path)
    try:
        deployment.provider.start()
        server = deployment.start_server("--workers", "2")
        token = deployment.provider.token(deployment.resource)
        for _ in range(6):  # the connections land on either worker
            answer = httpx.post(
                server.base_url + "/rpc",
                content=json.dumps(tool_call("count_notes", {})),
                headers={"Authorization": f"Bearer {token}", "Connection": "close"},
                timeout=DEADLINE_S,
            )
            assert answer.status_code == 200, answer.text
        refused(rpc(server.base_url, tool_call("count_notes", {}), "a.b.c"), 401, UNAUTHENTICATED)
    finally:
        deployment.close()


def test_a_key_rotation_is_followed_and_unknown_kids_fetch_the_jwks_at_most_once_per_interval(
    tmp_path: Path,
) -> None:
    deployment = Deployment(tmp_path)
    try:
        deployment.provider.start()
        server = deployment.start_server()
        first = deployment.provider.token(deployment.resource)
        assert rpc(server.base_url, tool_call("count_notes", {}), first).status_code == 200
        # a burst of tokens signed by a key the provider never had: one fetch at most per second
        stranger = SigningKey("k-stranger")
        now = int(time.time())
        claims = {"iss": deployment.provider.issuer, "aud": deployment.resource, "sub": "x",
                  "scope": "notes:read", "exp": now + 300}  # fmt: skip
        deployment.provider.jwks_fetches()  # forget the fetches so far
        started = time.monotonic()
        for _ in range(30):
            answer = rpc(server.base_url, tool_call("count_notes", {}), stranger.sign(claims))
            refused(answer, 401, UNAUTHENTICATED)
        elapsed = time.monotonic() - started
        assert deployment.provider.jwks_fetches() <= int(elapsed) + 1
        # rotation: the provider now signs with k2 and still publishes k1
        rotated = SigningKey("k2")
        deployment.provider.restart([rotated, deployment.key])
        deadline = time.monotonic() + DEADLINE_S
        second = deployment.provider.token(deployment.resource)
        while True:  # the kid is unknown until the interval since the last fetch has passed
            answer = rpc(server.base_url, tool_call("count_notes", {}), second)
            if answer.status_code == 200 or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert answer.status_code == 200, answer.text
        assert rpc(server.base_url, tool_call("count_notes", {}), first).status_code == 200
    finally:
        deployment.close()


def test_an_unreachable_issuer_is_503_auth_unavailable_then_served_once_it_answers(
    tmp_path: Path,
) -> None:
    deployment = Deployment(tmp_path)
    try:
        server = deployment.start_server()  # the provider is not running yet
        token = deployment.key.sign(
            {"iss": deployment.provider.issuer, "aud": deployment.resource, "sub": "early",
             "scope": "notes:read", "exp": int(time.time()) + 300}
        )  # fmt: skip
        answer = rpc(server.base_url, tool_call("count_notes", {}), token)
        data = refused(answer, 503, AUTH_UNAVAILABLE)
        assert data["retry_after_ms"] >= 250
        assert int(answer.headers["retry-after"]) >= 1
        own = create_token(deployment.db, "u1")  # strictcall's own tokens do not need it
        assert rpc(server.base_url, tool_call("count_notes", {}), own).status_code == 200
        deployment.provider.start()
        deadline = time.monotonic() + DEADLINE_S
        while True:
            answer = rpc(server.base_url, tool_call("count_notes", {}), token)
            if answer.status_code != 503 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert answer.status_code == 200, answer.text
        # down again at a key refresh: a token with a new kid cannot be checked, 503
        deployment.provider.stop()
        rotated = SigningKey("k2").sign(
            {"iss": deployment.provider.issuer, "aud": deployment.resource, "sub": "late",
             "scope": "notes:read", "exp": int(time.time()) + 300}
        )  # fmt: skip
        deadline = time.monotonic() + DEADLINE_S
        while True:  # until the interval since the last fetch has passed
            answer = rpc(server.base_url, tool_call("count_notes", {}), rotated)
            if answer.status_code == 503 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        refused(answer, 503, AUTH_UNAVAILABLE)
        # a token already verified is still served from what was fetched
        assert rpc(server.base_url, tool_call("count_notes", {}), token).status_code == 200
        garbage = "g" * 2046 + "." + "g" * 2048 + "."  # JWT-shaped: the provider's to refuse
        refused(rpc(server.base_url, tool_call("count_notes", {}), garbage), 401, UNAUTHENTICATED)
        assert server.stop() == 0
        output = [*server.lines, *server.output_after_exit()]
        deployment.server = None
        assert not any("Traceback" in line for line in output)
        assert sum("cannot be reached" in line for line in output) == 2  # at start, at refresh
        assert sum("answers again" in line for line in output) == 1
        assert any("a bearer token was refused: malformed" in line for line in output)
        for secret in (token, rotated, garbage):
            assert not any(secret[-40:] in line for line in output)
    finally:
        deployment.close()


def test_an_opaque_token_is_checked_by_introspection(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from oidc_provider import RS_CLIENT_ID, RS_CLIENT_SECRET

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
        token = deployment.provider.token(deployment.resource)
        assert token.count(".") != 2  # opaque
        for _ in range(3):
            answer = rpc(server.base_url, tool_call("count_notes", {}), token)
            assert answer.status_code == 200, answer.text
        reader = deployment.provider.token(deployment.resource, "notes:read")
        refused(
            rpc(server.base_url, tool_call("create_note", {"text": "x"}), reader),
            403,
            INSUFFICIENT_SCOPE,
        )
        deployment.provider.requests_seen()  # forget those so far
        for _ in range(3):  # asked once: a refusal is kept a while, by the token's hash
            answer = rpc(server.base_url, tool_call("count_notes", {}), "opaque-junk")
            refused(answer, 401, UNAUTHENTICATED)
        assert deployment.provider.requests_seen().count("/token/introspection") == 1
    finally:
        deployment.close()


def test_a_body_over_the_limit_with_a_providers_token_is_413_on_mcp_as_with_an_own_token(
    deployment: Deployment,
) -> None:
    from strictcall.core.jsontext import MAX_SIZE
    from strictcall.errors import REQUEST_TOO_LARGE

    assert deployment.server is not None
    body = json.dumps(tool_call("create_note", {"text": "x" * MAX_SIZE}))
    own = create_token(deployment.db, "u9")
    for token in (deployment.provider.token(deployment.resource), own):
        answer = httpx.post(
            deployment.server.base_url + "/mcp",
            content=body,
            headers={**MCP_HEADERS, "Authorization": f"Bearer {token}"},
            timeout=DEADLINE_S,
        )
        assert refused(answer, 413, REQUEST_TOO_LARGE)["limit"] == MAX_SIZE


def test_a_providers_jwt_is_answered_in_place_without_an_await(deployment: Deployment) -> None:
    """The server's fast path (`answer_now`, a whole /rpc body answered where it arrived) takes
    a provider's JWT once its keys are fetched: no await, no thread, as for an own token."""
    import asyncio
    from contextlib import AsyncExitStack

    from strictcall.identity.settings import load_settings
    from strictcall.server.app import build_app
    from strictcall.storage.sqlite import SQLiteStore

    settings = load_settings(str(deployment.config))
    store = SQLiteStore(str(deployment.db))
    app = build_app(store, oauth=settings)
    token = deployment.provider.token(deployment.resource)
    scope = {
        "type": "http",
        "method": "POST",
        "path": "/rpc",
        "headers": [(b"authorization", f"Bearer {token}".encode())],
    }
    body = json.dumps(tool_call("count_notes", {})).encode()

    async def answered() -> tuple[int, bytes] | None:
        async with AsyncExitStack() as stack:
            for lifespan in app.lifespans:
                await stack.enter_async_context(lifespan())
            deadline = time.monotonic() + DEADLINE_S
            while time.monotonic() < deadline:  # until the keys are fetched, in the background
                answer = app.answer_now(scope, body)
                assert answer is None or isinstance(answer, tuple)  # nothing to await
                if answer is not None and answer[0] != 503:
                    return answer[0], answer[2]
                await asyncio.sleep(0.05)
        return None

    try:
        answer = asyncio.run(answered())
    finally:
        store.close()
    assert answer is not None
    assert answer[0] == 200 and isinstance(json.loads(answer[1])["result"], int)
