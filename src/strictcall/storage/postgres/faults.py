"""When the database is taken for down: which driver faults mean a lost session, and how long
calls are then answered store_unavailable without trying (shared by the threads' calls and the
loop's, which see the same database)."""

from __future__ import annotations

import time
from typing import Final

import psycopg

from strictcall.storage.base import StoreUnavailable

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


def is_lost(exc: psycopg.Error) -> bool:
    """Whether `exc` says the session is gone (not a timeout or a refused statement)."""
    state = exc.sqlstate
    if state is None:  # no answer from the server: libpq's own connection failure
        return isinstance(exc, psycopg.OperationalError)
    return state.startswith(_LOST_CONNECTION)


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
