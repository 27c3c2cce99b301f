"""The body `strictcall proxy` and `strictcall federate` share: a gateway of upstream tools
served as MCP on stdio (as one identity) or over HTTP (behind the edge), and how its end is
told: exit 0, or 1 and one line for a port that cannot be bound or an upstream that did not
start."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TextIO

from strictcall.cli.store import EXIT_FAILED, EXIT_OK
from strictcall.server.edge import EdgeLimits
from strictcall.storage import shown_db

if TYPE_CHECKING:
    from strictcall.server.edge import OriginPolicy
    from strictcall.server.router import RpcApp


def serve_stdio_or_http(
    command: str,
    *,
    db: str,
    identity: str | None,
    host: str,
    port: int | None,
    upstreams: str,
    stdio_detail: str,
    serve_stdio: Callable[[], None],
    app_of: Callable[[OriginPolicy, bool], RpcApp],
    failed: Callable[[], object | None],
    failures: tuple[type[BaseException], ...],
    failure_of: Callable[[BaseException], object | None],
    out: TextIO,
    err: TextIO,
    edge: EdgeLimits | None = None,
    allow_origins: Sequence[str] = (),
) -> int:
    """Serve MCP on stdio as `identity` (when given: `serve_stdio`), else HTTP on `port` (the
    app `app_of` makes for the origins admitted, the operator page open on a loopback address as
    `serve`'s), saying so in one line naming the page and /metrics (`upstreams` names what is
    served behind it; `stdio_detail` follows the store on stdio), and "stopping", "stopped" as
    it ends. `failed` says why the
    upstreams' first start failed, once it has; an exception of `failures` is told by
    `failure_of` (raised again when that says nothing)."""
    from strictcall.server.listen import ListenError

    try:
        if identity is not None:
            err.write(
                f"{command}: MCP on stdio for {identity} (store: {shown_db(db)}{stdio_detail})\n"
            )
            err.flush()
            serve_stdio()
        else:
            from strictcall.server.app import DEFAULT_PORT, serve
            from strictcall.server.edge import OriginPolicy, is_loopback_host
            from strictcall.server.logs import quiet_after_failure

            def ready(bound_host: str, bound_port: int) -> None:
                base = f"http://{bound_host}:{bound_port}"
                out.write(f"{command} listening on {base} (store: {shown_db(db)}; {upstreams};")
                out.write(f" operator page {base}/, metrics {base}/metrics); Ctrl-C stops it\n")
                out.flush()

            def stopping() -> None:
                _say(out, f"{command}: stopping (finishing the requests in flight)\n")

            loopback = is_loopback_host(host)
            origins = OriginPolicy(frozenset(allow_origins), loopback=loopback)
            app = app_of(origins, loopback)
            with quiet_after_failure(lambda: failed() is not None):
                bound = DEFAULT_PORT if port is None else port
                serve(app, host, bound, ready, edge=edge, on_stopping=stopping)
            _say(out, f"{command}: stopped\n")
    except ListenError as exc:
        err.write(f"{command}: {exc}\n")
        return EXIT_FAILED
    except SystemExit:  # the HTTP server's answer to a failed startup (exit 3)
        if failed() is None:
            raise
        err.write(f"{command}: {failed()}\n")
        return EXIT_FAILED
    except failures as exc:
        why = failure_of(exc)
        if why is None:
            raise
        err.write(f"{command}: {why}\n")
        return EXIT_FAILED
    return EXIT_OK


def _say(out: TextIO, line: str) -> None:
    """A line on `out` as the server stops: whoever started it may have stopped reading (a
    closed pipe), which must not turn a clean stop into a failure."""
    try:
        out.write(line)
        out.flush()
    except (OSError, ValueError):
        pass
