"""One of the loop's PostgreSQL connections as its reads use it, through libpq itself: the
statements prepared on it, its socket watched by the loop, and the result decoders of the
binary rows it reads (a third of the CPU of a psycopg cursor per read, with the same statement
and the same faults)."""

from __future__ import annotations

import asyncio
import select
from collections.abc import Awaitable, Sequence
from typing import Any, Final

import psycopg
from psycopg import errors as pg_errors
from psycopg import pq

from strictcall.errors import StrictcallError
from strictcall.storage.base import Note
from strictcall.storage.postgres._libpq import error_of
from strictcall.storage.postgres.statements import Prepared, text_of

_FATAL_ERROR: Final = pq.ExecStatus.FATAL_ERROR
CONNECTION_OK: Final = pq.ConnStatus.OK


class Session:
    """One of the loop's connections as its reads use it: the statements prepared on it, and
    its socket watched by the loop for as long as reads go through libpq on it (watching it
    once, not per round trip, saves the loop two registrations per read).

    While no read waits on it, what arrives (a notice; the server's goodbye when the session is
    terminated) is read at once, so that the loop is not woken for it again; a session found
    lost that way is no longer watched, and the next call on it fails and replaces it.
    """

    __slots__ = ("_conn", "_given_up", "_loop", "_missed", "_prepared", "_ready", "_watched")

    def __init__(self, conn: psycopg.AsyncConnection[Any], loop: asyncio.AbstractEventLoop):
        self._conn = conn
        self._loop = loop
        self._prepared: set[bytes] = set()
        self._ready: asyncio.Future[None] | None = None  # a read waiting for the socket
        self._watched = -1  # the socket the loop watches for this session, or -1
        self._given_up = False  # past its deadline: no read waits on it again
        self._missed: asyncio.Future[None] | None = None  # a wait seen readable, not woken

    def fetch(self, statement: Prepared, params: Sequence[bytes]) -> Awaitable[pq.abc.PGresult]:
        """The result of `statement`, sent as a prepared statement (prepared first, by one more
        round trip, at its first use on this connection) and awaited on the loop.

        The connection is idle, in autocommit, and no other call uses it meanwhile (the loop's
        pool hands it to one call at a time); a call cancelled while it waits leaves it busy,
        and the pool closes it.

        Raises:
            psycopg.Error: the statement failed (its class from its SQLSTATE, as psycopg raises
                it), or the session did (when sent, or when awaited).
        """
        pgconn = self._conn.pgconn
        if self._watched < 0:
            self._watched = pgconn.socket
            self._loop.add_reader(self._watched, self._readable)
        if statement.name not in self._prepared:
            return self._prepare_then_fetch(statement, params)
        try:
            pgconn.send_query_prepared(statement.name, params, result_format=pq.Format.BINARY)
        except psycopg.Error:
            self.unwatch()  # a send that finds the session lost may close its socket
            raise
        return self._result()

    async def _prepare_then_fetch(
        self, statement: Prepared, params: Sequence[bytes]
    ) -> pq.abc.PGresult:
        try:
            self._conn.pgconn.send_prepare(statement.name, statement.sql)
        except psycopg.Error:
            self.unwatch()
            raise
        await self._result()
        self._prepared.add(statement.name)
        return await self.fetch(statement, params)

    async def _result(self) -> pq.abc.PGresult:
        """The result of the command just sent (libpq non-blocking, as psycopg leaves it); the
        first error is raised."""
        pgconn = self._conn.pgconn
        kept: pq.abc.PGresult | None = None
        try:
            while pgconn.flush():  # 1: not all sent yet (the socket's buffer is full)
                await _writable(self._loop, self._watched)
            while True:
                while pgconn.is_busy():
                    if self._given_up:
                        raise psycopg.OperationalError("no answer in time")
                    self._ready = ready = self._loop.create_future()
                    try:
                        await ready
                    finally:
                        self._ready = None
                    pgconn.consume_input()
                result = pgconn.get_result()
                if result is None:  # the command is done and the session ready for the next
                    break
                if kept is None or kept.status != _FATAL_ERROR:
                    kept = result
        except psycopg.Error:
            # libpq closes a lost session's socket itself: stop watching its number now, before
            # another connection is opened on the same number (the loop would keep the stale
            # watch, and that connection's reads would never be woken)
            self.unwatch()
            raise
        if kept is None:
            raise psycopg.InterfaceError("no result")
        if kept.status == _FATAL_ERROR:
            error = error_of(kept, self._conn.info.encoding)
            if isinstance(error, pg_errors.InvalidSqlStatementName):
                # the session's statements were dropped (DEALLOCATE ALL, DISCARD ALL, a pooler's
                # reset): this call fails, the next prepares them again
                self._prepared.clear()
            raise error
        return kept

    def give_up(self) -> None:
        """Fail the read waiting on this session now (its deadline passed), whether or not its
        socket would ever wake it: it raises OperationalError, and the pool closes it."""
        self._given_up = True
        ready = self._ready
        if ready is not None and not ready.done():
            ready.set_exception(psycopg.OperationalError("no answer in time"))

    def wake_if_missed(self) -> bool:
        """Wake the read waiting on this session if its socket has been readable since the
        last look and the loop has not said so (uvloop, through libuv, removes a closed
        socket's watch from epoll later, not at once, and the removal can take the watch of a
        new socket given the same number: MagicStack/uvloop#61); whether it was woken so (the
        watch is then stale: the pool closes the connection after this read)."""
        ready = self._ready
        if ready is None or ready.done() or self._watched < 0:
            self._missed = None
            return False
        try:
            readable = bool(select.select([self._watched], [], [], 0)[0])
        except (OSError, ValueError):
            readable = True  # the socket is gone: the read finds out
        if not readable:
            self._missed = None
            return False
        if self._missed is not ready:  # seen once: the loop may be about to say so itself
            self._missed = ready
            return False
        self._missed = None
        ready.set_result(None)
        return True

    def _readable(self) -> None:
        ready = self._ready
        if ready is not None:
            if not ready.done():  # the loop may poll the socket again before the read runs
                ready.set_result(None)
            return
        pgconn = self._conn.pgconn
        try:
            pgconn.consume_input()
        except psycopg.Error:
            self.unwatch()  # the session is lost: the next call on it finds out
            return
        if pgconn.status != CONNECTION_OK:
            self.unwatch()

    def unwatch(self) -> None:
        """Stop watching the socket (before psycopg takes the connection, or it is closed)."""
        if self._watched >= 0:
            if not self._loop.is_closed():
                self._loop.remove_reader(self._watched)
            self._watched = -1


async def _writable(loop: asyncio.AbstractEventLoop, fileno: int) -> None:
    """Until `fileno` can be written to."""
    ready = loop.create_future()
    loop.add_writer(fileno, _set_ready, ready)
    try:
        await ready
    finally:
        loop.remove_writer(fileno)


def _set_ready(ready: asyncio.Future[None]) -> None:
    # The loop may poll the socket again before the waiting call runs: called twice, once here.
    if not ready.done():
        ready.set_result(None)


def nothing(result: pq.abc.PGresult) -> None:
    """Nothing of a result but that it came."""


def first_bytes(result: pq.abc.PGresult) -> bytes | None:
    """The first column of the first row (a NOT NULL bytea), or None for no row."""
    return result.get_value(0, 0) if result.ntuples else None


def numbered_bytes(result: pq.abc.PGresult) -> dict[int, bytes]:
    """The (int8 number, bytea) rows, by number."""
    return {
        int.from_bytes(_cell(result, row, 0), "big", signed=True): _cell(result, row, 1)
        for row in range(result.ntuples)
    }


def text_array(values: Sequence[str]) -> str:
    """A PostgreSQL array literal of `values` (text without NUL), every element quoted: a
    quoted NULL, brace, comma or space is text, and a quote or backslash is escaped."""
    quoted = (value.replace("\\", "\\\\").replace('"', '\\"') for value in values)
    return "{" + ",".join(f'"{value}"' for value in quoted) + "}"


def count_of(result: pq.abc.PGresult) -> int:
    """The int8 of a one-row, one-column result."""
    return int.from_bytes(_cell(result, 0, 0), "big", signed=True)


def notes_of(result: pq.abc.PGresult) -> list[Note]:
    """The (id, text) rows as notes."""
    return [
        Note(_cell(result, row, 0).decode("utf-8"), text_of(_cell(result, row, 1)))
        for row in range(result.ntuples)
    ]


def text_pair(result: pq.abc.PGresult) -> tuple[str, str] | None:
    """The first row's two text columns, or None for no row."""
    if not result.ntuples:
        return None
    return _cell(result, 0, 0).decode("utf-8"), _cell(result, 0, 1).decode("utf-8")


class NoValue(StrictcallError):
    """A NULL where the schema holds none."""


def _cell(result: pq.abc.PGresult, row: int, column: int) -> bytes:
    value = result.get_value(row, column)
    if value is None:  # every column read here is NOT NULL
        raise NoValue
    return value
