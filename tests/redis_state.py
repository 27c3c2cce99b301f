"""Redis for the tests of shared quotas: the running one at 127.0.0.1:6379 (a key prefix of
each test's own, removed after it), or a redis-server of a test's own on a free port, to kill
and restart. Without Redis the tests skip with one line, except in CI, where they fail."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Final

import pytest
import redis

URL: Final = os.environ.get("STRICTCALL_TEST_REDIS", "redis://127.0.0.1:6379/0")
SKIP_REASON: Final = "Redis tests skipped: no server answers at " + URL
DEADLINE_S: Final = 30.0


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() == "true"


def require() -> None:
    """Redis answers at `URL`; else skip (fail in CI)."""
    try:
        redis.Redis.from_url(URL, socket_connect_timeout=3).ping()
    except redis.RedisError:
        if in_ci():
            pytest.fail(SKIP_REASON)
        pytest.skip(SKIP_REASON)


@contextmanager
def fresh_prefix() -> Iterator[str]:
    """A key prefix of this test's own; its keys are removed after it."""
    prefix = f"strictcall-test:{uuid.uuid4().hex}:"
    try:
        yield prefix
    finally:
        client = redis.Redis.from_url(URL)
        keys = list(client.scan_iter(match=prefix + "*"))
        if keys:
            client.delete(*keys)
        client.close()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class OwnRedis:
    """A redis-server of the test's own on 127.0.0.1:`port`, without persistence."""

    def __init__(self, directory: Path) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            reason = "redis-server is not installed: the outage test needs one of its own"
            if in_ci():
                pytest.fail(reason)
            pytest.skip(reason)
        self.binary = binary
        self.directory = directory
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Start it and poll, with a deadline, until it answers."""
        self.process = subprocess.Popen(
            [
                self.binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.directory),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        client = redis.Redis.from_url(self.url, socket_connect_timeout=0.5)
        deadline = time.monotonic() + DEADLINE_S
        while True:
            try:
                client.ping()
                client.close()
                return
            except redis.RedisError:
                if time.monotonic() > deadline:
                    raise AssertionError("redis-server did not start") from None
                time.sleep(0.02)

    def kill(self) -> None:
        """Kill it (SIGKILL: no goodbye to its clients)."""
        if self.process is not None:
            self.process.kill()
            self.process.wait(timeout=DEADLINE_S)
            self.process = None
