"""The one home of asyncio's private parts the proxy leans on, pinned by
tests/test_dependencies.py (it fails naming what changed when a Python release does).

    asyncio.subprocess.Process._transport
        the subprocess transport of a process started without pipes of its own (the proxy
        gives a stdio upstream its own pipes): nobody else closes it, and unclosed it warns
        when collected
"""

from __future__ import annotations

import asyncio
import contextlib


def close_transport(process: asyncio.subprocess.Process) -> None:
    """Close `process`'s subprocess transport, if it has one (a process already reaped)."""
    transport = getattr(process, "_transport", None)  # absent: no transport to close
    close = getattr(transport, "close", None)
    if callable(close):
        with contextlib.suppress(PermissionError):  # re-killing a setuid child (<= 3.12)
            close()
