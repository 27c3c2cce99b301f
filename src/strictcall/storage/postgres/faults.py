"""When the database is taken for down: which driver faults mean a lost session, and how long
calls are then answered store_unavailable without trying (shared by the threads' calls and the
loop's, which see the same database)."""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from typing import Any, Final

import psycopg

from strictcall.storage.base import StoreRefused, StoreUnavailable

FAULT_HOLD_S: Final = 0.25
"""After a connection fault, how long calls are answered store_unavailable without trying."""

LOST_WINDOW_S: Final = 10.0
"""After a lost connection, how long a pool without a free connection is taken for a database
that is down (held, as above) rather than for a busy pool (refused, not held)."""

RETRY_POOL_WAIT_S: Final = 0.2
"""How long the second try after a lost connection waits for a replacement."""

# Connection-level SQLSTATE classes: the session is gone (08: connection exception; 57P01-3:
# terminated by an administrator, crash shutdown, cannot connect now).
_LOST_CONNECTION: Final = ("08", "57P01", "57P02", "57P03")

# SQLSTATE classes of a value the database refuses as such: 22 (data exception: too long for its
# column, not valid in its type) and 54 (program limit exceeded: an index row over the btree's
# limit, ~2.7 KB). The same call fails again, and nothing is wrong with the database.
_REFUSED_INPUT: Final = ("22", "54")


def why_not_connected(exc: psycopg.Error, settings: Mapping[str, Any]) -> str:
    """Why a first connection failed, named as psql names it (by sqlstate when the server sent
    one, else by libpq's words, which are never printed: they may quote the URL), with the
    URL's host, port, database and role, never its password."""
    host, port = settings.get("host", "localhost"), settings.get("port", "5432")
    role = settings.get("user", "(your user name)")
    database = settings.get("dbname", role)
    state, text = exc.sqlstate, str(exc)
    if state == "3D000" or f'database "{database}" does not exist' in text:
        return f"the database {database} does not exist (create it first: createdb {database})"
    if (state == "28000" and "role" in text) or f'role "{role}" does not exist' in text:
        return f"the role {role} does not exist on the server"
    if state == "28P01" or "authentication failed" in text or "no password supplied" in text:
        return f"authentication failed for the role {role} (check the password)"
    if "server does not support SSL" in text:
        return "the server does not support SSL, but the URL requires it (sslmode)"
    if "failed to resolve host" in text or "could not translate host name" in text:
        return f"the host {host} does not resolve"
    if "not currently accepting connections" in text:
        return f"the database {database} is not accepting connections"
    if "the database system is shutting down" in text or state == "57P03":
        return f"the server at {host}:{port} is starting up or shutting down"
    if "Connection refused" in text:
        return f"nothing accepts connections at {host}:{port} (is the server running there?)"
    if "timeout" in text.lower():
        return f"the server at {host}:{port} did not answer in time"
    return "the database server refused or could not be reached"


def is_lost(exc: psycopg.Error) -> bool:
    """Whether `exc` says the session is gone (not a timeout or a refused statement)."""
    state = exc.sqlstate
    if state is None:  # no answer from the server: libpq's own connection failure
        return isinstance(exc, psycopg.OperationalError)
    return state.startswith(_LOST_CONNECTION)


_STATEMENT_TIMEOUT: Final = re.compile(r"statement_timeout\s*=\s*(\d+)\s*(ms|s|min)?\b")
_UNIT_S: Final = {None: 0.001, "ms": 0.001, "s": 1.0, "min": 60.0}


def call_deadline_for(options: str, default: float) -> float:
    """The deadline of a call awaited on the loop: a second past the statement timeout that
    `options` (a URL's) sets, when it sets a positive one, else `default`: every call has
    one, even where statements have none."""
    found = _STATEMENT_TIMEOUT.search(options)
    if found is None:
        return default
    timeout_s = int(found.group(1)) * _UNIT_S[found.group(2)]
    return timeout_s + 1.0 if timeout_s > 0 else default


def is_refused_input(exc: psycopg.Error) -> bool:
    """Whether `exc` is the database refusing a value of the call itself (not a fault)."""
    state = exc.sqlstate
    return state is not None and state.startswith(_REFUSED_INPUT)


def refusal_of(exc: psycopg.Error) -> StoreRefused | StoreUnavailable:
    """What a store raises for a statement's failure that did not lose the session: the
    input refused (no fault), or the database unable to serve now (retryable)."""
    if is_refused_input(exc):
        return StoreRefused(type(exc).__name__)
    return StoreUnavailable(type(exc).__name__)


class Faults:
    """What a store remembers of its database's last faults."""

    __slots__ = ("_down_until", "_lost_at")

    def __init__(self) -> None:
        self._down_until = 0.0
        self._lost_at = -LOST_WINDOW_S

    def check(self) -> None:
        """Refuse a call while a fault is held.

        Raises:
            StoreUnavailable: a fault is held.
        """
        if time.monotonic() < self._down_until:
            raise StoreUnavailable("held after a fault")

    def hold(self) -> None:
        """Answer calls store_unavailable for `FAULT_HOLD_S` without trying."""
        self._down_until = time.monotonic() + FAULT_HOLD_S

    def lost(self) -> None:
        """A session was found lost now."""
        self._lost_at = time.monotonic()

    def hold_if_lately_lost(self) -> None:
        """No free connection: held if a session was lost lately (the pool is reconnecting: the
        database is down), else not (a busy pool)."""
        if time.monotonic() - self._lost_at < LOST_WINDOW_S:
            self.hold()
