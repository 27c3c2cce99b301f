"""Bodies over `PARSE_OFF_LOOP_BYTES` are read (parsed and checked) on one thread of their own,
never on the event loop: a 1 MiB body of nested arrays takes a few hundred milliseconds to
read, and the loop would serve nobody else meanwhile. On the thread, the interpreter hands the
loop its turn every `READ_SWITCH_S` (the interpreter's switch interval, shortened from its 5 ms
while a read runs), so another caller's small call waits that long at each of its steps, not the
whole read; one thread, so that big bodies read one after another and never take more than one
core from the loop.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Final, TypeVar

T = TypeVar("T")

PARSE_OFF_LOOP_BYTES: Final = 64 * 1024
"""A body longer than this is read on the reading thread, not on the loop (a call of a few
KiB is read in well under a millisecond, where a thread hop would cost more than it saves)."""

READ_SWITCH_S: Final = 0.0005
"""The interpreter's switch interval while a body is read off the loop: the longest the loop
waits for its turn at each step of another caller's call (the default 5 ms, paid at each of a
call's few steps, was most of that call's time during a read of 1 MiB bodies)."""

_reader: ThreadPoolExecutor | None = None


def off_loop(body: bytes | bytearray) -> bool:
    """Whether a body is long enough to be read off the loop."""
    return len(body) > PARSE_OFF_LOOP_BYTES


async def read_off_loop(read: Callable[[], T]) -> T:
    """`read()`, run on the reading thread, awaited."""
    global _reader
    if _reader is None:
        _reader = ThreadPoolExecutor(max_workers=1, thread_name_prefix="strictcall-read")
    return await asyncio.get_running_loop().run_in_executor(_reader, _switching_often, read)


def _switching_often(read: Callable[[], T]) -> T:
    """`read()` with the switch interval at `READ_SWITCH_S` (given back after: the reading
    thread is the only one that changes it, one read at a time)."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(READ_SWITCH_S)
    try:
        return read()
    finally:
        sys.setswitchinterval(before)
