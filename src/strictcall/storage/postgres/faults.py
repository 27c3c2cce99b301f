"""When the database is taken for down: which driver faults mean a lost session, and how long
calls are then answered store_unavailable without trying (shared by the threads' calls and the
loop's, which see the same database)."""

from __future__ import annotations

import re
import time
from typing import Final

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
