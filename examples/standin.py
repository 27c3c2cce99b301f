"""A stand-in model server for the agent loop examples: it replays recorded responses.

It listens on 127.0.0.1 (a free port) in a thread, answers each POST to a path with that path's
next recorded response, and first checks the request with the example's `check`: a request that
does not carry what the loop must send (the tool results of the previous turn) is answered 400
with the provider's error body, so the real client raises and the example fails.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any, NamedTuple

RECORDED = Path(__file__).resolve().parent / "recorded"

Check = Callable[[dict[str, Any], dict[str, Any] | None], str | None]
"""Given the request body and the previous response on that path: None, or what is wrong."""


def recorded(name: str) -> dict[str, Any]:
    """One recorded response body, in the provider's wire format."""
    value: dict[str, Any] = json.loads((RECORDED / name).read_text(encoding="utf-8"))
    return value


class Route(NamedTuple):
    """What one path answers: these responses in order, each request checked first."""

    replies: list[dict[str, Any]]
    check: Check


class StandIn:
    """Replays each route's responses in order to the POSTs on its path."""

    def __init__(
        self, routes: dict[str, Route], error_body: Callable[[str], dict[str, Any]]
    ) -> None:
        self._replies = {path: list(route.replies) for path, route in routes.items()}
        self._checks = {path: route.check for path, route in routes.items()}
        self._previous: dict[str, dict[str, Any] | None] = dict.fromkeys(routes)
        self._lock = threading.Lock()
        self.requests: list[dict[str, Any]] = []
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length))
                status, reply = stand_in.answer(self.path, body)
                data = json.dumps(reply).encode("utf-8")
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass  # the examples print JSON lines only

        self._error_body = error_body
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        """The server's URL: http://127.0.0.1:PORT."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def answer(self, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """The status and body for one request."""
        with self._lock:
            self.requests.append(body)
            queue = self._replies.get(path)
            if queue is None:
                return 404, self._error_body(f"the stand-in has nothing recorded for {path}")
            if not queue:
                return 400, self._error_body(f"the stand-in has no more responses for {path}")
            wrong = self._checks[path](body, self._previous[path])
            if wrong is not None:
                return 400, self._error_body(wrong)
            reply = queue.pop(0)
            self._previous[path] = reply
            return 200, reply

    def __enter__(self) -> StandIn:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()
