"""One upstream process per caller identity (`instances = "per-identity"`): each started on its
identity's first call with a home of its own, stopped once unused for `idle_s`, at most
`max_instances` at once (a call past that is answered `at_capacity`, with the time the next one
is due to be stopped as `retry_after_ms`). The listing, and the pins, stay the shared
process's: it lists the tools and serves resources and prompts, and no call.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Final, TextIO

import anyio
import mcp_types as types
from anyio.abc import TaskGroup

from strictcall.core.tools import ToolContext, ToolFailure
from strictcall.errors import AT_CAPACITY, RETRY_AFTER_MS, JSONValue
from strictcall.services.proxy.upstream import START_TIMEOUT_S, Upstream
from strictcall.transports.mcp.peer import CallPeer

REAP_EVERY_S: Final = 1.0
"""How often instances are looked at for being idle (at most; a short `idle_s` looks sooner)."""

DEFAULT_MAX_INSTANCES: Final = 50
"""With per-identity instances: how many may run at once, unless the upstream says."""
DEFAULT_IDLE_S: Final = 300.0
"""With per-identity instances: how long one may go unused before it is stopped."""


@dataclass(frozen=True)
class PerIdentity:
    """One upstream process per caller identity: at most `max_instances` at once, each stopped
    once unused for `idle_s` seconds."""

    max_instances: int = DEFAULT_MAX_INSTANCES
    idle_s: float = DEFAULT_IDLE_S


class _Instance:
    """One identity's process and when it was last used."""

    def __init__(self, upstream: Upstream) -> None:
        self.upstream = upstream
        self.ready = anyio.Event()
        self.stop = anyio.Event()
        self.failed = False
        self.busy = 0
        self.used = time.monotonic()


class Instances:
    """The per-identity processes of the upstream `shared` lists for: started, reaped, capped."""

    def __init__(self, shared: Upstream, per_identity: PerIdentity, *, errlog: TextIO) -> None:
        self.shared = shared
        self.max_instances = per_identity.max_instances
        self.idle_s = per_identity.idle_s
        self._errlog = errlog
        self._live: dict[str, _Instance] = {}
        self._group: TaskGroup | None = None
        self.started = 0
        """How many instances were started (for the operator)."""
        self.reaped = 0
        """How many were stopped for being idle."""

    @property
    def running(self) -> int:
        """How many instances run now."""
        return len(self._live)

    @property
    def counts(self) -> tuple[int, int, int]:
        """As /metrics counts them: running now, started, stopped for being idle."""
        return len(self._live), self.started, self.reaped

    def lifespan(self) -> AbstractAsyncContextManager[None]:
        """Where the instances run: every one stopped on leaving."""
        return self._lifespan()

    @asynccontextmanager
    async def _lifespan(self) -> AsyncIterator[None]:
        async with anyio.create_task_group() as group:
            self._group = group
            group.start_soon(self._reaper)
            try:
                yield
            finally:
                self._group = None
                group.cancel_scope.cancel()

    async def call(
        self,
        identity: str,
        name: str,
        arguments: dict[str, JSONValue],
        peer: CallPeer | None = None,
        call: ToolContext | None = None,
    ) -> types.CallToolResult:
        """One tools/call on `identity`'s own process (started now if it has none).

        Raises:
            ToolFailure: at_capacity (every instance in use), or upstream_unavailable.
        """
        instance = self._live.get(identity)
        if instance is None:
            instance = self._start(identity)
        instance.busy += 1
        try:
            with anyio.move_on_after(START_TIMEOUT_S):
                await instance.ready.wait()
            if instance.failed or not instance.ready.is_set():
                raise instance.upstream.unavailable()
            return await instance.upstream.call(name, arguments, peer, call)
        finally:
            instance.busy -= 1
            instance.used = time.monotonic()

    def _start(self, identity: str) -> _Instance:
        group = self._group
        if group is None:
            raise self.shared.unavailable()
        if len(self._live) >= self.max_instances:
            raise ToolFailure(AT_CAPACITY, retry_after_ms=self._next_free_ms())
        instance = _Instance(self.shared.for_identity(identity))
        self._live[identity] = instance
        group.start_soon(self._run, identity, instance)
        return instance

    async def _run(self, identity: str, instance: _Instance) -> None:
        try:
            async with instance.upstream.running():
                self.started += 1
                instance.ready.set()
                self._note(f"an identity's instance started ({len(self._live)} running)")
                await instance.stop.wait()
        except Exception:  # its first start failed (said in its log): the call is unavailable
            instance.failed = True
        finally:
            instance.ready.set()
            if self._live.get(identity) is instance:
                del self._live[identity]

    def _next_free_ms(self) -> int:
        """When the soonest idle instance is due to be stopped."""
        now = time.monotonic()
        due = [i.used + self.idle_s - now for i in self._live.values() if i.busy == 0]
        wait_s = min(due, default=self.idle_s)
        return max(RETRY_AFTER_MS, int(max(0.0, wait_s) * 1000) + int(REAP_EVERY_S * 1000))

    async def _reaper(self) -> None:
        while True:
            await anyio.sleep(min(REAP_EVERY_S, self.idle_s / 2))
            now = time.monotonic()
            for identity, instance in list(self._live.items()):
                if instance.busy == 0 and now - instance.used >= self.idle_s:
                    del self._live[identity]
                    self.reaped += 1
                    instance.stop.set()
                    self._note(f"an identity's instance stopped, idle ({len(self._live)} running)")

    def _note(self, line: str) -> None:
        self._errlog.write(f"{self.shared.log_as}: {line}\n")
        self._errlog.flush()
