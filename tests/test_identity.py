"""The identity layer's pure parts, without a provider: the `[oauth]` settings refuse what would
weaken them, the metadata's address and the challenges are as RFC 9728 and RFC 6750 write
them, and a body's tool calls are read for their scopes."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from servers import strictcall
from strictcall.identity.challenge import (
    WELL_KNOWN,
    forbidden,
    metadata_document,
    metadata_paths,
    metadata_url,
    unauthorized,
)
from strictcall.identity.fetch import discovery_urls
from strictcall.identity.principal import Failure, Principal, Refused, missing_scopes, seconds
from strictcall.identity.settings import (
    SECRET_ENV,
    OAuthSettings,
    load_settings,
    settings_from_table,
)
from strictcall.identity.verifier import OAuthVerifier
from strictcall.server.bearer import called_tools

ISSUER = "https://idp.example.com"
RESOURCE = "https://gw.example.com"


@pytest.mark.parametrize("alg", ["none", "HS256", "HS512", "RS1", ""])
def test_none_hmac_and_unknown_algorithms_are_refused_at_start(alg: str) -> None:
    with pytest.raises(ValueError, match=r"oauth\.algorithms"):
        OAuthSettings(ISSUER, RESOURCE, algorithms=(alg,))


@pytest.mark.parametrize(
    ("table", "key"),
    [
        ({"issuer": ISSUER}, "resource"),
        ({"resource": RESOURCE}, "issuer"),
        ({"issuer": ISSUER, "resource": RESOURCE, "audience": "x"}, "audience"),
        ({"issuer": ISSUER, "resource": RESOURCE, "leeway_s": True}, "leeway_s"),
        ({"issuer": ISSUER, "resource": RESOURCE, "leeway_s": 3600}, "leeway_s"),
        ({"issuer": ISSUER, "resource": RESOURCE, "scopes": "a b"}, "scopes"),
        ({"issuer": ISSUER, "resource": RESOURCE, "scopes": ['a"b']}, "scope"),
        ({"issuer": ISSUER, "resource": RESOURCE, "own_tokens": "no"}, "own_tokens"),
        ({"issuer": ISSUER, "resource": RESOURCE, "identity_claim": ""}, "identity_claim"),
        ({"issuer": "ftp://idp", "resource": RESOURCE}, "issuer"),
        ({"issuer": ISSUER, "resource": RESOURCE + "#frag"}, "fragment"),
        ({"issuer": ISSUER, "resource": RESOURCE, "introspection": {"client_id": "c"}}, SECRET_ENV),
        ({"issuer": ISSUER, "resource": RESOURCE, "identity_prefix": ""}, "identity_prefix"),
        ({"issuer": ISSUER, "resource": RESOURCE, "identity_prefix": 7}, "identity_prefix"),
        ({"issuer": ISSUER, "resource": RESOURCE, "token_types": "at+jwt"}, "token_types"),
        ({"issuer": ISSUER, "resource": RESOURCE, "token_types": ["at+jwt\n"]}, "token_types"),
        ({"issuer": ISSUER, "resource": RESOURCE, "own_token_scopes": ["a b"]}, "scope"),
    ],
)
def test_a_bad_oauth_table_is_a_value_error_naming_what(table: dict[str, object], key: str) -> None:
    with pytest.raises(ValueError, match=key.replace("$", r"\$")):
        settings_from_table(table, environ={})


def test_the_toml_file_and_the_flags_make_one_settings(tmp_path: Path) -> None:
    path = tmp_path / "strictcall.toml"
    path.write_text(
        "[oauth]\n"
        f'issuer = "{ISSUER}"\n'
        'resource = "https://old.example"\n'
        'scopes = ["notes:read"]\n'
        "own_tokens = false\n"
        "[oauth.tool_scopes]\n"
        'create_note = ["notes:write"]\n'
    )
    settings = load_settings(str(path), resource=RESOURCE)
    assert settings is not None
    assert (settings.issuer, settings.resource, settings.own_tokens) == (ISSUER, RESOURCE, False)
    assert settings.scopes_supported == ("notes:read", "notes:write")
    assert dict(settings.tool_scopes) == {"create_note": ("notes:write",)}
    assert settings.algorithms == ("RS256", "ES256", "PS256", "EdDSA")


def test_without_an_issuer_there_is_no_provider_and_a_bad_file_says_so(tmp_path: Path) -> None:
    assert load_settings(None) is None
    empty = tmp_path / "empty.toml"
    empty.write_text("")
    assert load_settings(str(empty)) is None
    for text, what in (("[oauth]\nresource = 'https://x'\n", "issuer"), ("[other]\n", "unknown")):
        bad = tmp_path / "bad.toml"
        bad.write_text(text)
        with pytest.raises(ValueError, match=what):
            load_settings(str(bad))
    with pytest.raises(ValueError, match="not valid TOML"):
        (tmp_path / "x.toml").write_text("[oauth")
        load_settings(str(tmp_path / "x.toml"))
    with pytest.raises(ValueError, match="cannot read"):
        load_settings(str(tmp_path / "missing.toml"))


@pytest.mark.parametrize(
    ("resource", "url"),
    [
        ("https://gw.example.com", "https://gw.example.com" + WELL_KNOWN),
        ("https://gw.example.com/", "https://gw.example.com" + WELL_KNOWN),
        ("https://gw.example.com/mcp", "https://gw.example.com" + WELL_KNOWN + "/mcp"),
        ("http://127.0.0.1:8765/team/a", "http://127.0.0.1:8765" + WELL_KNOWN + "/team/a"),
    ],
)
def test_the_metadata_url_puts_the_well_known_path_before_the_resources(
    resource: str, url: str
) -> None:
    assert metadata_url(resource) == url
    assert url.removeprefix(url.split(WELL_KNOWN)[0]) in metadata_paths(
        OAuthSettings(ISSUER, resource)
    )


def test_the_challenges_name_the_metadata_the_scopes_and_the_error() -> None:
    settings = OAuthSettings(
        ISSUER, RESOURCE, scopes=("notes:read",), tool_scopes={"create_note": ("notes:write",)}
    )
    where = f'resource_metadata="{RESOURCE}{WELL_KNOWN}"'
    assert (
        unauthorized(settings, token_sent=False) == f'Bearer {where}, scope="notes:read"'.encode()
    )
    assert unauthorized(settings, token_sent=True).endswith(b', error="invalid_token"')
    assert forbidden(settings, ("notes:read", "notes:write")) == (
        f'Bearer {where}, scope="notes:read notes:write", error="insufficient_scope"'.encode()
    )
    open_to_all = OAuthSettings(ISSUER, RESOURCE)
    assert unauthorized(open_to_all, token_sent=False) == f"Bearer {where}".encode()
    assert metadata_document(open_to_all) == (
        b'{"resource":"https://gw.example.com","authorization_servers":["https://idp.example.com"],'
        b'"bearer_methods_supported":["header"],"scopes_supported":[]}'
    )


def test_discovery_tries_rfc_8414_then_openid_connect() -> None:
    assert discovery_urls("https://idp.example.com/tenant") == (
        "https://idp.example.com/.well-known/oauth-authorization-server/tenant",
        "https://idp.example.com/tenant/.well-known/openid-configuration",
    )


def test_a_bodys_tool_calls_are_found_in_a_request_or_a_batch_and_nothing_else() -> None:
    one = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"create_note"}}'
    assert list(called_tools(one)) == ["create_note"]
    batch = b"[" + one + b',{"method":"tools/list"},{"method":"tools/call","params":{"name":7}}]'
    assert list(called_tools(batch)) == ["create_note"]
    assert list(called_tools(b"{not json")) == []
    assert list(called_tools(b'"tools/call"')) == []


def test_scopes_missing_and_numeric_dates() -> None:
    assert missing_scopes(None, ("a",)) == ()  # strictcall's own token: no scope limits it
    assert missing_scopes(frozenset(), ("a", "b")) == ("a", "b")
    assert missing_scopes(frozenset({"b"}), ("a", "b")) == ("a",)
    assert (seconds(5), seconds(2.5), seconds(True), seconds("5"), seconds(None)) == (
        5.0,
        2.5,
        None,
        None,
        None,
    )


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["serve", "--mcp-stdio", "--identity", "u1", "--oauth-issuer", ISSUER], "--oauth-issuer"),
        (["serve", "--oauth-issuer", ISSUER], "resource"),
        (["serve", "--oauth-issuer", ISSUER, "--oauth-resource", "gw"], "oauth.resource"),
        (["serve", "--config", "{tmp}/missing.toml"], "cannot read"),
        (["proxy", "--upstream-cmd", "x", "--stdio", "--identity", "u1", "--config", "c"],
         "--config"),
        (["proxy", "--upstream-cmd", "x", "--upstream-token-url", "http://t/token",
          "--upstream-client-id", "c"], "--upstream-url"),
        (["proxy", "--upstream-url", "http://u/mcp", "--upstream-token-url", "http://t/token"],
         "--upstream-client-id"),
        (["proxy", "--upstream-url", "http://u/mcp", "--upstream-token-url", "http://t/token",
          "--upstream-client-id", "c"], "STRICTCALL_UPSTREAM_CLIENT_SECRET"),
    ],
    ids=["mcp-stdio", "no-resource", "bad-resource", "no-file", "proxy-stdio", "no-url",
         "no-client", "no-secret"],
)  # fmt: skip
def test_identity_flags_that_cannot_work_are_a_usage_error_in_one_line(
    argv: list[str], said: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("STRICTCALL_UPSTREAM_CLIENT_SECRET", raising=False)
    argv = [part.replace("{tmp}", str(tmp_path)) for part in argv]
    done = strictcall(*argv, "--db", str(tmp_path / "x.sqlite3"))
    assert done.returncode == 2
    assert said in done.stderr and done.stderr.count("\n") == 1, done.stderr


def test_a_flood_of_refused_tokens_is_one_log_line_a_second_per_reason(
    caplog: pytest.LogCaptureFixture,
) -> None:
    now = [1000.0]
    verifier = OAuthVerifier(OAuthSettings("http://127.0.0.1:9", RESOURCE), clock=lambda: now[0])

    async def flood() -> None:
        async with verifier.lifespan():  # its first key fetch fails (nothing listens on 9)
            for _ in range(50):
                assert verifier.check_now("a.b.c") == Refused(Failure.MALFORMED)
            now[0] += 1.0
            assert verifier.check_now("a.b.c") == Refused(Failure.MALFORMED)

    with caplog.at_level(logging.WARNING, logger="strictcall"):
        asyncio.run(flood())
    said = [record.getMessage() for record in caplog.records if "refused" in record.getMessage()]
    assert said == [
        "strictcall: a bearer token was refused: malformed",
        "strictcall: a bearer token was refused: malformed (and 49 more since)",
    ]


def test_a_jwts_claims_name_the_caller_and_its_scopes_in_either_form() -> None:
    from strictcall.identity.jwts import principal_of

    settings = OAuthSettings(ISSUER, RESOURCE)
    assert principal_of({"sub": "u1", "scope": "a b", "exp": 5}, settings) == Principal(
        "oauth:u1", frozenset({"a", "b"}), 5.0
    )
    cases: list[tuple[dict[str, object], set[str]]] = [
        ({"sub": "u1", "scp": ["a", 7, "b"]}, {"a", "b"}),
        ({"sub": "u1", "scp": "a"}, {"a"}),
        ({"sub": "u1", "scope": 7}, set()),
    ]
    for claims, scopes in cases:
        assert principal_of(claims, settings) == Principal("oauth:u1", frozenset(scopes))
    nobody: list[dict[str, object]] = [{}, {"sub": ""}, {"sub": 7}, {"sub": None}]
    for claims in nobody:
        assert principal_of(claims, settings) == Refused(Failure.NO_IDENTITY)
    by_client = OAuthSettings(ISSUER, RESOURCE, identity_claim="client_id")
    assert principal_of({"sub": "x", "client_id": "agent"}, by_client) == Principal(
        "oauth:agent", frozenset()
    )


def test_a_key_verifies_only_its_own_algorithm_and_a_token_must_name_the_audience() -> None:
    import time

    import jwt
    from cryptography.hazmat.primitives.asymmetric import ec
    from jwt.algorithms import ECAlgorithm

    from strictcall.identity.jwts import header_of, signing_key, verify

    private = ec.generate_private_key(ec.SECP256R1())
    public_jwk = ECAlgorithm.to_jwk(private.public_key(), as_dict=True)
    settings = OAuthSettings(ISSUER, RESOURCE)
    assert signing_key({**public_jwk, "alg": "ES384"}, "ES256") == Refused(Failure.ALGORITHM)
    assert signing_key(public_jwk, "RS256") == Refused(Failure.ALGORITHM)  # an EC key
    assert signing_key({"kty": "oct", "k": "c2VjcmV0"}, "ES256") == Refused(Failure.ALGORITHM)
    key = signing_key(public_jwk, "ES256")
    assert not isinstance(key, Refused)
    now = int(time.time())
    claims = {"iss": ISSUER, "aud": RESOURCE, "sub": "u1", "exp": now + 60}
    good = jwt.encode(claims, private, algorithm="ES256", headers={"kid": "k", "typ": "at+jwt"})
    assert header_of(good, settings) == ("ES256", "k")
    assert verify(good, key, "ES256", settings) == Principal("oauth:u1", frozenset(), now + 60.0)
    plain = jwt.encode(claims, private, algorithm="ES256", headers={"kid": "k"})  # typ: JWT
    assert header_of(plain, settings) == Refused(Failure.TYPE)
    either = OAuthSettings(ISSUER, RESOURCE, token_types=("at+jwt", "JWT"))
    assert header_of(plain, either) == ("ES256", "k")
    no_aud = jwt.encode({k: v for k, v in claims.items() if k != "aud"}, private, "ES256")
    assert verify(no_aud, key, "ES256", settings) == Refused(Failure.AUDIENCE)
    tampered = good[:-4] + ("AAAA" if not good.endswith("AAAA") else "BBBB")
    assert verify(tampered, key, "ES256", settings) == Refused(Failure.SIGNATURE)
    numeric_kid = "eyJhbGciOiJFUzI1NiIsImtpZCI6N30." + good.split(".", 1)[1]  # "kid": 7
    assert header_of(numeric_kid, settings) == Refused(Failure.MALFORMED)


def test_a_bare_provider_namespace_is_allowed_only_without_own_tokens() -> None:
    table = {"issuer": ISSUER, "resource": RESOURCE, "identity_prefix": "", "own_tokens": False}
    settings = settings_from_table(table, environ={})
    assert settings.identity_prefix == ""
    assert OAuthSettings(ISSUER, RESOURCE).identity_prefix == "oauth:"
