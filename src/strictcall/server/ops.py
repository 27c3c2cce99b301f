"""The operator's side of the server: GET / (the page), GET /ops/stats.json (its data and
fragment, which the page fetches to refresh) and GET /metrics (Prometheus).

An operator token opens them (`strictcall tokens create --operator`), sent as
`Authorization: Bearer <token>` (Prometheus, curl) or as the password of HTTP Basic (a
browser asks for it; the user name is ignored). An agent's token opens nothing here, and an
operator's token calls no tool. A server bound to a loopback address serves them without a
token (only this machine reaches it) to requests whose Host is a loopback name or address: a
page elsewhere whose name was rebound to 127.0.0.1 (DNS rebinding) sends its own name as the
Host, and is asked for a token like any caller from afar.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
from collections.abc import Callable
from typing import Final

import orjson

from strictcall.ops.health import StoreHealth
from strictcall.ops.page import CONTENT_SECURITY_POLICY, render_fragment, render_page
from strictcall.ops.stats import breakdown
from strictcall.ops.window import RecentCalls, Snapshot
from strictcall.server.edge import is_loopback_host
from strictcall.storage import Store, StoreUnavailable
from strictcall.transports.asgi import Receive, Scope, Send, bearer_token

PATHS: Final = ("/", "/ops/stats.json", "/metrics")

_NO_METRICS: Final = (
    b"metrics need strictcall[metrics] (prometheus-client is not installed):"
    b" pip install 'strictcall[metrics]'\n"
)


def _host_header(scope: Scope) -> str | None:
    """The host name of the request's Host header (without its port), or None."""
    for name, value in scope["headers"]:
        if name == b"host":
            host = str(value.decode("latin-1"))
            if host.startswith("["):
                return host[1 : host.find("]")] if "]" in host else None
            name_part, _, port = host.rpartition(":")
            return name_part if name_part and port.isdigit() else host
    return None


def operator_token(scope: Scope) -> str | None:
    """The token of `Authorization: Bearer <token>`, or the password of `Basic`."""
    token = bearer_token(scope)
    if token is not None:
        return token
    for name, value in scope["headers"]:
        if name == b"authorization":
            scheme, _, encoded = value.partition(b" ")
            if scheme.lower() != b"basic":
                return None
            try:
                decoded = base64.b64decode(encoded.strip(), validate=True).decode("utf-8")
            except (binascii.Error, UnicodeDecodeError):
                return None
            _, colon, password = decoded.partition(":")
            return password if colon and password else None
    return None


class OpsApp:
    """Serves the operator's paths (`PATHS`)."""

    def __init__(
        self,
        store: Store,
        *,
        open_without_token: bool,
        exposition: Callable[[], bytes] | None,
        content_type: str = "text/plain; version=0.0.4; charset=utf-8",
        health: Callable[[], dict[str, object]] = dict,
        window: RecentCalls | None = None,
        store_health: StoreHealth | None = None,
        upstreams: Callable[[], list[dict[str, object]]] | None = None,
    ) -> None:
        """`exposition`: the metrics in Prometheus' text format (None: the extra is missing);
        `health`: what the page says of the store besides whether it answers; `window`: the
        server's own counts of the last hour (latency, wires, callers; the summary while the
        store is down); `store_health`: its outages, for the page's banner; `upstreams`: a
        proxy's or a federation's upstreams, each one's state (None: it has none)."""
        self.store: Final = store
        self.open_without_token: Final = open_without_token
        self._exposition = exposition
        self._content_type = content_type.encode("ascii")
        self._health = health
        self._window = window
        self._store_health = store_health if store_health is not None else StoreHealth()
        self._upstreams = upstreams

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["method"] not in ("GET", "HEAD"):
            await _send(send, scope, 405, b"method not allowed\n", extra=[(b"allow", b"GET, HEAD")])
            return
        host = _host_header(scope)
        open_here = self.open_without_token and host is not None and is_loopback_host(host)
        if not open_here and not await self._operator(scope, send):
            return
        path = scope["path"]
        if path == "/metrics":
            if self._exposition is None:
                await _send(send, scope, 501, _NO_METRICS)
            else:
                await _send(send, scope, 200, self._exposition(), content_type=self._content_type)
            return
        # the store's reads and the rendering run on a worker thread: the loop keeps serving
        body, content_type = await asyncio.to_thread(self._render, path)
        await _send(
            send,
            scope,
            200,
            body,
            content_type=content_type,
            extra=[(b"content-security-policy", CONTENT_SECURITY_POLICY.encode("ascii"))],
        )

    def _render(self, path: str) -> tuple[bytes, bytes]:
        stats = breakdown(self.store)
        if stats.store_ok:
            self._store_health.answered()
        else:
            self._store_health.failed(cause=stats.cause)
        outage = self._store_health.outage
        snapshot = None if self._window is None else self._window.snapshot()
        health = self._health()
        upstreams = None if self._upstreams is None else self._upstreams()
        if path == "/":
            page = render_page(stats, health, snapshot, outage, upstreams)
            return page.encode("utf-8"), b"text/html; charset=utf-8"
        document = stats.as_json()
        document["health"] = health
        document["outage"] = (
            None
            if outage is None
            else {"since": outage.since, "refused": outage.refused, "cause": outage.cause}
        )
        if snapshot is not None:
            document["live"] = snapshot_json(snapshot)
        if upstreams is not None:
            document["upstreams"] = upstreams
        document["html"] = render_fragment(stats, health, snapshot, outage, upstreams)
        return orjson.dumps(document), b"application/json"

    async def _operator(self, scope: Scope, send: Send) -> bool:
        """Whether an operator's token came with the request; if not, it is answered (401,
        or 503 when the token store is down)."""
        token = operator_token(scope)
        try:
            # on a worker thread, like the page's queries: a database that does not answer
            # holds this request alone, never the loop (a scraper asks every few seconds)
            operator = (
                None
                if token is None
                else await asyncio.to_thread(self.store.operator_for_token, token)
            )
        except StoreUnavailable:
            await _send(send, scope, 503, b"the token store is unavailable\n")
            return False
        if operator is None:
            challenge = (b"www-authenticate", b'Basic realm="strictcall operator", charset="UTF-8"')
            await _send(send, scope, 401, b"an operator token is needed\n", extra=[challenge])
            return False
        return True


def snapshot_json(snapshot: Snapshot) -> dict[str, object]:
    """The server's own counts as plain JSON (identities are the callers' names, as on the
    page; never a value a model sent)."""
    return {
        "started": snapshot.started,
        "hour": {"calls": snapshot.hour.calls, "failed": snapshot.hour.failed},
        "recent": {"calls": snapshot.recent.calls, "failed": snapshot.recent.failed},
        "wires": [
            {
                "wire": w.wire,
                "calls": w.hour.calls,
                "failed": w.hour.failed,
                "recent_calls": w.recent.calls,
                "recent_failed": w.recent.failed,
            }
            for w in snapshot.wires
        ],
        "latency": [
            {
                "tool": r.tool,
                "calls": r.calls,
                "p50_us": r.p50_us,
                "p99_us": r.p99_us,
                "recent_calls": r.recent_calls,
                "recent_p50_us": r.recent_p50_us,
                "recent_p99_us": r.recent_p99_us,
            }
            for r in snapshot.latency
        ],
        "identities": [
            {
                "identity": r.identity,
                "calls": r.calls,
                "failed": r.failed,
                "top_code": r.top_code,
                "recent_calls": r.recent_calls,
                "nearest_quota": r.nearest_quota,
            }
            for r in snapshot.identities
        ],
    }


async def _send(
    send: Send,
    scope: Scope,
    status: int,
    body: bytes,
    *,
    content_type: bytes = b"text/plain; charset=utf-8",
    extra: list[tuple[bytes, bytes]] | None = None,
) -> None:
    headers = [
        (b"content-type", content_type),
        (b"content-length", str(len(body)).encode("ascii")),
        (b"cache-control", b"no-store"),
        (b"x-content-type-options", b"nosniff"),
        *(extra or []),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": b"" if scope["method"] == "HEAD" else body})
