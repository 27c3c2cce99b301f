"""Who is calling, from `Authorization: Bearer <token>` and nothing else: strictcall's own
tokens (looked up in the store) and, when an `[oauth]` block is configured, the identity
provider's (`strictcall.identity`), both at once if so configured; and the scopes a provider's
token must carry.

    no token, or a refused one      401 unauthenticated, WWW-Authenticate: Bearer
                                    resource_metadata="...", scope="..." (+ error="invalid_token"
                                    when a token was sent)
    the store or provider is down   503 auth_unavailable, retryable, Retry-After
    a valid token without a scope   403 insufficient_scope, the scopes in the challenge
    the call needs

Without an `[oauth]` block the 401 challenge stays `Bearer realm="strictcall"`. Every refusal is
audited; none says anything of the token.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from types import MappingProxyType
from typing import Final

import orjson

from strictcall.core.record import refusal_record
from strictcall.core.refusals import AUTH_DOWN, NO_TOKEN
from strictcall.errors import AUTH_UNAVAILABLE, INSUFFICIENT_SCOPE, RETRY_AFTER_MS, Rejection
from strictcall.identity.challenge import forbidden, metadata_document, unauthorized
from strictcall.identity.principal import Principal, Refused, Unavailable, missing_scopes
from strictcall.identity.settings import OAuthSettings
from strictcall.identity.verifier import OAuthVerifier
from strictcall.storage import AwaitedNotes, Store, StoreUnavailable
from strictcall.transports.asgi import Receive, Response, Scope, Send, response_headers
from strictcall.transports.jsonrpc import Recorder, refusal_reply

PRINCIPAL_KEY: Final = "strictcall.principal"
"""Where admission puts a provider's token's `Principal` (its scopes) in the ASGI scope (absent:
strictcall's own token, which no scope limits)."""

_REALM: Final = b'Bearer realm="strictcall"'


class BearerCheck:
    """The token check of admission, answered in place where it can be (`admit_now`)."""

    def __init__(self, store: Store, record: Recorder, oauth: OAuthVerifier | None = None) -> None:
        self.store: Final = store
        self.oauth: Final = oauth
        self._record = record
        self._awaited = store if isinstance(store, AwaitedNotes) else None
        settings = None if oauth is None else oauth.settings
        self.settings: Final[OAuthSettings | None] = settings
        self._own: Final = settings is None or settings.own_tokens
        self._tool_scopes = {} if settings is None else dict(settings.tool_scopes)
        self.scopes_by_tool: Final = bool(self._tool_scopes)
        """Whether some tool needs a scope of its own (then calls' bodies are looked into)."""

    def admit_now(self, token: str | None) -> Principal | Response | None:
        """The caller, or the refusal, without waiting; None when the check must be awaited
        (`admit`): a token store a round trip away, a key to fetch, a provider to ask."""
        if token is None:
            return self._unauthorized(token_sent=False)
        oauth = self.oauth
        if oauth is not None and oauth.owns(token):
            verdict = oauth.check_now(token)
            return None if verdict is None else self._judged(verdict)
        if self._awaited is not None:
            return None
        if not self._own:
            return self._unauthorized(token_sent=True)
        try:
            identity = self.store.identity_for_token(token)
        except StoreUnavailable:
            return self._refusal(503, AUTH_DOWN)
        if identity is None:
            return self._unauthorized(token_sent=True)
        return Principal(identity)

    async def admit(self, token: str | None) -> Principal | Response:
        """The caller, or the refusal."""
        now = self.admit_now(token)
        if now is not None:
            return now
        assert token is not None
        oauth = self.oauth
        if oauth is not None and oauth.owns(token):
            return self._judged(await oauth.check(token))
        awaited = self._awaited
        assert awaited is not None
        if not self._own:
            return self._unauthorized(token_sent=True)
        try:
            identity = await awaited.identity_for_token_async(token)
        except StoreUnavailable:
            return self._refusal(503, AUTH_DOWN)
        if identity is None:
            return self._unauthorized(token_sent=True)
        return Principal(identity)

    def _judged(self, verdict: Principal | Refused | Unavailable) -> Principal | Response:
        if isinstance(verdict, Refused):
            return self._unauthorized(token_sent=True)
        if isinstance(verdict, Unavailable):
            retry_ms = max(RETRY_AFTER_MS, math.ceil(verdict.retry_after_s * 1000))
            refusal = Rejection(AUTH_UNAVAILABLE, MappingProxyType({"retry_after_ms": retry_ms}))
            return self._refusal(503, refusal)
        settings = self.settings
        assert settings is not None
        if settings.scopes:
            missing = missing_scopes(verdict.scopes, settings.scopes)
            if missing:
                return self.insufficient(verdict, settings.scopes, None)
        return verdict

    def scope_refusal(self, principal: Principal, body: bytes | bytearray) -> Response | None:
        """403 when a tools/call in `body` names a tool whose scopes the caller lacks."""
        if principal.scopes is None or not self.scopes_by_tool:
            return None
        for tool in called_tools(body):
            needed = self._tool_scopes.get(tool)
            if needed is not None and missing_scopes(principal.scopes, needed):
                return self.insufficient(principal, needed, tool)
        return None

    def insufficient(
        self, principal: Principal, needed: tuple[str, ...], tool: str | None
    ) -> Response:
        """403 insufficient_scope for `needed` (the call's scopes and every call's), audited."""
        settings = self.settings
        assert settings is not None
        asked = tuple(dict.fromkeys((*settings.scopes, *needed)))
        refusal = Rejection(INSUFFICIENT_SCOPE, MappingProxyType({"scope": " ".join(asked)}))
        self._record(refusal_record(refusal.as_error(), principal.identity, tool=tool))
        body = orjson.dumps(refusal_reply(None, refusal))
        return 403, response_headers(body, authenticate=forbidden(settings, asked)), body

    def _unauthorized(self, *, token_sent: bool) -> Response:
        settings = self.settings
        challenge = _REALM if settings is None else unauthorized(settings, token_sent=token_sent)
        self._audit(NO_TOKEN, None)
        body = orjson.dumps(refusal_reply(None, NO_TOKEN))
        return 401, response_headers(body, authenticate=challenge), body

    def _refusal(self, status: int, refusal: Rejection) -> Response:
        self._audit(refusal, None)
        body = orjson.dumps(refusal_reply(None, refusal))
        retry_s = -(-int(refusal.details["retry_after_ms"]) // 1000)  # whole seconds, up
        return status, response_headers(body, retry_after=str(retry_s).encode("ascii")), body

    def _audit(self, refusal: Rejection, identity: str | None) -> None:
        self._record(refusal_record(refusal.as_error(), identity))


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
