"""An upstream's standard error, relayed to the log line by line: each line prefixed with the
upstream's name and escaped (an ANSI banner, a carriage return or a forged log line reaches the
terminal as backslash escapes) and cut as every printed field is (`strictcall.core.terminal`)."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import BinaryIO, Final, TextIO

from strictcall.core.terminal import shown

STDERR_LINE_MAX: Final = 4096
"""The most bytes of one stderr line read; the rest of a longer line is dropped unread."""


def relay_lines(source: BinaryIO, prefix: str, errlog: TextIO) -> None:
    """Copy `source`'s lines to `errlog` as `prefix: stderr: LINE`, escaped, until it ends."""
    with source:
        while line := source.readline(STDERR_LINE_MAX):
            if len(line) == STDERR_LINE_MAX and not line.endswith(b"\n"):
                while (rest := source.readline(STDERR_LINE_MAX)) and not rest.endswith(b"\n"):
                    pass  # the rest of an overlong line is dropped, not buffered
            text = line.removesuffix(b"\n").removesuffix(b"\r").decode("utf-8", "backslashreplace")
            try:
                errlog.write(f"{prefix}: stderr: {shown(text)}\n")
                errlog.flush()
            except (OSError, ValueError):  # the log closed under us: the process is ending
                return


@contextmanager
def relayed_stderr(prefix: str, errlog: TextIO) -> Iterator[BinaryIO]:
    """A file to give a child process as its stderr, whose lines reach `errlog` prefixed and
    escaped (`relay_lines`, on a thread of its own, until every holder of the file closed it)."""
    reading, writing = os.pipe()
    source = os.fdopen(reading, "rb", buffering=0)
    sink = os.fdopen(writing, "wb", buffering=0)
    thread = threading.Thread(
        target=relay_lines, args=(source, prefix, errlog), name="upstream-stderr", daemon=True
    )
    thread.start()
    try:
        yield sink
    finally:
        sink.close()  # the relay ends once the child (and whatever it started) closed it too
