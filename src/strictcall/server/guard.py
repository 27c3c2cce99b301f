"""The connection's guard: deadlines for a request's headers and body, and a cap on connections.

uvicorn times out an idle keep-alive connection, but not a client that sends its request slowly:
a connection that trickles one header byte a second stays open for as long as the client likes,
and a few hundred of them hold every connection a server can take. `guarded_protocol` gives
uvicorn's httptools protocol (with its writes coalesced, `strictcall.server.coalesce`) three limits:

- a request's headers must arrive within `header_timeout_s` of its first byte (or of the
  connection, for its first request): else 408 and the connection is closed;
- its body must keep up a minimum rate: `body_grace_s`, plus one second per `body_min_rate`
  bytes received; else the connection is closed (the app sees the client disconnect);
- at most `max_connections` are open at once: one more is answered 503 and closed at once;
- a request line longer than `MAX_REQUEST_LINE_BYTES` is answered 414, a head (line and headers)
  longer than `MAX_HEADER_BYTES` 431, and the connection closed: counted as the bytes arrive,
  before the parser sees more of them (httptools spends quadratic time on one long header
  line, and buffers what it is given);
- a request to switch protocols (`Upgrade:`, a WebSocket handshake among them) is answered 400
  and closed: nothing here speaks another protocol, and uvicorn would hand a WebSocket to the
  app, which answers none (500).

None of this holds a worker: the deadlines are timers on the event loop. A connection keeps at
most one timer, moved only when a deadline comes sooner than it: a request that ends before its
deadline costs two timestamps, not a timer made and cancelled (the timer, when it fires, finds
the next deadline, or none).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Final

from strictcall.server.coalesce import CoalescingHttpToolsProtocol
from strictcall.server.edge import MAX_HEADER_BYTES, MAX_REQUEST_LINE_BYTES, EdgeLimits

_TIMED_OUT: Final = (
    b"HTTP/1.1 408 Request Timeout\r\ncontent-type: text/plain; charset=utf-8\r\n"
    b"content-length: 16\r\nconnection: close\r\n\r\nrequest too slow"
)
_FULL: Final = (
    b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; charset=utf-8\r\n"
    b"retry-after: 1\r\ncontent-length: 20\r\nconnection: close\r\n\r\ntoo many connections"
)

_URI_TOO_LONG: Final = (
    b"HTTP/1.1 414 URI Too Long\r\ncontent-type: text/plain; charset=utf-8\r\n"
    b"content-length: 21\r\nconnection: close\r\n\r\nrequest line too long"
)
_HEAD_TOO_LARGE: Final = (
    b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: text/plain; charset=utf-8"
    b"\r\ncontent-length: 25\r\nconnection: close\r\n\r\nrequest headers too large"
)
_NO_UPGRADE: Final = (
    b"HTTP/1.1 400 Bad Request\r\ncontent-type: text/plain; charset=utf-8\r\n"
    b"content-length: 21\r\nconnection: close\r\n\r\nupgrade not supported"
)


def guarded_protocol(limits: EdgeLimits) -> type[CoalescingHttpToolsProtocol]:
    """uvicorn's httptools protocol class, coalesced and guarded by `limits`."""

    class GuardedHttpToolsProtocol(CoalescingHttpToolsProtocol):
        edge: Final = limits
        _timer: asyncio.TimerHandle | None = None
        _timer_at = 0.0
        _due: float | None = None  # when the deadline armed passes; None: none is armed
        _then: Callable[[], None] | None = None
        _body_started = 0.0
        _body_received = 0
        _in_head = True  # the bytes arriving are a request's head
        _head_seen = 0  # of its bytes, how many have arrived before this chunk
        _line_seen = False  # its request line has ended
        _upgrade_refused = False

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            if len(self.connections) > self.edge.max_connections:
                self.transport.write(_FULL)
                self.transport.close()
                return
            self._arm(self.edge.header_timeout_s, self._headers_too_slow)

        def connection_lost(self, exc: Exception | None) -> None:
            self._due = None
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            if self._in_head:
                refusal = self._head_refusal(data)
                if refusal is not None:
                    if not self.transport.is_closing():
                        self.transport.write(refusal)
                        self.transport.close()
                    return
            super().data_received(data)

        def _head_refusal(self, data: bytes) -> bytes | None:
            """414 or 431 when `data` takes the request's line or head past its limit, else
            None (the bytes counted). A chunk that ends one request and begins the next
            pipelined one counts for neither: it is at most one read, far below the limits'
            reason (megabytes)."""
            seen = self._head_seen
            if not self._line_seen:
                line_end = data.find(b"\n")
                if (len(data) if line_end < 0 else line_end) + seen > MAX_REQUEST_LINE_BYTES:
                    return _URI_TOO_LONG
                self._line_seen = line_end >= 0
            head_end = data.find(b"\r\n\r\n")
            if (len(data) if head_end < 0 else head_end) + seen > MAX_HEADER_BYTES:
                return _HEAD_TOO_LARGE
            self._head_seen = seen + len(data)
            return None

        def on_message_begin(self) -> None:
            super().on_message_begin()
            if self._due is None or self._then == self._idle_too_long:  # the next request
                self._arm(self.edge.header_timeout_s, self._headers_too_slow)

        def _answered_now(self) -> None:
            """After an answer made in place, the connection's keep-alive deadline is this
            guard's one timer too (uvicorn makes and cancels a timer per request for it)."""
            if self.pipeline:  # a request waits behind this one: uvicorn starts it
                super()._answered_now()
                return
            self.server_state.total_requests += 1
            if self.transport.is_closing():
                return
            self._unset_keepalive_if_required()
            self.flow.resume_reading()
            self._arm(self.timeout_keep_alive, self._idle_too_long)

        def _idle_too_long(self) -> None:
            self.timeout_keep_alive_handler()

        def on_headers_complete(self) -> None:
            self._in_head = False
            self._disarm()
            if self.parser.should_upgrade():  # Upgrade: (or CONNECT): not for this server
                self._upgrade_refused = True
                if not self.transport.is_closing():
                    self.transport.write(_NO_UPGRADE)
                    self.transport.close()
                return
            super().on_headers_complete()
            self._body_started = self.loop.time()
            self._body_received = 0
            self._arm(self.edge.body_grace_s, self._body_check)

        def on_body(self, body: bytes) -> None:
            self._body_received += len(body)
            super().on_body(body)

        def on_message_complete(self) -> None:
            self._disarm()
            self._in_head, self._head_seen, self._line_seen = True, 0, False
            if self._upgrade_refused:
                return
            super().on_message_complete()

        def _should_upgrade(self) -> bool:
            return False  # answered 400 above, never handed to a WebSocket protocol

        def _unsupported_upgrade_warning(self) -> None:
            pass  # answered 400 above: nothing to warn of

        def _arm(self, delay: float, then: Callable[[], None]) -> None:
            """Call `then` in `delay` seconds, unless disarmed (or armed again) first."""
            due = self.loop.time() + delay
            self._due, self._then = due, then
            if self._timer is None or self._timer_at > due:
                if self._timer is not None:
                    self._timer.cancel()
                self._timer, self._timer_at = self.loop.call_at(due, self._fire), due

        def _disarm(self) -> None:
            self._due = None  # the timer stays: when it fires, it finds nothing due

        def _fire(self) -> None:
            """The timer: call what is due, or wait again for a deadline moved later."""
            self._timer = None
            due, then = self._due, self._then
            if due is None or then is None:
                return
            if self.loop.time() < due:
                self._timer, self._timer_at = self.loop.call_at(due, self._fire), due
                return
            self._due = None
            then()

        def _headers_too_slow(self) -> None:
            if not self.transport.is_closing():
                self.transport.write(_TIMED_OUT)
                self.transport.close()

        def _body_check(self) -> None:
            """At the body's deadline: close if the body fell below the minimum rate, else
            move the deadline to where the bytes received so far allow."""
            allowed = self.edge.body_grace_s + self._body_received / self.edge.body_min_rate
            left = self._body_started + allowed - self.loop.time()
            if left > 0:
                self._arm(left, self._body_check)
            elif not self.transport.is_closing():
                self.transport.close()

    return GuardedHttpToolsProtocol
