"""Whether the store is answering, as the server sees it from its own work: an outage begins
at the first call answered store_unavailable or auth_unavailable, or the first audit batch or
page read the store could not take; it ends at the next audit batch or page read it took.

One line is logged when an outage begins ("store unavailable since ...", with the store's
fault when one was seen: "(nothing accepts connections at db:5432 ...)") and one when it ends
("store back ...", with the calls refused meanwhile): never a line per refused call or retry.
The fault is the store's own words, which never hold a URL's password (any `user:secret@` or
`password=` left in them is starred again here), folded onto one line and escaped.
What the page's banner and /metrics say comes from here too.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from dataclasses import dataclass
from typing import Final

from strictcall.core.terminal import counted, one_line
from strictcall.errors import STORE_DOWN_CODES
from strictcall.storage import SchemaTooNew, StoreUnavailable, StoreUnreachable

REFUSED_CODES: Final = STORE_DOWN_CODES
"""The codes of calls refused because the store could not serve."""

log = logging.getLogger("strictcall")

CAUSE_MAX: Final = 200
"""The most characters of a fault the page and the log show."""

_SECRETS: Final = (
    (re.compile(r"(://[^:@/\s]*):[^@/\s]*@"), r"\1:***@"),
    (re.compile(r"(password\s*=\s*)('[^']*'|\S+)", re.IGNORECASE), r"\1***"),
)


def cause_of(exc: StoreUnavailable) -> str:
    """The store's fault as the page and the log say it: its own words (the operator's, for a
    server that cannot be reached), any password starred, on one line, escaped, cut short."""
    if isinstance(exc, (StoreUnreachable, SchemaTooNew)):
        text = exc.for_operator()
    else:
        text = str(exc) or type(exc).__name__
    for pattern, starred in _SECRETS:
        text = pattern.sub(starred, text)
    text = one_line(text)
    return text if len(text) <= CAUSE_MAX else text[: CAUSE_MAX - 3] + "..."


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
    cause: str | None = None
    """The store's fault, as `cause_of` says it (None: only refused calls were seen)."""


class StoreHealth:
    """The store's outages, told by the server's own work (see the module's docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # audit batches are written on a worker thread
        self._since: float | None = None
        self._refused = 0
        self._cause: str | None = None
        self._last: Outage | None = None
        self.outages = 0
        """Outages begun since the server started (a counter for /metrics)."""

    @property
    def outage(self) -> Outage | None:
        """The outage going on now, or None while the store answers."""
        since = self._since
        return None if since is None else Outage(since, None, self._refused, self._cause)

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

    def failed(self, at: float | None = None, cause: str | None = None) -> None:
        """The store could not take an audit batch or answer a read (`cause`: why, as
        `cause_of` says it, when the store said)."""
        with self._lock:
            began = self._since is None
            self._begin(time.time() if at is None else at, cause)
            told = self._cause is not None
            if cause is not None and not told:
                self._cause = cause
        if cause is not None and not began and not told:  # begun by refused calls: now why
            log.warning("store unavailable: %s", cause)

    def answered(self, at: float | None = None) -> None:
        """The store took an audit batch or answered a read: an outage, if any, is over."""
        if self._since is None:  # the usual case, without the lock
            return
        with self._lock:
            since = self._since
            if since is None:
                return
            until = time.time() if at is None else at
            self._last = Outage(since, until, self._refused, self._cause)
            self._since = None
            self._refused = 0
            self._cause = None
        log.warning(
            "store back at %s UTC after %.0f s unavailable; %s refused meanwhile",
            clock_time(until),
            max(until - since, 0.0),
            counted(self._last.refused, "call"),
        )

    def _begin(self, at: float, cause: str | None = None) -> None:
        if self._since is not None:
            return
        self._since = at
        self._refused = 0
        self._cause = cause
        self.outages += 1
        if cause is None:
            log.warning(
                "store unavailable since %s UTC; calls that need it are refused", clock_time(at)
            )
        else:
            log.warning(
                "store unavailable since %s UTC (%s); calls that need it are refused",
                clock_time(at),
                cause,
            )
