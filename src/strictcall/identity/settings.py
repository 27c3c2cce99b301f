"""The one place identity from a provider is configured: an `[oauth]` table in a TOML file
(`--config FILE`), with flags for the two values every deployment sets (`--oauth-issuer`,
`--oauth-resource`). Read once at start; a bad value is a `ValueError` naming the key."""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final
from urllib.parse import urlsplit

ASYMMETRIC_ALGORITHMS: Final = frozenset(
    {"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}
)
"""The JWS algorithms a token may be signed with: public-key ones only. `none` and the HMAC
family are never accepted (an HMAC "verified" with a public key is a forgery anyone can make)."""

DEFAULT_ALGORITHMS: Final = ("RS256", "ES256", "PS256", "EdDSA")
DEFAULT_LEEWAY_S: Final = 30.0
DEFAULT_REFRESH_INTERVAL_S: Final = 30.0
DEFAULT_HTTP_TIMEOUT_S: Final = 5.0
DEFAULT_TOKEN_TYPES: Final = ("at+jwt",)
"""The `typ` a JWT's header may name, where it names one (RFC 9068's access token type)."""
DEFAULT_IDENTITY_PREFIX: Final = "oauth:"
"""What a provider's identities are written under, apart from strictcall's own tokens'."""
SECRET_ENV: Final = "STRICTCALL_OAUTH_CLIENT_SECRET"
"""Where the introspection client's secret is read from (never a flag: a process list shows
those)."""


@dataclass(frozen=True, slots=True)
class Introspection:
    """RFC 7662 introspection of opaque tokens, as a client of the provider."""

    client_id: str
    client_secret: str = field(repr=False)
    endpoint: str | None = None
    """None: the provider's metadata names it (`introspection_endpoint`)."""


@dataclass(frozen=True, slots=True)
class OAuthSettings:
    """Whose tokens are accepted and for what.

    `resource` is the server's canonical URI (RFC 8707): a token's `aud` must name it. Scopes in
    `scopes` are needed for every call; `tool_scopes` adds those one tool needs.
    """

    issuer: str
    resource: str
    algorithms: tuple[str, ...] = DEFAULT_ALGORITHMS
    leeway_s: float = DEFAULT_LEEWAY_S
    identity_claim: str = "sub"
    groups_claim: str | None = None
    """The claim naming the caller's groups (e.g. "groups"), which a policy's `group:NAME`
    matches; None: a provider's token names no group."""
    scopes: tuple[str, ...] = ()
    tool_scopes: Mapping[str, tuple[str, ...]] = field(default_factory=lambda: MappingProxyType({}))
    own_tokens: bool = True
    """strictcall's own tokens are accepted too (both may be enabled at once)."""
    own_token_scopes: tuple[str, ...] = ()
    """The scopes strictcall's own tokens hold for `tool_scopes` (they are not held to
    `scopes`): by default none, so a tool named in `tool_scopes` needs a provider's token."""
    identity_prefix: str = DEFAULT_IDENTITY_PREFIX
    """Written before a provider's identity, so that it never names an own token's identity
    (an own token whose identity begins with it is refused); "" only with `own_tokens` off."""
    token_types: tuple[str, ...] = DEFAULT_TOKEN_TYPES
    """The `typ` values a JWT's header may carry (a token without one passes); empty: any."""
    introspection: Introspection | None = None
    refresh_interval_s: float = DEFAULT_REFRESH_INTERVAL_S
    """An unknown `kid` refetches the JWKS at most once per this many seconds."""
    http_timeout_s: float = DEFAULT_HTTP_TIMEOUT_S
    metadata_url: str | None = None
    """None: discovered under the issuer (RFC 8414, then OpenID Connect discovery)."""

    def __post_init__(self) -> None:
        _check_url("issuer", self.issuer)
        _check_url("resource", self.resource)
        if urlsplit(self.resource).fragment:
            raise ValueError("oauth.resource must not have a fragment (RFC 8707)")
        if not self.algorithms:
            raise ValueError("oauth.algorithms must name at least one algorithm")
        for name in self.algorithms:
            if name not in ASYMMETRIC_ALGORITHMS:
                raise ValueError(
                    f"oauth.algorithms: {name!r} is not accepted; use public-key algorithms"
                    f" only: {', '.join(sorted(ASYMMETRIC_ALGORITHMS))}"
                )
        if not 0 <= self.leeway_s <= 300:
            raise ValueError("oauth.leeway_s must be between 0 and 300 seconds")
        if self.refresh_interval_s <= 0 or self.http_timeout_s <= 0:
            raise ValueError("oauth.refresh_interval_s and oauth.http_timeout_s must be > 0")
        if self.identity_claim == "":
            raise ValueError("oauth.identity_claim must name a claim")
        if self.groups_claim == "":
            raise ValueError("oauth.groups_claim must name a claim")
        if self.identity_prefix == "" and self.own_tokens:
            raise ValueError(
                'oauth.identity_prefix = "" needs own_tokens = false: a provider\'s identity'
                " would then name the same caller as an own token of that name"
            )
        if any(not name.isascii() or not name.isprintable() for name in self.token_types):
            raise ValueError("oauth.token_types must be printable ASCII media types")
        scoped = (s for v in self.tool_scopes.values() for s in v)
        for scope in (*self.scopes, *scoped, *self.own_token_scopes):
            if scope == "" or " " in scope or '"' in scope or "\\" in scope:
                raise ValueError(f"oauth scopes: {scope!r} is not a scope token")

    @property
    def scopes_supported(self) -> tuple[str, ...]:
        """Every scope this server asks for, sorted (the metadata's `scopes_supported`)."""
        named = set(self.scopes)
        for needed in self.tool_scopes.values():
            named.update(needed)
        return tuple(sorted(named))


def _check_url(key: str, value: str) -> None:
    parts = urlsplit(value)
    if parts.scheme not in ("https", "http") or parts.netloc == "" or not value.isascii():
        raise ValueError(f"oauth.{key} must be an http(s) URL, got {value!r}")


def _strings(key: str, value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ValueError(f"oauth.{key} must be a list of strings")
    return tuple(value)


def settings_from_table(
    table: Mapping[str, Any],
    *,
    issuer: str | None = None,
    resource: str | None = None,
    environ: Mapping[str, str] = os.environ,
) -> OAuthSettings:
    """Settings from an `[oauth]` table, `issuer` and `resource` (flags) overriding its own.

    Raises:
        ValueError: a key is unknown, missing or of the wrong type (the message names it).
    """
    known = {
        "issuer",
        "resource",
        "algorithms",
        "leeway_s",
        "identity_claim",
        "groups_claim",
        "scopes",
        "tool_scopes",
        "own_tokens",
        "own_token_scopes",
        "identity_prefix",
        "token_types",
        "introspection",
        "refresh_interval_s",
        "http_timeout_s",
        "metadata_url",
    }
    unknown = sorted(set(table) - known)
    if unknown:
        raise ValueError(f"oauth: unknown key {unknown[0]!r} (known: {', '.join(sorted(known))})")
    issuer = issuer if issuer is not None else table.get("issuer")
    resource = resource if resource is not None else table.get("resource")
    if not isinstance(issuer, str) or not isinstance(resource, str):
        raise ValueError("oauth: both issuer and resource must be given (a URL each)")
    more: dict[str, Any] = {}
    for key in ("leeway_s", "refresh_interval_s", "http_timeout_s"):
        if key in table:
            value = table[key]
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ValueError(f"oauth.{key} must be a number of seconds")
            more[key] = float(value)
    for key in ("identity_claim", "groups_claim", "metadata_url", "identity_prefix"):
        if key in table:
            if not isinstance(table[key], str):
                raise ValueError(f"oauth.{key} must be a string")
            more[key] = table[key]
    if "own_tokens" in table:
        if not isinstance(table["own_tokens"], bool):
            raise ValueError("oauth.own_tokens must be true or false")
        more["own_tokens"] = table["own_tokens"]
    for key in ("algorithms", "scopes", "own_token_scopes", "token_types"):
        if key in table:
            more[key] = _strings(key, table[key])
    if "tool_scopes" in table:
        tools = table["tool_scopes"]
        if not isinstance(tools, Mapping):
            raise ValueError("oauth.tool_scopes must be a table of tool name to scopes")
        more["tool_scopes"] = MappingProxyType(
            {name: _strings(f"tool_scopes.{name}", value) for name, value in tools.items()}
        )
    if "introspection" in table:
        more["introspection"] = _introspection(table["introspection"], environ)
    return OAuthSettings(issuer=issuer, resource=resource, **more)


def _introspection(value: Any, environ: Mapping[str, str]) -> Introspection:
    if not isinstance(value, Mapping) or not isinstance(value.get("client_id"), str):
        raise ValueError("oauth.introspection must be a table with a client_id")
    unknown = sorted(set(value) - {"client_id", "endpoint"})
    if unknown:
        raise ValueError(f"oauth.introspection: unknown key {unknown[0]!r}")
    secret = environ.get(SECRET_ENV)
    if secret is None or secret == "":
        raise ValueError(f"oauth.introspection needs the client's secret in ${SECRET_ENV}")
    endpoint = value.get("endpoint")
    if endpoint is not None:
        if not isinstance(endpoint, str):
            raise ValueError("oauth.introspection.endpoint must be a URL")
        _check_url("introspection.endpoint", endpoint)
    return Introspection(value["client_id"], secret, endpoint)


def load_settings(
    path: str | None,
    *,
    issuer: str | None = None,
    resource: str | None = None,
    beside: frozenset[str] = frozenset(),
) -> OAuthSettings | None:
    """The settings from the `[oauth]` table of the TOML file at `path` and the flags, or None
    when neither names an issuer (strictcall's own tokens only). `beside`: the other tables
    the file may hold, which another reader checks (a federation's config).

    Raises:
        ValueError: the file cannot be read or parsed, or its `[oauth]` table is not valid.
    """
    table: Mapping[str, Any] = {}
    if path is not None:
        try:
            document = tomllib.loads(Path(path).read_text(encoding="utf-8"))
        except OSError as exc:
            raise ValueError(f"cannot read {path}: {exc.strerror or type(exc).__name__}") from None
        except tomllib.TOMLDecodeError as exc:
            raise ValueError(
                f"{path} is not valid TOML: {exc}; fix that line and start again"
            ) from None
        except UnicodeDecodeError:
            raise ValueError(f"{path} is not a TOML file (not UTF-8 text)") from None
        known = {"oauth"} | beside
        unknown = sorted(set(document) - known)
        if unknown:
            raise ValueError(
                f"{path}: unknown table {unknown[0]!r} (known: {', '.join(sorted(known))})"
            )
        oauth = document.get("oauth", {})
        if not isinstance(oauth, Mapping):
            raise ValueError(f"{path}: oauth must be a table")
        table = oauth
    if issuer is None and resource is None and "issuer" not in table:
        if table:
            raise ValueError(f"{path}: oauth needs an issuer")
        return None
    return settings_from_table(table, issuer=issuer, resource=resource)
