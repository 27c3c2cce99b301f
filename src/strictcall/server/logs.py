"""The server's log lines: on stderr, each stamped with its UTC time to the millisecond
(`2026-12-01T14:03:07.412Z WARNING strictcall: ...`), for the HTTP server (uvicorn's lines too)
and the MCP stdio server alike; a proxy's and a federation's own lines (`StampedLines`) in the
same form."""

from __future__ import annotations

import io
import logging
import logging.config
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Final, TextIO, cast


class UtcFormatter(logging.Formatter):
    """Log lines stamped with the UTC time to the millisecond, ISO 8601."""

    converter = staticmethod(time.gmtime)
    default_time_format = "%Y-%m-%dT%H:%M:%S"
    default_msec_format = "%s.%03dZ"


LOG_FORMAT: Final = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def log_config() -> dict[str, object]:
    """The server's logging (`logging.config.dictConfig`): strictcall's and uvicorn's lines on
    stderr, each with its UTC time; the PostgreSQL driver's own lines only from errors up (an
    outage is told by strictcall's "store unavailable since" and "store back" lines)."""
    handler = {
        "class": "logging.StreamHandler",
        "formatter": "stamped",
        "stream": "ext://sys.stderr",
    }
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"stamped": {"()": UtcFormatter, "format": LOG_FORMAT}},
        "handlers": {"stderr": handler},
        "loggers": {
            "strictcall": {"handlers": ["stderr"], "level": "INFO", "propagate": False},
            "uvicorn": {"handlers": ["stderr"], "level": "WARNING", "propagate": False},
            "uvicorn.error": {"level": "WARNING"},
            "uvicorn.access": {"handlers": ["stderr"], "level": "WARNING", "propagate": False},
            "psycopg": {"level": "ERROR"},
        },
    }


_FAULT: Final = re.compile(
    r"failed|not served|warning|unavailable|refused|hung|lost|dropped|restarting|not started"
    r"|collides|held back|declined|no answer|sandbox none|cannot|exited|killed|forgot"
)
"""What makes a proxy's or a federation's line a WARNING (it tells of a fault); an upstream's
own stderr, relayed, is INFO whatever it says."""


def stamp(at: float) -> str:
    """`at` as the log lines stamp it: UTC, ISO 8601, to the millisecond."""
    whole = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(at))
    return f"{whole}.{int(at * 1000) % 1000:03d}Z"


def level_of(line: str) -> str:
    """The level a proxy's or a federation's line is logged at."""
    if ": stderr: " in line:
        return "INFO"
    return "WARNING" if _FAULT.search(line) else "INFO"


class StampedLines(io.TextIOBase):
    """A text stream writing each whole line to `stream` as the log lines are written:
    `2026-12-01T14:03:07.412Z INFO strictcall federate: notes: upstream started` (the proxy's
    and the federation's narrative, written as lines rather than logged)."""

    def __init__(self, stream: TextIO, clock: Callable[[], float] = time.time) -> None:
        self._stream = stream
        self._clock = clock
        self._partial = ""
        self._lock = threading.Lock()  # upstreams' stderr relays and the loop both write

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        with self._lock:
            pending = self._partial + text
            *lines, self._partial = pending.split("\n")
            if lines:
                at = stamp(self._clock())
                self._stream.write("".join(f"{at} {level_of(line)} {line}\n" for line in lines))
        return len(text)

    def flush(self) -> None:
        self._stream.flush()


def stamped_lines(stream: TextIO) -> TextIO:
    """`stream`, each line written to it stamped (`StampedLines`)."""
    return cast(TextIO, StampedLines(stream))


def configure_logging() -> None:
    """Apply `log_config` (the stdio server; uvicorn applies it for the HTTP server)."""
    logging.config.dictConfig(log_config())


@contextmanager
def quiet_after_failure(failed: Callable[[], bool]) -> Iterator[None]:
    """While in it, the HTTP server's log says nothing once `failed()` (a proxy's upstream or a
    federation did not start): its lines (the failure's repr, "Application startup failed")
    would repeat, in uvicorn's words, the one line the command prints."""

    def keep(record: logging.LogRecord) -> bool:
        return not failed()

    server_log = logging.getLogger("uvicorn.error")
    server_log.addFilter(keep)
    try:
        yield
    finally:
        server_log.removeFilter(keep)
