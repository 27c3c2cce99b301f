"""The server's log lines: on stderr, each stamped with its UTC time to the millisecond
(`2026-12-01T14:03:07.412Z WARNING strictcall: ...`), for the HTTP server (uvicorn's lines too)
and the MCP stdio server alike."""

from __future__ import annotations

import logging
import logging.config
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Final


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
