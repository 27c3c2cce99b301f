"""The threads that run tools with a time limit, where a hung tool cannot starve the others.

A call running past its time limit cannot be stopped (Python has no way to kill a thread), so
its thread is written off: `overdue` lets another thread take its place, so the pool still
has `size` threads for other calls. At most `max_overdue` threads may be written off at once
in one pool, and at most `max_overdue_per_tool` for one tool: a tool that already has that
many calls hung is refused at once (`admits` is false) instead of holding yet another thread.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any, Final, ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")

MAX_OVERDUE: Final = 16
"""Threads a pool may have written off (running past a time limit) at once."""

MAX_OVERDUE_PER_TOOL: Final = 2
"""Calls of one tool that may be running past their time limit at once."""


class Workers(Executor):
    """A thread pool that replaces a thread held by a call past its time limit."""

    def __init__(
        self,
        size: int,
        *,
        max_overdue: int = MAX_OVERDUE,
        max_overdue_per_tool: int = MAX_OVERDUE_PER_TOOL,
        name: str = "strictcall-tool",
    ) -> None:
        if size < 1:
            raise ValueError("a pool needs at least one thread")
        self.size: Final = size
        self._max_overdue: Final = max_overdue
        self._max_per_tool: Final = max_overdue_per_tool
        self._name: Final = name
        self._cond = threading.Condition()
        self._queue: deque[tuple[Future[Any], Callable[..., Any], tuple[Any, ...]]] = deque()
        self._live = 0  # threads counted in `size`: idle or running a call within its limit
        self._idle = 0  # live threads waiting for work, not yet handed any
        self._overdue: dict[Future[Any], str] = {}  # calls past their limit -> their tool
        self._per_tool: dict[str, int] = {}
        self._closed = False
        self._started = 0

    def submit(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> Future[T]:
        """Run `fn(*args)` on a free thread, or queue it until one frees up.

        Raises:
            RuntimeError: the pool was shut down.
        """
        if kwargs:
            raise TypeError("Workers.submit takes positional arguments only")
        future: Future[T] = Future()
        with self._cond:
            if self._closed:
                raise RuntimeError("the worker pool was shut down")
            self._queue.append((future, fn, args))
            self._wake_or_start()
        return future

    def admits(self, tool: str) -> bool:
        """Whether `tool` may take a thread: it has fewer calls running past their time limit
        than the per-tool bound."""
        return self._per_tool.get(tool, 0) < self._max_per_tool

    def overdue(self, future: Future[Any], tool: str) -> None:
        """`future`, a call of `tool`, is running past its time limit: write its thread off and
        let another take its place (unless `max_overdue` threads already are)."""
        with self._cond:
            if future.done() or future in self._overdue:
                return
            if len(self._overdue) >= self._max_overdue:
                return  # no more replacements: the pool shrinks until one comes back
            self._overdue[future] = tool
            self._per_tool[tool] = self._per_tool.get(tool, 0) + 1
            self._live -= 1
            if self._queue:
                self._wake_or_start()

    @property
    def overdue_count(self) -> int:
        """Threads currently written off."""
        return len(self._overdue)

    @property
    def threads_started(self) -> int:
        """Threads started since the pool was made."""
        return self._started

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Stop taking work; queued calls are cancelled when `cancel_futures`. Threads finish
        their current call and end (`wait` is accepted for the Executor API; nothing waits for
        a hung call)."""
        with self._cond:
            self._closed = True
            if cancel_futures:
                while self._queue:
                    self._queue.popleft()[0].cancel()
            self._cond.notify_all()

    def _wake_or_start(self) -> None:
        """Hand queued work to an idle thread, or start one while fewer than `size` live
        (under the lock)."""
        if self._idle:
            self._idle -= 1
            self._cond.notify()
        elif self._live < self.size:
            self._live += 1
            self._started += 1
            thread = threading.Thread(
                target=self._work, name=f"{self._name}-{self._started}", daemon=True
            )
            thread.start()

    def _work(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._closed:
                    self._idle += 1
                    self._cond.wait()
                if not self._queue:  # closed, nothing left
                    self._live -= 1
                    return
                future, fn, args = self._queue.popleft()
            if future.set_running_or_notify_cancel():
                try:
                    result = fn(*args)
                except BaseException as exc:  # the caller's future carries it
                    future.set_exception(exc)
                else:
                    future.set_result(result)
            with self._cond:
                tool = self._overdue.pop(future, None)
                if tool is None:
                    continue
                # This thread was written off and replaced: it comes back only into a free place.
                self._per_tool[tool] -= 1
                if self._live >= self.size or self._closed:
                    return
                self._live += 1
