"""Rung 5 of the pipeline, execute: the handler runs, within its time limit.

A declared failure (`ToolFailure` of a kind the tool lists) keeps its code, anything else
becomes internal_error, a tool past its time limit timeout, and a call that waited its whole
time limit for a thread without getting one at_capacity. Sync handlers with a time limit run on
the gateway's threads (`strictcall.core.threads`); async handlers are awaited, or run in a
private loop from synchronous code.
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from concurrent.futures import Executor

from strictcall.core.pipeline import (
    FORBIDDEN,
    INTERNAL,
    TIMED_OUT,
    CompiledTool,
    frozen_details,
    log_failure,
)
from strictcall.core.tools import (
    Arguments,
    ForbiddenOrMissing,
    ToolContext,
    ToolFailure,
    run_inline,
)
from strictcall.errors import AT_CAPACITY, JSONValue, Rejection

# --- 5. execute --------------------------------------------------------------------------------


class _TimeLimit(Exception):
    """The tool's time limit passed (unlike a TimeoutError the handler raised itself)."""


def execute_call(
    compiled: CompiledTool,
    ctx: ToolContext,
    arguments: Arguments,
    pool: Executor | None,
) -> tuple[JSONValue, Rejection | None]:
    """Rung 5, from synchronous code: run the handler (async handlers in a private loop).

    A sync handler with a timeout runs on `pool` so that it can be timed out (after an inline
    try, for `inline_first`); with no pool it runs in place, untimed. Its time limit counts
    from when it starts: a call that waits its whole time limit for a thread without getting
    one never ran, and is answered `at_capacity`, not `timeout`.

    Raises:
        RuntimeError: an async handler was called from inside a running event loop.
    """
    tool = compiled.tool
    if compiled.is_async:
        _refuse_inside_loop()
    try:
        if compiled.is_async:
            import asyncio  # loaded by the first async tool, not by `import strictcall`

            coroutine = tool.handler(ctx, arguments)
            assert isinstance(coroutine, Awaitable)
            return asyncio.run(_awaited(coroutine, tool.timeout)), None
        if tool.timeout is None or pool is None:
            return tool.handler(ctx, arguments), None
        if tool.inline_first:
            done, result = run_inline(tool.handler, ctx, arguments)
            if done:
                return result, None
        return _on_pool(compiled, ctx, arguments, pool, tool.timeout)
    except _TimeLimit:
        return None, TIMED_OUT
    except Exception as exc:
        return None, failure_of(compiled, ctx, exc)


def _on_pool(
    compiled: CompiledTool, ctx: ToolContext, arguments: Arguments, pool: Executor, limit: float
) -> tuple[JSONValue, Rejection | None]:
    """A sync handler on a worker thread: `limit` seconds to start, then `limit` to finish."""
    from concurrent.futures import TimeoutError as FutureTimeout

    from strictcall.core.threads import Workers  # loaded by the first pooled call

    name = compiled.tool.name
    if isinstance(pool, Workers) and not pool.admits(name):
        return None, at_capacity(limit)
    started = threading.Event()
    future = pool.submit(_begin_then, started.set, compiled.tool.handler, ctx, arguments)
    if not started.wait(limit):
        if future.cancel():  # still queued: it never ran
            return None, at_capacity(limit)
        started.wait()  # a thread took it just now; its limit starts there
    try:
        return future.result(timeout=limit), None
    except FutureTimeout:
        if not future.done():
            if isinstance(pool, Workers):
                pool.overdue(future, name)
            return None, TIMED_OUT
        # It raised a TimeoutError of its own (re-raised here), or it just finished.
        return future.result(), None


def _begin_then(
    begin: Callable[[], object], handler: Callable[..., JSONValue], *args: object
) -> JSONValue:
    """On the worker thread: say the call has started, then run it."""
    begin()
    return handler(*args)


def at_capacity(limit: float) -> Rejection:
    """`at_capacity`, with a hint to retry after about the tool's time limit."""
    return Rejection(AT_CAPACITY, frozen_details({"retry_after_ms": max(1, round(limit * 1000))}))


async def execute_call_async(
    compiled: CompiledTool,
    ctx: ToolContext,
    arguments: Arguments,
    pool: Executor | None = None,
) -> tuple[JSONValue, Rejection | None]:
    """Rung 5, from a running event loop: await async handlers, call sync ones in place.

    A sync handler with a timeout runs on a worker thread of `pool` so that the loop can time
    it out, its limit counted from when it starts, as `execute_call` says (asyncio's default
    executor when `pool` is None, the limit then counting the wait too); with `inline_first`,
    only when an inline try says it would wait.
    """
    tool = compiled.tool
    try:
        if compiled.is_async:
            coroutine = tool.handler(ctx, arguments)
            assert isinstance(coroutine, Awaitable)
            return await _awaited(coroutine, tool.timeout), None
        if tool.timeout is None:
            return tool.handler(ctx, arguments), None
        if tool.inline_first:
            done, result = run_inline(tool.handler, ctx, arguments)
            if done:
                return result, None
        import asyncio

        if pool is not None:
            return await _on_pool_async(compiled, ctx, arguments, pool, tool.timeout)
        work = asyncio.get_running_loop().run_in_executor(None, tool.handler, ctx, arguments)
        return await _awaited(work, tool.timeout), None
    except _TimeLimit:
        return None, TIMED_OUT
    except Exception as exc:
        return None, failure_of(compiled, ctx, exc)


async def _on_pool_async(
    compiled: CompiledTool, ctx: ToolContext, arguments: Arguments, pool: Executor, limit: float
) -> tuple[JSONValue, Rejection | None]:
    """`_on_pool`, awaited from the event loop."""
    import asyncio

    from strictcall.core.threads import Workers

    name = compiled.tool.name
    if isinstance(pool, Workers) and not pool.admits(name):
        return None, at_capacity(limit)
    loop = asyncio.get_running_loop()
    started = asyncio.Event()

    def begin() -> None:
        loop.call_soon_threadsafe(started.set)

    future = pool.submit(_begin_then, begin, compiled.tool.handler, ctx, arguments)
    try:
        async with asyncio.timeout(limit):
            await started.wait()
    except TimeoutError:
        if future.cancel():  # still queued: it never ran
            return None, at_capacity(limit)
    try:
        return await _awaited(asyncio.wrap_future(future), limit), None
    except _TimeLimit:
        if isinstance(pool, Workers):
            pool.overdue(future, name)
        raise


async def _awaited(work: Awaitable[JSONValue], timeout: float | None) -> JSONValue:
    """Await `work` within `timeout` seconds.

    Raises:
        _TimeLimit: the time limit passed first.
    """
    if timeout is None:
        return await work
    import asyncio

    scope = asyncio.timeout(timeout)
    try:
        async with scope:
            return await work
    except TimeoutError:
        if scope.expired():
            raise _TimeLimit from None
        raise


def _refuse_inside_loop() -> None:
    import asyncio

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    raise RuntimeError("an async tool called from a running event loop: use call_async")


def failure_of(compiled: CompiledTool, ctx: ToolContext, exc: Exception) -> Rejection:
    if isinstance(exc, ForbiddenOrMissing):
        return FORBIDDEN
    if isinstance(exc, ToolFailure) and exc.kind in compiled.tool.failures:
        if exc.retry_after_ms is None and exc.details is None:
            return Rejection(exc.kind)
        details: dict[str, JSONValue] = {} if exc.details is None else dict(exc.details)
        if exc.retry_after_ms is not None:
            details["retry_after_ms"] = exc.retry_after_ms
        return Rejection(exc.kind, frozen_details(details))
    log_failure(ctx, exc)
    return INTERNAL
