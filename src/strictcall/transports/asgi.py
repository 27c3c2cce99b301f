"""ASGI for strictcall's wires: the type aliases, the caller's identity in the scope, the bearer
token and body readers, and the small response writers every HTTP wire shares (no framework).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine, MutableMapping, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from contextvars import ContextVar
from typing import Any, Final

import orjson

from strictcall.errors import StrictcallError

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]
Response = tuple[int, list[tuple[bytes, bytes]], bytes]
"""An answer's status, headers and body."""
Later = Coroutine[Any, Any, Response]
"""An answer made in place once awaited (a call to an async tool, e.g. a proxied one): the
server awaits it in a task of its own, without the ASGI request cycle around it. Once made it
must be awaited (what it holds, a place among the calls in flight, is let go only then)."""

JSON_HEADERS: Final = [(b"content-type", b"application/json")]

IDENTITY_KEY: Final = "strictcall.identity"
"""The scope key under which a mounted app finds the caller's identity (a str)."""

CLAIMS_KEY: Final = "strictcall.claims"
"""The scope key under which a mounted app finds the caller's token's claims ("scope:S", a
frozenset; absent for strictcall's own tokens, which no scope limits)."""


def bearer_token(scope: Scope) -> str | None:
    """The token of an `Authorization: Bearer <token>` header, or None."""
    for name, value in scope["headers"]:
        if name == b"authorization":
            return token_of(value)
    return None


def token_of(authorization: bytes) -> str | None:
    """The token of an Authorization header's value `Bearer <token>`, or None."""
    scheme, _, token = authorization.partition(b" ")
    if scheme.lower() != b"bearer" or not token.strip():
        return None
    try:
        return str(token.strip().decode("ascii"))
    except UnicodeDecodeError:
        return None


def declared_length(scope: Scope) -> int:
    """The body length a request's Content-Length declares; 0 when it declares none (a
    malformed one is refused by the HTTP parser before the app sees it)."""
    for name, value in scope["headers"]:
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return 0
    return 0


class ClientGone(StrictcallError):
    """The client disconnected before its request's body had arrived: nothing to answer."""


async def read_body(receive: Receive, limit: int) -> bytes | None:
    """The request body, or None as soon as it is longer than `limit` bytes.

    Raises:
        ClientGone: the client disconnected first.
    """
    chunks = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientGone
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def error_body(status: int) -> bytes:
    return orjson.dumps({"error": {404: "not found", 405: "method not allowed"}[status]})


def response_headers(
    body: bytes,
    *,
    allow: bytes | None = None,
    authenticate: bytes | None = None,
    retry_after: bytes | None = None,
) -> list[tuple[bytes, bytes]]:
    headers = list(JSON_HEADERS) if body else []
    headers.append((b"content-length", str(len(body)).encode("ascii")))
    if allow is not None:
        headers.append((b"allow", allow))
    if authenticate is not None:
        headers.append((b"www-authenticate", authenticate))
    if retry_after is not None:
        headers.append((b"retry-after", retry_after))
    return headers


async def send_response(send: Send, response: Response) -> None:
    status, headers, body = response
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def respond(send: Send, status: int, body: bytes, *, allow: bytes | None = None) -> None:
    await send_response(send, (status, response_headers(body, allow=allow), body))


async def run_lifespans(
    lifespans: Sequence[Callable[[], AbstractAsyncContextManager[None]]],
    receive: Receive,
    send: Send,
) -> None:
    """Enter `lifespans` at startup and leave them at shutdown, in this one task (a task group
    inside one must be left by the task that entered it)."""
    stack = AsyncExitStack()
    try:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                try:
                    for lifespan in lifespans:
                        await stack.enter_async_context(lifespan())
                except Exception as exc:
                    await stack.aclose()
                    await send({"type": "lifespan.startup.failed", "message": repr(exc)})
                    return
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                try:
                    await stack.aclose()
                except Exception as exc:
                    await send({"type": "lifespan.shutdown.failed", "message": repr(exc)})
                    return
                await send({"type": "lifespan.shutdown.complete"})
                return
    finally:  # cancelled before shutdown: still leave them here, in the task that entered them
        await stack.aclose()


CONNECTION_GONE: Final[ContextVar[list[Callable[[], None]] | None]] = ContextVar(
    "strictcall_connection_gone", default=None
)
"""What to do when the connection of the request being answered closes (the server runs an
answer it awaits with a list here, and calls each entry once the client is gone)."""
