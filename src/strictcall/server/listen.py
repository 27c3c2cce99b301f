"""The server's listening sockets, bound before the server starts so that a failure to bind is
one line in strictcall's words (port in use, unknown host, ...) instead of uvicorn's log."""

from __future__ import annotations

import errno
import socket
from contextlib import suppress

from strictcall.errors import StrictcallError


class ListenError(StrictcallError):
    """The server cannot listen where it was asked to; the message says why, for the operator."""


def bind_listeners(host: str, port: int) -> list[socket.socket]:
    """Bound (not yet listening) TCP sockets for every address `host` names, on `port`
    (0: the system picks a free one), as asyncio's create_server would bind them.

    Raises:
        ListenError: the host does not resolve or an address cannot be bound.
    """
    try:
        # "" is every interface, as asyncio's create_server reads it
        infos = socket.getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
    except socket.gaierror:
        raise ListenError(
            f"cannot listen on {host}: unknown host (the name does not resolve)"
        ) from None
    bound: list[socket.socket] = []
    seen: set[tuple[int, object]] = set()
    try:
        for family, kind, proto, _, address in infos:
            if (family, address) in seen:
                continue
            seen.add((family, address))
            sock = socket.socket(family, kind, proto)
            bound.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                # One socket per family, as asyncio does: ::1 must not also take 127.0.0.1.
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                sock.bind(address)
            except OSError as exc:
                raise ListenError(_why_not_bound(host, port, exc)) from None
    except BaseException:
        for sock in bound:
            with suppress(OSError):
                sock.close()
        raise
    return bound


def _why_not_bound(host: str, port: int, exc: OSError) -> str:
    where = f"cannot listen on {host}:{port}"
    if exc.errno == errno.EADDRINUSE:
        return (
            f"{where}: the port is already in use (stop what uses it, or choose another"
            " --port; --port 0 picks a free one)"
        )
    if exc.errno == errno.EADDRNOTAVAIL:
        return f"{where}: {host} is not an address of this machine"
    if exc.errno == errno.EACCES:
        return f"{where}: permission denied (ports below 1024 need privileges)"
    return f"{where}: {exc.strerror or 'the system refused'}"
