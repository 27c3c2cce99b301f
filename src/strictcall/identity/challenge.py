"""What a client needs to find the provider: the protected resource metadata (RFC 9728) and
the `WWW-Authenticate` values of 401 and 403 (RFC 6750 section 3, MCP authorization)."""

from __future__ import annotations

from typing import Final
from urllib.parse import urlsplit, urlunsplit

import orjson

from strictcall.identity.settings import OAuthSettings

WELL_KNOWN: Final = "/.well-known/oauth-protected-resource"


def metadata_url(resource: str) -> str:
    """Where the metadata of `resource` is (RFC 9728 section 3.1: the well-known path goes
    between the host and the resource's own path)."""
    parts = urlsplit(resource)
    path = parts.path.rstrip("/")
    return urlunsplit((parts.scheme, parts.netloc, WELL_KNOWN + path, parts.query, ""))


def metadata_paths(
    settings: OAuthSettings, mounted: tuple[str, ...] = ("/mcp", "/rpc")
) -> frozenset[str]:
    """The paths the metadata is served at: the bare well-known path, its path-aware forms for
    each endpoint (`/.well-known/oauth-protected-resource/mcp`) and for the resource's path."""
    own = urlsplit(settings.resource).path.rstrip("/")
    return frozenset({WELL_KNOWN, WELL_KNOWN + own, *(WELL_KNOWN + path for path in mounted)})


def metadata_document(settings: OAuthSettings) -> bytes:
    """The protected resource metadata, as JSON bytes."""
    document: dict[str, object] = {
        "resource": settings.resource,
        "authorization_servers": [settings.issuer],
        "bearer_methods_supported": ["header"],
        "scopes_supported": list(settings.scopes_supported),
    }
    return orjson.dumps(document)


def _quoted(value: str) -> str:
    # every value here comes from the settings, whose scopes and URLs hold no quote
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def unauthorized(settings: OAuthSettings, *, token_sent: bool) -> bytes:
    """The challenge of a 401: where the metadata is, the scopes every call needs (or all the
    server knows, when no scope is needed for every call), and `invalid_token` when a token
    was sent."""
    parts = [f"resource_metadata={_quoted(metadata_url(settings.resource))}"]
    scopes = settings.scopes if settings.scopes else settings.scopes_supported
    if scopes:
        parts.append(f"scope={_quoted(' '.join(scopes))}")
    if token_sent:
        parts.append('error="invalid_token"')
    return ("Bearer " + ", ".join(parts)).encode("ascii")


def forbidden(settings: OAuthSettings, needed: tuple[str, ...]) -> bytes:
    """The challenge of a 403 for a token without the scopes `needed`."""
    return (
        f"Bearer resource_metadata={_quoted(metadata_url(settings.resource))},"
        f' scope={_quoted(" ".join(needed))}, error="insufficient_scope"'
    ).encode("ascii")
