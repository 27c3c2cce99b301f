"""A sync tool that hangs holds its thread, but never makes a later call look like a tool that
took too long: a call that could not start is `at_capacity` (retryable, with a hint), a hung
thread is replaced so the other tools keep running, and a tool with calls hung is refused at
once before it takes more threads."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future
from typing import Any

import pytest

from strictcall import Gateway, Tool, ToolContext, errors
from strictcall.core.threads import MAX_OVERDUE_PER_TOOL, Workers
from strictcall.errors import ErrorKind

DEADLINE_S = 10.0


class Tools:
    """A tool that hangs until released and a quick one, counting the calls that ran."""

    def __init__(self, hang_timeout: float, quick_timeout: float) -> None:
        self.release = threading.Event()
        self.hanging = 0
        self.quick_ran = 0
        self.hang = Tool(
            name="hang",
            description="Wait until released.",
            input_schema={"type": "object"},
            output_schema={"type": "string"},
            handler=self._hang,
            timeout=hang_timeout,
        )
        self.quick = Tool(
            name="quick",
            description="Answer at once.",
            input_schema={"type": "object"},
            output_schema={"type": "integer"},
            handler=self._quick,
            timeout=quick_timeout,
        )

    def _hang(self, ctx: ToolContext, args: dict[str, Any]) -> str:
        self.hanging += 1
        self.release.wait(DEADLINE_S)
        return "released"

    def _quick(self, ctx: ToolContext, args: dict[str, Any]) -> int:
        self.quick_ran += 1
        return 0


@pytest.fixture
def tools() -> Iterator[Tools]:
    made = Tools(hang_timeout=0.2, quick_timeout=2.0)
    yield made
    made.release.set()


def call(gateway: Gateway, name: str, call_id: str = "c") -> dict[str, Any]:
    return gateway.call(f'{{"name":"{name}","arguments":{{}}}}', "u1", call_id)


def code_of(answer: dict[str, Any]) -> ErrorKind | None:
    if answer["ok"] is True:
        return None
    return next(kind for kind in errors.CATALOGUE if kind.code == answer["error"]["code"])


def until(condition: Any) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        assert time.monotonic() < deadline, "condition never held"
        time.sleep(0.005)


def in_background(gateway: Gateway, name: str, call_id: str) -> Future[dict[str, Any]]:
    future: Future[dict[str, Any]] = Future()

    def run() -> None:
        future.set_result(call(gateway, name, call_id))

    threading.Thread(target=run, daemon=True).start()
    return future


def test_a_call_that_could_not_start_is_at_capacity_not_timeout() -> None:
    tools = Tools(hang_timeout=DEADLINE_S, quick_timeout=0.1)
    with Gateway([tools.hang, tools.quick], workers=1) as gateway:
        try:
            hung = in_background(gateway, "hang", "h1")
            until(lambda: tools.hanging == 1)
            answer = call(gateway, "quick")
            assert code_of(answer) is errors.AT_CAPACITY
            assert answer["error"] == {
                **errors.AT_CAPACITY.as_error(),
                "retry_after_ms": 100,
            }
        finally:
            tools.release.set()
        assert hung.result(DEADLINE_S)["ok"] is True
    assert tools.quick_ran == 0  # it never ran, then or later


def test_a_hung_tool_does_not_starve_the_others(tools: Tools) -> None:
    with Gateway([tools.hang, tools.quick], workers=1) as gateway:
        assert code_of(call(gateway, "hang")) is errors.TIMEOUT
        assert tools.hanging == 1
        for index in range(5):
            assert call(gateway, "quick", f"q{index}") == {
                "ok": True,
                "call_id": f"q{index}",
                "result": 0,
            }
    assert tools.quick_ran == 5


def test_calls_queued_behind_a_hung_tool_run_once_its_thread_is_replaced(tools: Tools) -> None:
    slow_start = Tools(hang_timeout=0.2, quick_timeout=2.0)
    with Gateway([slow_start.hang, slow_start.quick], workers=1) as gateway:
        try:
            hung = in_background(gateway, "hang", "h1")
            until(lambda: slow_start.hanging == 1)
            # queued behind the hung call, it starts when that call passes its limit
            assert call(gateway, "quick")["ok"] is True
            assert code_of(hung.result(DEADLINE_S)) is errors.TIMEOUT
        finally:
            slow_start.release.set()


def test_a_tool_with_calls_hung_is_refused_at_once_without_taking_a_thread(
    tools: Tools,
) -> None:
    with Gateway([tools.hang, tools.quick], workers=1) as gateway:
        for index in range(MAX_OVERDUE_PER_TOOL):
            assert code_of(call(gateway, "hang", f"h{index}")) is errors.TIMEOUT
        started = time.monotonic()
        assert code_of(call(gateway, "hang", "h-more")) is errors.AT_CAPACITY
        assert time.monotonic() - started < 0.2  # refused before its time limit
        assert tools.hanging == MAX_OVERDUE_PER_TOOL
        assert call(gateway, "quick")["ok"] is True  # the other tools still run


def test_from_the_event_loop_the_same_rules_hold(tools: Tools) -> None:
    async def scenario(gateway: Gateway) -> None:
        hung = await gateway.call_async('{"name":"hang","arguments":{}}', "u1", "h1")
        assert code_of(hung) is errors.TIMEOUT
        quick = await gateway.call_async('{"name":"quick","arguments":{}}', "u1", "q1")
        assert quick["ok"] is True

    with Gateway([tools.hang, tools.quick], workers=1) as gateway:
        asyncio.run(scenario(gateway))


def test_from_the_event_loop_a_call_that_could_not_start_is_at_capacity() -> None:
    tools = Tools(hang_timeout=DEADLINE_S, quick_timeout=0.1)

    async def scenario(gateway: Gateway) -> dict[str, Any]:
        hung = asyncio.ensure_future(
            gateway.call_async('{"name":"hang","arguments":{}}', "u1", "h1")
        )
        deadline = time.monotonic() + DEADLINE_S
        while tools.hanging == 0:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.005)
        answer = await gateway.call_async('{"name":"quick","arguments":{}}', "u1", "q1")
        tools.release.set()
        assert (await hung)["ok"] is True
        return answer

    with Gateway([tools.hang, tools.quick], workers=1) as gateway:
        try:
            answer = asyncio.run(scenario(gateway))
        finally:
            tools.release.set()
    assert code_of(answer) is errors.AT_CAPACITY
    assert tools.quick_ran == 0


def test_the_pool_replaces_no_more_than_its_bound_of_hung_threads() -> None:
    release = threading.Event()
    pool = Workers(1, max_overdue=2, max_overdue_per_tool=10)
    try:
        futures = [pool.submit(release.wait, DEADLINE_S) for _ in range(4)]
        for future in futures[:3]:
            until(future.running)
            pool.overdue(future, "t")
        assert pool.overdue_count == 2
        assert pool.threads_started == 3  # the first thread, then two replacements
        assert not futures[3].running()  # the third hung thread was not replaced
    finally:
        release.set()
        pool.shutdown()
    for future in futures:
        assert future.result(DEADLINE_S) is True
    until(lambda: pool.overdue_count == 0)
