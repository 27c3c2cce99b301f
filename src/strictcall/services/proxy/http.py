"""A streamable HTTP upstream's tools/calls by a plain POST, on the session's own HTTP client.

The official client's transport spends two tasks, two memory streams, a model dump and three
validations of the answer on every call it posts; a federation in front of an HTTP server paid
a millisecond of CPU per call for it, four times what the upstream itself spent. Here a call is
one POST with the headers the transport would send (the session's `Mcp-Session-Id` once the
upstream has given one, the negotiated `MCP-Protocol-Version`, the upstream's own credentials
from the client's headers), under an id of its own, its answer read from the JSON body or from
the SSE stream's first message that answers it, and handed back as the parsed JSON-RPC message
(validated once by the caller, as the stdio path's). The session still runs everything else
(initialize, tools/list, list_changed on its GET stream, pings).

Only for a session in the handshake era (2025-11-25 and before): a 2026-07-28 session's
requests carry an envelope the transport stamps, so its calls stay the session's.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import Callable, Mapping
from typing import Final

import anyio
import httpx2
import orjson
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from strictcall.errors import JSONValue, StrictcallError
from strictcall.services.proxy.stdio import AnswerTooLarge

SESSION_HEADER: Final = "mcp-session-id"
DRAIN_S: Final = 0.05
"""How long the rest of an answer's SSE stream is read for: a server ends it right after the
answer; one that keeps it open has its connection closed instead of kept."""
_ACCEPT: Final = "application/json, text/event-stream"
REFUSED_REQUESTS: Final = {
    "sampling/createMessage": "Sampling not supported",
    "elicitation/create": "Elicitation not supported",
    "roots/list": "List roots not supported",
}
"""The requests of a server's the proxy does not pass on, and the MCP SDK's words for each."""
CANCEL_S: Final = 5.0
"""How long the post of a `notifications/cancelled` may take."""
_LEFT: set[asyncio.Task[None]] = set()
"""Posts nobody waits for, kept until done."""


class HttpCallFailed(StrictcallError):
    """The upstream did not answer a call with a JSON-RPC message (an HTTP error status
    without one, an unexpected content type, a stream that ended first)."""

    def __init__(self, status: int) -> None:
        super().__init__(f"the upstream answered HTTP {status} without an answer")
        self.status = status


class HttpCaller:
    """Posts tools/calls to one upstream URL on the session's client."""

    def __init__(self, url: str, client: httpx2.AsyncClient, max_answer_bytes: int) -> None:
        self.url = url
        self.client = client
        self.max_answer_bytes = max_answer_bytes
        self.session_id: str | None = None
        self.version: str | None = None
        self._ids = itertools.count(1)

    def saw(self, response: httpx2.Response) -> None:
        """Keep the session id the upstream gives (on its answer to initialize)."""
        session_id = response.headers.get(SESSION_HEADER)
        if session_id:
            self.session_id = session_id

    def takes_calls(self) -> bool:
        """Whether calls may take this path: the session is in the handshake era."""
        return self.version is not None and self.version not in MODERN_PROTOCOL_VERSIONS

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, JSONValue],
        meta: Mapping[str, JSONValue] | None = None,
        on_notification: Callable[[str, object], object] | None = None,
    ) -> dict[str, JSONValue]:
        """Post a tools/call (with `meta` as its params' `_meta`, when given); its answer, a
        JSON-RPC message read but not checked. The notifications on its answer stream go to
        `on_notification` (method, params), in order, when given.

        Raises:
            httpx2.TransportError: the upstream could not be reached, or the connection broke.
            HttpCallFailed: no JSON-RPC message answered the call.
            AnswerTooLarge: the answer is longer than `max_answer_bytes`.
            orjson.JSONDecodeError: the answer is not JSON.
        """
        request_id = f"strictcall-{next(self._ids)}"
        params: dict[str, object] = {"name": name, "arguments": arguments}
        if meta:
            params["_meta"] = meta
        body = orjson.dumps(
            {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
        )
        headers = {"accept": _ACCEPT, "content-type": "application/json"}
        if self.version is not None:
            headers["mcp-protocol-version"] = self.version
        if self.session_id is not None:
            headers[SESSION_HEADER] = self.session_id
        try:
            async with self.client.stream(
                "POST", self.url, content=body, headers=headers
            ) as response:
                kind = response.headers.get("content-type", "").lower()
                if response.status_code == 404 and self.session_id is not None:
                    raise HttpCallFailed(404)  # the session is gone (the server restarted)
                if kind.startswith("application/json"):
                    answer = orjson.loads(await self._read_capped(response))
                    if type(answer) is dict:
                        return answer
                elif kind.startswith("text/event-stream") and response.status_code < 300:
                    source = httpx2.EventSource(response, max_event_size=self.max_answer_bytes)
                    events = source.__aiter__()
                    try:
                        async for event in events:
                            if not event.data:
                                continue
                            message = orjson.loads(event.data)
                            if type(message) is not dict:
                                continue
                            method = message.get("method")
                            if type(method) is str and "id" in message:
                                # a request of the server's during the call: answered at once
                                self._answer_request(message["id"], method, headers)
                                continue
                            if on_notification is not None and "id" not in message:
                                if type(method) is str:
                                    on_notification(method, message.get("params"))
                                continue
                            if message.get("id") == request_id:
                                # read the stream to its end, which follows at once, so that the
                                # connection is kept for the next call: one left unread is closed
                                with anyio.move_on_after(DRAIN_S):
                                    async for _ in events:
                                        pass
                                return message
                    except httpx2.SSEError:  # an event longer than the cap
                        raise AnswerTooLarge from None
                raise HttpCallFailed(response.status_code)
        except asyncio.CancelledError:  # timed out, or the caller left: the upstream is told
            self._cancel(request_id, headers)
            raise

    def _answer_request(self, request_id: object, method: str, headers: dict[str, str]) -> None:
        """Answer a request the upstream made during a call, at once and without waiting:
        ping with an empty result, any other with the error the MCP SDK gives a client that
        does not offer it (never left unanswered for the upstream to wait on)."""
        if isinstance(request_id, bool) or not isinstance(request_id, str | int):
            return
        answer: dict[str, object] = {"jsonrpc": "2.0", "id": request_id}
        if method == "ping":
            answer["result"] = {}
        elif method in REFUSED_REQUESTS:
            answer["error"] = {"code": -32600, "message": REFUSED_REQUESTS[method]}
        else:
            answer["error"] = {"code": -32601, "message": "Method not found"}
        self._post_later(orjson.dumps(answer), headers)

    def _cancel(self, request_id: str, headers: dict[str, str]) -> None:
        """Post `notifications/cancelled` for a call abandoned (without waiting for it)."""
        body = orjson.dumps(
            {
                "jsonrpc": "2.0",
                "method": "notifications/cancelled",
                "params": {"requestId": request_id, "reason": "abandoned by the caller"},
            }
        )

        self._post_later(body, headers)

    def _post_later(self, body: bytes, headers: dict[str, str]) -> None:
        """Post `body` to the upstream without waiting for it (within `CANCEL_S`)."""

        async def post() -> None:
            with contextlib.suppress(Exception), anyio.move_on_after(CANCEL_S):
                await self.client.post(self.url, content=body, headers=headers)

        task = asyncio.get_running_loop().create_task(post())
        _LEFT.add(task)
        task.add_done_callback(_LEFT.discard)

    async def _read_capped(self, response: httpx2.Response) -> bytes:
        """The body, or AnswerTooLarge as soon as it passes the cap (the rest left unread)."""
        chunks: list[bytes] = []
        size = 0
        async for chunk in response.aiter_bytes():
            size += len(chunk)
            if size > self.max_answer_bytes:
                raise AnswerTooLarge
            chunks.append(chunk)
        return b"".join(chunks)
