"""Whether the store is answering, as the server sees it from its own work: an outage begins
at the first call answered store_unavailable or auth_unavailable, or the first audit batch or
page read the store could not take; it ends at the next audit batch or page read it took.

One line is logged when an outage begins ("store unavailable since ...") and one when it ends
("store back ...", with the calls refused meanwhile): never a line per refused call or retry.
What the page's banner and /metrics say comes from here too.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Final

from strictcall.errors import STORE_DOWN_CODES

REFUSED_CODES: Final = STORE_DOWN_CODES
"""The codes of calls refused because the store could not serve."""

log = logging.getLogger("strictcall")


def clock_time(at: float) -> str:
    """A moment as HH:MM:SS UTC."""
    return time.strftime("%H:%M:%S", time.gmtime(at))


@dataclass(frozen=True, slots=True)
class Outage:
    """One time the store could not serve: from `since` to `until` (None: not over)."""

    since: float
    until: float | None
    refused: int
    """Calls answered store_unavailable or auth_unavailable meanwhile."""


class StoreHealth:
    """The store's outages, told by the server's own work (see the module's docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # audit batches are written on a worker thread
        self._since: float | None = None
        self._refused = 0
        self._last: Outage | None = None
        self.outages = 0
        """Outages begun since the server started (a counter for /metrics)."""

    @property
    def outage(self) -> Outage | None:
        """The outage going on now, or None while the store answers."""
        since = self._since
        return None if since is None else Outage(since, None, self._refused)

    @property
    def last_outage(self) -> Outage | None:
        """The last outage that is over, or None."""
        return self._last

    def refused(self, first: float, calls: int = 1, last: float | None = None) -> None:
        """`calls` answered store_unavailable or auth_unavailable, from `first` to `last`."""
        latest = first if last is None else last
        with self._lock:
            over = self._last
            late = over is not None and over.until is not None and latest <= over.until
            if self._since is None and over is not None and late:
                # answered in the outage just over, counted after it ended
                self._last = Outage(over.since, over.until, over.refused + calls)
                return
            self._begin(first)
            self._refused += calls

    def failed(self, at: float | None = None) -> None:
        """The store could not take an audit batch or answer a read."""
        with self._lock:
            self._begin(time.time() if at is None else at)

    def answered(self, at: float | None = None) -> None:
        """The store took an audit batch or answered a read: an outage, if any, is over."""
        if self._since is None:  # the usual case, without the lock
            return
        with self._lock:
            since = self._since
            if since is None:
                return
            until = time.time() if at is None else at
            self._last = Outage(since, until, self._refused)
            self._since = None
            self._refused = 0
        log.warning(
            "store back at %s UTC after %.0f s unavailable; %d calls refused meanwhile",
            clock_time(until),
            max(until - since, 0.0),
            self._last.refused,
        )

    def _begin(self, at: float) -> None:
        if self._since is not None:
            return
        self._since = at
        self._refused = 0
        self.outages += 1
        log.warning(
            "store unavailable since %s UTC; calls that need it are refused", clock_time(at)
        )
