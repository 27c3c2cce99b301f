"""A federation: many upstream MCP servers' tools behind one gateway, each tool served as
`prefix` `separator` `name` (`files_read`), the merged listing sorted by that name.

Each upstream lives on its own (`Upstream`: restarted with its own backoff, relisted on
`notifications/tools/list_changed`): one that is down answers its tools `upstream_unavailable`
while the others serve. One that does not start is retried with its backoff, and served once
it starts; the start names the missing ones. Two tools served under one name are refused at
start (`FederationFailed`, one line naming both upstreams); a collision that only appears
later (an upstream that came up late, or relisted) leaves the newcomer's tool out, one line.

With pinning (`Pins`), a tool whose definition changed since it was pinned is listed as it
was pinned and answers `tool_changed` until an operator approves the change; and an upstream
that has not started yet (down when the federation started) has its pinned tools listed,
answering `upstream_unavailable` with the time of its next try.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import replace
from typing import TextIO

import anyio
import mcp_types as types

from strictcall.core.gateway import Gateway
from strictcall.core.pipeline import Limits
from strictcall.core.policy import PolicyHolder
from strictcall.core.redact import Redaction
from strictcall.core.terminal import one_line
from strictcall.core.tools import Arguments, Tool, ToolContext, ToolFailure
from strictcall.errors import TOOL_CHANGED, JSONValue, StrictcallError
from strictcall.services.proxy.config import (
    HOST_NAME,
    FederationConfig,
    UpstreamConfig,
    known_credentials,
)
from strictcall.services.proxy.content import FederatedContent, UpstreamContent, index_content
from strictcall.services.proxy.pins import PIN_POLL_S, Pins, definition_of, listed_of
from strictcall.services.proxy.tools import Redactions, proxied_tool
from strictcall.services.proxy.upstream import Listing, Upstream, UpstreamFailed
from strictcall.storage.base import PinStore, StoreUnavailable

LOG_AS = "strictcall federate"


class FederationFailed(StrictcallError):
    """The federation cannot serve: two upstreams' tools under one name, or the pins cannot
    be read."""


class Member:
    """One upstream of the federation and what it lists now (None: it never started)."""

    def __init__(
        self,
        config: UpstreamConfig,
        on_listing: Callable[[Listing], None],
        errlog: TextIO,
        on_content: Callable[[UpstreamContent], None],
    ) -> None:
        self.config = config
        self.upstream = Upstream(
            config.spec,
            on_listing,
            errlog=errlog,
            restart_min_s=config.restart_min_s,
            restart_max_s=config.restart_max_s,
        )
        self.upstream.on_content = on_content
        self.upstream.log_as = f"{LOG_AS}: {config.name}"
        self.listing: Listing | None = None
        self.content: UpstreamContent | None = None
        """Its resources, templates and prompts as last listed (kept while it is down: they
        answer upstream_unavailable)."""
        self.why_missing: str | None = None
        self.settled = anyio.Event()
        """Set once its first start has succeeded or failed."""


class Federation:
    """The tools of many upstreams, served by one `gateway`.

    `allowed` says which tools (by served name) each identity may see and call (None: all),
    or `policy` (a policy file's, by served names: who may list and call which, how often);
    `pins` is the store the pins are kept in (None, or a config with pinning off: no pinning).
    """

    def __init__(
        self,
        config: FederationConfig,
        *,
        errlog: TextIO,
        pins: PinStore | None = None,
        allowed: Callable[[str], frozenset[str]] | None = None,
        policy: PolicyHolder | None = None,
        limits: Limits | None = None,
    ) -> None:
        self.config = config
        self.gateway = Gateway(limits=limits, allowed=allowed, policy=policy)
        self.pins = None if pins is None or not config.pinning else Pins(pins, errlog, LOG_AS)
        self.redactions = Redactions()
        self.redaction = Redaction(
            known=known_credentials(config.upstreams), tally=self.redactions.tally
        )
        """What is redacted of every answer (the upstreams' credentials found as they are,
        counted in `redactions`), each tool's `results` its config's."""
        self._errlog = errlog
        self.members = [
            Member(upstream, self._listing_of(index), errlog, self._content_of(index))
            for index, upstream in enumerate(config.upstreams)
        ]
        self.content = FederatedContent(self.gateway.may_use)
        """The upstreams' resources and prompts, served beside the tools."""
        self._started = False
        self._collision: str | None = None
        self._logged: set[str] = set()
        self.failed: FederationFailed | None = None
        """Why the federation could not start, once it could not."""

    def lifespan(self) -> AbstractAsyncContextManager[None]:
        """Every upstream's run, entered in the serving loop before the first call.

        Raises (on entering):
            FederationFailed: two tools under one name, or the pins could not be read.
        """
        return self._running()

    @asynccontextmanager
    async def _running(self) -> AsyncIterator[None]:
        try:
            if self.pins is not None:
                try:
                    self.pins.load()
                except StoreUnavailable as exc:
                    raise FederationFailed(f"cannot read the tool pins: {exc}") from None
            async with anyio.create_task_group() as group:
                for member in self.members:
                    group.start_soon(self._keep, member)
                for member in self.members:
                    await member.settled.wait()
                self._rebuild()  # the pinned tools of those that did not start
                if self._collision is not None:
                    raise FederationFailed(self._collision)
                self._started = True
                self._say_missing()
                if self.pins is not None:
                    group.start_soon(self._watch_pins)
                try:
                    yield
                finally:
                    group.cancel_scope.cancel()
        except FederationFailed as exc:
            self.failed = exc
            raise
        except BaseExceptionGroup as group_exc:
            found = group_exc.subgroup(FederationFailed)
            if found is None:
                raise
            self.failed = _first(found)
            raise self.failed from None

    async def _keep(self, member: Member) -> None:
        """Run `member`'s upstream; until its first start succeeds, try again with its backoff
        (after that its own supervisor restarts it)."""
        config = member.config
        backoff = config.restart_min_s
        while True:
            try:
                async with member.upstream.running():
                    member.why_missing = None
                    member.settled.set()
                    await anyio.sleep_forever()
            except Exception as exc:
                failed = _upstream_failure(exc)
                if failed is None:
                    raise
                member.why_missing = failed.why
                if member.settled.is_set() and self._started:
                    self._note(
                        f"{config.name}: still not started ({failed.why});"
                        f" next try in {backoff:g} s"
                    )
                member.settled.set()
            member.upstream.starts_at(time.monotonic() + backoff)
            await anyio.sleep(backoff)
            backoff = min(backoff * 2, config.restart_max_s)

    def _say_missing(self) -> None:
        missing = [member for member in self.members if member.listing is None]
        served = len(self.members) - len(missing)
        if not missing:
            self._note(f"serving {served} upstreams, {len(self.gateway.tools)} tools")
            return
        named = "; ".join(f"{m.config.name} ({m.why_missing})" for m in missing)
        self._note(f"serving {served} of {len(self.members)} upstreams; missing, retried: {named}")

    async def _watch_pins(self) -> None:
        pins = self.pins
        assert pins is not None
        while True:
            await anyio.sleep(PIN_POLL_S)
            if pins.holding and pins.refresh():
                self._rebuild()

    def _listing_of(self, index: int) -> Callable[[Listing], None]:
        def take(listing: Listing) -> None:
            self.members[index].listing = listing
            self._rebuild()

        return take

    def _content_of(self, index: int) -> Callable[[UpstreamContent], None]:
        def take(content: UpstreamContent) -> None:
            self.members[index].content = content
            self._rebuild_content()

        return take

    def _rebuild_content(self) -> None:
        """Serve every listed upstream's resources and prompts (a collision at start is the
        start's failure; later, the newcomer's is left out, one line)."""
        entries = [(m.config, m.upstream, m.content) for m in self.members]
        index, refused, collisions = index_content(entries, self.config.separator)
        self.content.replace(index)
        if collisions and not self._started and self._collision is None:
            self._collision = collisions[0]
        lines = [f"{name} not served: {reason}" for name, reason in sorted(refused.items())]
        if self._started:
            lines += [f"{line}; the later one not served" for line in collisions]
        for line in lines:
            if line not in self._logged:  # once, not per relisting
                self._logged.add(line)
                self._note(line)

    def _rebuild(self) -> None:
        """Serve every started upstream's tools, sorted by their served names."""
        tools: dict[str, Tool] = {}
        owners: dict[str, str] = {}
        refused: dict[str, str] = {}
        separator = self.config.separator
        for member in self.members:
            config = member.config
            listing = member.listing
            if listing is None:  # never started: its pinned tools, answering unavailable
                listing = [] if self.pins is None else self.pins.pinned_for(config, separator)
            for listed in listing:
                served = config.served_name(listed.name, separator)
                if HOST_NAME.fullmatch(served) is None:
                    refused[served] = "hosts accept 1-64 of A-Z a-z 0-9 _ - in a tool's name"
                    continue
                owner = owners.setdefault(served, config.name)
                if owner != config.name:
                    line = (
                        f"tool name {json.dumps(served)} of upstream {config.name} collides"
                        f" with the same name of upstream {owner}: give one of them another prefix"
                    )
                    if not self._started:  # refused at start, in this one line
                        if self._collision is None:  # the first one is said
                            self._collision = line
                        continue
                    refused[served] = (
                        f"upstream {config.name}'s tool collides with upstream {owner}'s"
                    )
                    continue
                tool = self._served(member, listed, served)
                if tool is not None:
                    tools[served] = tool
        refused.update(self.gateway.replace_tools(tools[name] for name in sorted(tools)))
        for name, reason in sorted(refused.items()):
            key = f"{name}\0{reason}"
            if key not in self._logged:  # once per tool and reason, not per relisting
                self._logged.add(key)
                self._note(f"tool {json.dumps(name)} not served: {one_line(reason)}")

    def _served(self, member: Member, listed: types.Tool, served: str) -> Tool | None:
        """The tool served as `served` for `listed`: forwarded, or (changed since it was
        pinned) the pinned one answering tool_changed; None when held back unknown."""
        config = member.config
        upstream = member.upstream
        output = config.output(listed.name, self.redaction)
        if self.pins is not None:
            held = self.pins.check(served, definition_of(listed))
            if held == "":
                return None
            if held is not None:
                pinned = proxied_tool(listed_of(held), upstream, timeout=config.timeout)
                return replace(pinned, name=served, handler=_changed, failures=(TOOL_CHANGED,))
        tool = proxied_tool(listed, upstream, timeout=config.timeout, output=output)
        return replace(tool, name=served)

    def _note(self, line: str) -> None:
        self._errlog.write(f"{LOG_AS}: {line}\n")
        self._errlog.flush()


async def _changed(ctx: ToolContext, arguments: Arguments) -> JSONValue:
    raise ToolFailure(TOOL_CHANGED)


def _upstream_failure(exc: BaseException) -> UpstreamFailed | None:
    """The UpstreamFailed in `exc`, found through the exception groups of task groups."""
    if isinstance(exc, UpstreamFailed):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = _upstream_failure(inner)
            if found is not None:
                return found
    return None


def _first(group: BaseExceptionGroup[FederationFailed]) -> FederationFailed:
    inner = group.exceptions[0]
    return inner if isinstance(inner, FederationFailed) else _first(inner)
