"""What admission (`strictcall.server.admission`) needs of an identity provider beyond the
provider's own layer (`strictcall.identity`): where a provider's token's `Principal` sits in
the ASGI scope, its claims as the policy and the listing read them, the tool names a body
calls (for `ToolScopes`), and the protected resource metadata's route (RFC 9728), open to
anyone."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

import orjson

from strictcall.core.policy.model import Claims, scope_claims
from strictcall.identity.challenge import metadata_document
from strictcall.identity.principal import Principal
from strictcall.identity.settings import OAuthSettings
from strictcall.transports.asgi import Receive, Scope, Send, response_headers

PRINCIPAL_KEY: Final = "strictcall.principal"
"""Where admission puts a provider's token's `Principal` (its scopes) in the ASGI scope (absent:
strictcall's own token, which no scope limits)."""

_REALM: Final = b'Bearer realm="strictcall"'
_CLAIMS_KEPT: Final = 1024
_claims: dict[tuple[frozenset[str], frozenset[str]], Claims] = {}
"""The claims of the scope and group sets seen lately: one frozenset per pair, its hash
computed once."""


def claims_of(principal: Principal) -> Claims:
    """A provider's token's claims, as the policy and the registry read them: its scopes as
    "scope:S" and its groups as "group:G" (an empty set for a token without either, which no
    scoped tool is shown to)."""
    scopes = principal.scopes if principal.scopes is not None else frozenset()
    key = (scopes, principal.groups)
    claims = _claims.get(key)
    if claims is None:
        if len(_claims) >= _CLAIMS_KEPT:
            _claims.clear()
        claims = _claims[key] = scope_claims(scopes, principal.groups)
    return claims


def called_tools(body: bytes | bytearray) -> Iterable[str]:
    """The tool names of the tools/call requests in a JSON-RPC body (one request or a batch);
    nothing for a body that is not JSON (the transport answers that)."""
    try:
        message = orjson.loads(body)
    except orjson.JSONDecodeError:
        return ()
    messages = message if isinstance(message, list) else [message]
    names = []
    for item in messages:
        if isinstance(item, dict) and item.get("method") == "tools/call":
            params = item.get("params")
            name = params.get("name") if isinstance(params, dict) else None
            if isinstance(name, str):
                names.append(name)
    return names


class MetadataApp:
    """GET the protected resource metadata (RFC 9728), open to anyone (browsers too: it says
    nothing a token does not)."""

    def __init__(self, settings: OAuthSettings) -> None:
        self._body = metadata_document(settings)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        method = scope["method"]
        cors = [(b"access-control-allow-origin", b"*")]
        if method == "OPTIONS":
            headers = [*cors, (b"access-control-allow-methods", b"GET, HEAD, OPTIONS")]
            await send({"type": "http.response.start", "status": 204, "headers": headers})
            await send({"type": "http.response.body", "body": b""})
            return
        if method not in ("GET", "HEAD"):
            body = orjson.dumps({"error": "method_not_allowed"})
            headers = response_headers(body, allow=b"GET, HEAD, OPTIONS")
            await send({"type": "http.response.start", "status": 405, "headers": headers})
            await send({"type": "http.response.body", "body": body})
            return
        headers = [*response_headers(self._body), *cors, (b"cache-control", b"max-age=300")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": b"" if method == "HEAD" else self._body})
