"""The deadline of a call made on a thread's connection (`ThreadDeadlines`): past it, the
connection's socket is shut down, so the thread waiting in libpq on a session that answers
nothing (a stopped or partitioned database; the kernel still acknowledges every byte, so no
TCP timeout ends it) wakes at once to a lost session, the call fails as the store's fault,
and the pool discards the connection.

One watching thread serves every deadline of a store: arming one costs a lock and a dict entry,
not a thread or a timer per call.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool


class BoundedPool(ConnectionPool[psycopg.Connection[Any]]):
    """psycopg_pool's pool of the threads' connections, whose check of its idle connections
    (after one was found lost) is bounded by `deadline_s` each, as the calls are: a stopped
    session among them is cut, not waited on without end."""

    def __init__(self, url: str, deadline_s: float, **settings: Any) -> None:
        super().__init__(url, **settings)
        self.deadline_s = deadline_s
        self.deadlines = ThreadDeadlines()

    def check_connection(self, conn: psycopg.Connection[Any]) -> None:  # type: ignore[override]
        """psycopg_pool's check of one connection (an empty statement), within the deadline."""
        with self.deadlines.bounded(conn, self.deadline_s):
            ConnectionPool.check_connection(conn)


class ThreadDeadlines:
    """The deadlines of the calls the threads make on their connections, watched by one
    daemon thread started with the first."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._due: dict[int, tuple[float, psycopg.Connection[Any]]] = {}
        self._next = 0
        self._wake_at = float("inf")
        """When the watcher wakes next by itself (never, while none is due)."""
        self._watcher: threading.Thread | None = None

    @contextmanager
    def bounded(self, conn: psycopg.Connection[Any], seconds: float) -> Iterator[None]:
        """The block's work on `conn` ends within `seconds`: past them its socket is shut down
        (the work then fails as libpq's lost connection)."""
        with self._changed:
            key = self._next
            self._next += 1
            due = time.monotonic() + seconds
            self._due[key] = (due, conn)
            if self._watcher is None:
                self._watcher = threading.Thread(
                    target=self._watch, name="strictcall-store-deadlines", daemon=True
                )
                self._watcher.start()
            elif due < self._wake_at:
                self._changed.notify()  # woken only when it would wake too late
        try:
            yield
        finally:
            with self._changed:
                self._due.pop(key, None)  # gone already when its deadline passed

    def _watch(self) -> None:
        with self._changed:
            while True:
                now = time.monotonic()
                passed = [key for key, (due, _) in self._due.items() if due <= now]
                for key in passed:
                    _, conn = self._due.pop(key)
                    shut_down(conn)
                self._wake_at = min((due for due, _ in self._due.values()), default=float("inf"))
                self._changed.wait(None if not self._due else max(self._wake_at - now, 0.0))


def shut_down(conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any]) -> None:
    """Shut `conn`'s socket down (not closed: its number stays its own until libpq closes it):
    a read waiting on it wakes to the end of the stream at once."""
    try:
        fileno = conn.pgconn.socket
    except psycopg.Error:
        return  # libpq has closed it already
    try:
        with socket.socket(fileno=os.dup(fileno)) as sock:
            sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass  # not connected any more: the waiting read wakes to that
