"""The connections a server's event loop awaits its calls on (`LoopPool`): no thread, no
lock, no hop, and the calls made on them with the store's faults.

Hand-built, not psycopg_pool's `AsyncConnectionPool`, by measurement (bench/pg_pool.py,
2026-12-01: 2 cores shared with other work, load average 11-13; uvloop; 8 connections each;
5 rounds of 4,000 calls (1,000 writes), medians). CPU per call in this process (and calls/s),
each as a ratio to the store's own awaited calls:

    call, at once       loop (this)  one per read   AsyncConnectionPool   + pipeline mode
    note read, 16       5.9 us       2.5x (0.68x)   9.8x (0.26x)          18.1x (0.15x)
    note read, 64       3.4 us       4.0x (0.47x)   17.9x (0.12x)         32.1x (0.07x)
    unknown token, 16   15.4 us      0.92x (1.03x)  3.9x (0.30x)          6.7x (0.19x)
    unknown token, 64   15.1 us      0.94x (1.01x)  4.1x (0.26x)          7.6x (0.14x)
    note write, 16      80.2 us      -              1.01x (0.97x)         1.75x (0.81x)
    note write, 64      78.1 us      -              1.12x (0.88x)         1.77x (0.78x)

("one per read": this pool and session without the batching of note reads; AsyncConnectionPool
with `prepare=True`. An earlier run at load 4.4-5.7 gave the same picture: 3.8-3.9x for a token,
15-20x for a note read.)

The pool and the libpq session alone (one statement per read) cost a quarter of the CPU of
psycopg_pool with prepared statements (14-15 us against 58-61 us a read); the note reads of one
turn of the loop sent together cut it up to four times more. Pipeline mode adds a sync per call
and pays only for several statements in one round trip, which the batched read already is. So
the loop's reads, token lookups and health probes stay here. A write, bound by its commit, costs
about the same either way (1.01-1.12x): the loop's writes (a note's claim and insert, through
psycopg's own `AsyncConnection` calls; the audit batch, on a connection kept for it) stay on
these connections too, rather than a second pool's. The calls made from threads go through
psycopg_pool's `ConnectionPool` (`store`).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Final, TypeVar

import psycopg
from psycopg import pq
from psycopg.conninfo import conninfo_to_dict

from strictcall.errors import StrictcallError
from strictcall.storage.base import StoreUnavailable, StoreUnreachable
from strictcall.storage.postgres.deadlines import shut_down
from strictcall.storage.postgres.faults import (
    RETRY_POOL_WAIT_S,
    Faults,
    is_lost,
    refusal_of,
    why_not_connected,
)
from strictcall.storage.postgres.session import (
    CONNECTION_OK,
    NoValue,
    Session,
    first_bytes,
    numbered_bytes,
    text_array,
)
from strictcall.storage.postgres.statements import (
    READ_NOTE_PREPARED,
    READ_NOTES_PREPARED,
    Prepared,
)

T = TypeVar("T")
_IDLE: Final = pq.TransactionStatus.IDLE

POOL_WAIT_S: Final = 1.0
"""The longest a call waits for a free connection."""

SWEEP_S: Final = 0.1
"""How often the connections in use are looked at (while any is): past their deadline, or a
wake-up missed."""

CALL_DEADLINE_S: Final = 3.0
"""The longest a call waits on its connection (unless the store is given another deadline):
past it the connection is cut, discarded, and the call answered StoreUnavailable. Longer than
the sessions' statement timeout (2 s), which ends a statement that is merely slow first; this
ends a session that answers nothing at all (a stopped or partitioned database)."""


NoteRead = tuple[str, str, "asyncio.Future[bytes | None]"]
"""A note asked for: its owner, its id, and the future its text (None: no such note) is set on."""


class PoolFull(StrictcallError):
    """No connection came free within the wait."""


class LoopPool:
    """The connections one event loop awaits its calls on: no thread, no lock, no hop.

    A connection is taken from the idle ones, or opened when fewer than `size` are, or awaited
    from a call that is done with one. A connection given back in any state but idle (a call
    cancelled mid-statement, a session lost) is closed, and the next call short of one opens a
    new one; `drop_idle` closes the idle ones too, after a lost session says they are likely lost.
    """

    def __init__(
        self,
        url: str,
        kwargs: Mapping[str, Any],
        size: int,
        *,
        faults: Faults | None = None,
        wait_s: float = POOL_WAIT_S,
        deadline_s: float = CALL_DEADLINE_S,
    ) -> None:
        self.loop: Final = asyncio.get_running_loop()
        self.faults: Final = Faults() if faults is None else faults
        self._wait_s = wait_s
        self._deadline_s = deadline_s
        # the connections calls are waiting on, until when; and those cut at their deadline
        self._busy: dict[psycopg.AsyncConnection[Any], float] = {}
        self._cut: set[psycopg.AsyncConnection[Any]] = set()
        self._stale: set[psycopg.AsyncConnection[Any]] = set()  # a wake-up missed: closed after
        self._tick_s = min(SWEEP_S, deadline_s / 4)
        self._sweeper: asyncio.TimerHandle | None = None
        self._url = url
        self._kwargs = kwargs
        self._size = size
        self._idle: deque[psycopg.AsyncConnection[Any]] = deque()
        self._waiters: deque[asyncio.Future[psycopg.AsyncConnection[Any] | None]] = deque()
        # until when each waiting call waits, and the one timer that gives them up
        self._deadlines: dict[asyncio.Future[psycopg.AsyncConnection[Any] | None], float] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._open = 0  # connections counted against `size`: idle, in use or being opened
        self._audit: psycopg.AsyncConnection[Any] | None = None
        self._sessions: dict[psycopg.AsyncConnection[Any], Session] = {}
        self.note_reads: list[NoteRead] = []  # asked for in this turn of the loop, not sent
        self.tasks: set[asyncio.Task[None]] = set()  # the reads sent, until done

    async def get(self, wait: float) -> psycopg.AsyncConnection[Any]:
        """A connection of this loop's.

        Raises:
            PoolFull: none came free within `wait` seconds.
            psycopg.Error: a new connection could not be opened.
        """
        while True:
            if self._idle:
                return self._idle.pop()  # the most recently used: its statements are prepared
            if self._open < self._size:
                self._open += 1
                try:
                    return await psycopg.AsyncConnection.connect(self._url, **self._kwargs)
                except BaseException:
                    self._open -= 1
                    self._wake()
                    raise
            waiter: asyncio.Future[psycopg.AsyncConnection[Any] | None] = self.loop.create_future()
            self._waiters.append(waiter)
            self._expire_at(waiter, self.loop.time() + wait)
            try:
                conn = await waiter
            except PoolFull:
                raise  # none came within the wait (`_expire`)
            except BaseException:  # the call was cancelled
                self._deadlines.pop(waiter, None)
                if waiter.done() and not waiter.cancelled():  # handed one just as it gave up
                    handed = waiter.result()
                    if handed is None:
                        self._wake()  # the free place goes to the next one waiting
                    else:
                        self.put(handed)
                else:
                    waiter.cancel()
                raise
            if conn is not None:
                return conn
            # None: a connection was closed, and this call may open one in its place

    def _expire_at(
        self, waiter: asyncio.Future[psycopg.AsyncConnection[Any] | None], deadline: float
    ) -> None:
        """Give `waiter` up at `deadline` unless it is served first: one timer for all the
        calls waiting (armed for the earliest), not one per call, as most are served in
        microseconds."""
        self._deadlines[waiter] = deadline
        if self._timer is None or deadline < self._timer.when():
            if self._timer is not None:
                self._timer.cancel()
            self._timer = self.loop.call_at(deadline, self._expire)

    def _expire(self) -> None:
        """Fail the calls whose wait is over (PoolFull), and arm the timer for the next."""
        self._timer = None
        now = self.loop.time()
        for waiter, deadline in list(self._deadlines.items()):
            if waiter.done():
                del self._deadlines[waiter]
            elif deadline <= now:
                del self._deadlines[waiter]
                waiter.set_exception(PoolFull())
        if self._deadlines:
            self._timer = self.loop.call_at(min(self._deadlines.values()), self._expire)

    def session(self, conn: psycopg.AsyncConnection[Any]) -> Session:
        """What this pool keeps of `conn`, one of its connections in use."""
        session = self._sessions.get(conn)
        if session is None:
            session = self._sessions[conn] = Session(conn, self.loop)
        return session

    def unwatch(self, conn: psycopg.AsyncConnection[Any]) -> None:
        """Stop watching `conn`'s socket (before psycopg, or the pool, takes it over)."""
        session = self._sessions.get(conn)
        if session is not None:
            session.unwatch()

    def _discard(self, conn: psycopg.AsyncConnection[Any]) -> None:
        """Close `conn`, its socket no longer watched by the loop first."""
        session = self._sessions.pop(conn, None)
        if session is not None:
            session.unwatch()
        self._busy.pop(conn, None)
        self._stale.discard(conn)
        _discard(conn)

    def put(self, conn: psycopg.AsyncConnection[Any], *, cut: bool = False) -> None:
        """Give `conn` back: to a waiting call, to the idle ones, or closed if not idle (or
        `cut` at its deadline)."""
        pgconn = conn.pgconn  # its status read from libpq (psycopg's `info` makes an object)
        if (
            cut
            or pgconn.status != CONNECTION_OK
            or pgconn.transaction_status != _IDLE
            or self._open > self._size
        ):
            self._discard(conn)
            self._open -= 1
            self._wake()
            return
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                del self._deadlines[waiter]
                waiter.set_result(conn)
                return
        self._idle.append(conn)

    def _wake(self) -> None:
        """Tell one waiting call that a place is free to open a connection in."""
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                del self._deadlines[waiter]
                waiter.set_result(None)
                return

    def watch(self, conn: psycopg.AsyncConnection[Any]) -> None:
        """Cut `conn` if it is still waited on at the deadline (`forget` ends the watch): one
        timer for every connection in use, ticking while any is, not one per call."""
        self._busy[conn] = self.loop.time() + self._deadline_s
        if self._sweeper is None:
            self._sweeper = self.loop.call_later(self._tick_s, self._sweep)

    def forget(self, conn: psycopg.AsyncConnection[Any]) -> bool:
        """End `conn`'s watch; whether it was cut at its deadline."""
        self._busy.pop(conn, None)
        if conn in self._cut:
            self._cut.discard(conn)
            return True
        return False

    def _closes(self, conn: psycopg.AsyncConnection[Any], cut: bool) -> bool:
        """Whether `conn`, given back, is closed rather than kept: cut, or its socket's watch
        found stale."""
        if conn in self._stale:
            self._stale.discard(conn)
            return True
        return cut

    def _sweep(self) -> None:
        """Cut the connections waited on past their deadline: the session's read is failed and
        the socket shut down, so the call waiting on it (the session's, or psycopg's) wakes at
        once to a lost session and gives the connection back, which is then closed (a socket
        closed instead would leave the waiting call's watch on its number). And wake a read
        whose wake-up the loop missed."""
        self._sweeper = None
        now = self.loop.time()
        for conn, deadline in list(self._busy.items()):
            if deadline <= now:
                del self._busy[conn]
                self._cut.add(conn)
                session = self._sessions.get(conn)
                if session is not None:
                    session.give_up()  # woken even where its socket's watch was lost
                shut_down(conn)
            elif (session := self._sessions.get(conn)) is not None and session.wake_if_missed():
                self._stale.add(conn)
        if self._busy:
            self._sweeper = self.loop.call_later(self._tick_s, self._sweep)

    def drop_idle(self) -> None:
        """Close the idle connections (their sessions are likely lost too)."""
        while self._idle:
            self._discard(self._idle.pop())
            self._open -= 1
            self._wake()

    def unreachable(self, exc: psycopg.Error) -> StoreUnreachable:
        """A connection that could not be opened, said as psql says it (never the password)."""
        try:
            settings = conninfo_to_dict(self._url)
        except psycopg.Error:
            settings = {}
        return StoreUnreachable(why_not_connected(exc, settings))

    async def audit_connection(self) -> psycopg.AsyncConnection[Any]:
        """The connection kept for the audit's batches (one writer at a time: the audit's
        flush), opened when first asked for or after a fault.

        Raises:
            psycopg.Error: it could not be opened.
        """
        if self._audit is None or self._audit.closed:
            self._audit = await psycopg.AsyncConnection.connect(self._url, **self._kwargs)
        return self._audit

    def drop_audit_connection(self) -> None:
        """Close the audit's connection (after a fault): the next batch opens another."""
        if self._audit is not None:
            _discard(self._audit)
            self._audit = None

    def close(self) -> None:
        """Close the idle connections; those in use are closed when given back."""
        self._size = 0
        self.drop_idle()
        self.drop_audit_connection()

    # --- calls on these connections, with the store's faults -----------------------------------

    async def run(
        self,
        work: Callable[[psycopg.AsyncConnection[Any]], Awaitable[T]],
        *,
        retry: bool,
        libpq: bool = False,
    ) -> T:
        """`work` on one of these connections, with every driver fault raised as
        StoreUnavailable, as the threads' calls are (`PostgresStore._run`): a lost session
        retried once when `retry`, the fault held after.

        `work` goes through psycopg's calls unless `libpq` (a `Session.fetch`): psycopg then
        watches the connection's socket itself, and the session's watch is stopped first.
        """
        faults = self.faults
        faults.check()
        wait = self._wait_s
        attempts = 2 if retry else 1
        for attempt in range(attempts):
            try:
                # an idle one without a coroutine (the common case: a read's hot path)
                conn = self._idle.pop() if self._idle else await self.get(wait)
            except PoolFull:
                faults.hold_if_lately_lost()  # connections are being replaced: it is down
                raise StoreUnavailable("no free connection") from None
            except psycopg.Error as exc:  # no new connection: the database is down
                faults.lost()
                faults.hold()
                raise self.unreachable(exc) from None
            self.watch(conn)
            cut = False
            try:
                if not libpq:
                    self.unwatch(conn)
                return await work(conn)
            except psycopg.Error as exc:
                cut = self.forget(conn)
                if cut:  # no answer by the deadline: the database hangs; not tried again
                    faults.lost()
                    raise StoreUnavailable("no answer in time") from None
                if not is_lost(exc):
                    raise refusal_of(exc) from None
                faults.lost()
                self.drop_idle()
                if attempt + 1 < attempts:
                    wait = min(wait, RETRY_POOL_WAIT_S)
                    continue
                faults.hold()
                raise StoreUnavailable(type(exc).__name__) from None
            finally:
                self.put(conn, cut=self._closes(conn, self.forget(conn) or cut))
        raise AssertionError("unreachable")  # pragma: no cover

    async def on_audit_connection(
        self, work: Callable[[psycopg.AsyncConnection[Any]], Awaitable[T]]
    ) -> T:
        """`work` on the audit's connection, under the same deadline as every call: cut past
        it, and closed (the next batch opens another) after any fault.

        Raises:
            StoreUnavailable: the work failed or did not finish in time.
        """
        try:
            conn = await self.audit_connection()
        except psycopg.Error as exc:
            if is_lost(exc):
                self.faults.lost()
            raise self.unreachable(exc) from None
        self.watch(conn)
        try:
            return await work(conn)
        except psycopg.Error as exc:
            cut = self.forget(conn)
            self.drop_audit_connection()
            if cut or is_lost(exc):
                self.faults.lost()
            raise StoreUnavailable("no answer in time" if cut else type(exc).__name__) from None
        finally:
            self.forget(conn)

    async def fetch(
        self,
        statement: Prepared,
        params: Sequence[str],
        rows: Callable[[pq.abc.PGresult], T],
    ) -> T:
        """`rows` of what `statement` returns (binary format), through libpq on one of these
        connections: the same faults and answers as the store's other calls, and retried once
        the same way.

        Raises:
            StoreUnavailable: as any call; and for a row `rows` cannot read (a NULL where the
                schema holds none).
        """
        values = [param.encode("utf-8") for param in params]
        result = await self.run(
            lambda conn: self.session(conn).fetch(statement, values), retry=True, libpq=True
        )
        try:
            return rows(result)
        except NoValue:
            raise StoreUnavailable("unexpected NULL") from None

    async def read_note(self, owner: str, note_id: str) -> bytes | None:
        """The text of the owner's note of that id (None: no such note). The notes read by the
        calls of one turn of the loop are read together, by one statement and one round trip
        (each by its owner and id, as alone), and each call answered its own text, None, or the
        fault.

        Raises:
            StoreUnavailable: as any call.
        """
        read: asyncio.Future[bytes | None] = self.loop.create_future()
        self.note_reads.append((owner, note_id, read))
        if len(self.note_reads) == 1:
            self.loop.call_soon(self._send_note_reads)
        return await read

    def _send_note_reads(self) -> None:
        """Read the notes asked for in this turn of the loop, in a task of their own (a call
        that gives up waiting leaves the others' read going)."""
        batch, self.note_reads = self.note_reads, []
        task = self.loop.create_task(self._read_notes(batch))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _read_notes(self, batch: list[NoteRead]) -> None:
        """Each read of `batch` answered: its note's text or None, or StoreUnavailable."""
        try:
            if len(batch) == 1:
                owner, note_id, _ = batch[0]
                one = await self.fetch(READ_NOTE_PREPARED, (owner, note_id), first_bytes)
                texts = {(owner, note_id): one}
            else:
                keys = list(dict.fromkeys((owner, note_id) for owner, note_id, _ in batch))
                found = await self.fetch(
                    READ_NOTES_PREPARED,
                    (text_array([k[0] for k in keys]), text_array([k[1] for k in keys])),
                    numbered_bytes,
                )
                texts = {key: found.get(n) for n, key in enumerate(keys, 1)}
        except StoreUnavailable as exc:
            for _, _, read in batch:
                if not read.done():
                    read.set_exception(StoreUnavailable(*exc.args))
            return
        except asyncio.CancelledError:
            for _, _, read in batch:
                read.cancel()
            raise
        except Exception as exc:  # not expected: every caller sees it, none waits for ever
            for _, _, read in batch:
                if not read.done():
                    read.set_exception(exc)
            return
        for owner, note_id, read in batch:
            if not read.done():  # else the call gave up waiting
                read.set_result(texts[owner, note_id])


def _discard(conn: psycopg.AsyncConnection[Any]) -> None:
    # The session ends at once (libpq's finish is not a wait): no task to schedule.
    conn.pgconn.finish()
