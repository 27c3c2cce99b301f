"""A federation: many upstream MCP servers' tools behind one gateway, each tool served as
`prefix` `separator` `name` (`files_read`), the merged listing sorted by that name.

Each upstream lives on its own (`Upstream`: restarted with its own backoff, relisted on
`notifications/tools/list_changed`): one that is down answers its tools `upstream_unavailable`
while the others serve. One that does not start is retried with its backoff, and served once
it starts; the start names the missing ones. Two tools served under one name are refused at
start (`FederationFailed`, one line naming both upstreams). After the start, the first upstream
to serve a name (a tool's, a prompt's, a resource's URI or a template) keeps it while the
federation runs: another that lists it later (one that came up late, or relisted) is not
served under it, in one line naming both.

With pinning (`Pins`), a tool whose definition changed since it was pinned is listed as it
was pinned and answers `tool_changed` until an operator approves the change; one that appears
in a later listing of an upstream that had listed already waits for approval, not served; and
an upstream that has not started yet (down when the federation started) has its pinned tools
listed, answering `upstream_unavailable` with the time of its next try.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import replace
from typing import Final, TextIO

import anyio
import mcp_types as types

from strictcall.core.gateway import Gateway
from strictcall.core.pipeline import Limits
from strictcall.core.policy import PolicyHolder, policy_warnings
from strictcall.core.record import AuditRecord
from strictcall.core.redact import Redaction
from strictcall.core.terminal import counted, one_line
from strictcall.core.tools import Arguments, Tool, ToolContext, ToolFailure
from strictcall.errors import TOOL_CHANGED, JSONValue, StrictcallError
from strictcall.services.proxy.config import (
    HOST_NAME,
    FederationConfig,
    UpstreamConfig,
    known_credentials,
)
from strictcall.services.proxy.content import (
    FederatedContent,
    Listed,
    UpstreamContent,
    index_content,
)
from strictcall.services.proxy.instances import Instances
from strictcall.services.proxy.pins import (
    NOTHING,
    PIN_POLL_S,
    Pins,
    content_definition,
    definition_of,
    listed_of,
)
from strictcall.services.proxy.tools import Redactions, proxied_tool
from strictcall.services.proxy.upstream import Listing, Upstream, UpstreamFailed
from strictcall.storage.base import PinStore, StoreUnavailable
from strictcall.transports.serving import Serving

SERVE_WITHIN_S: Final = 10.0
"""How long the federation waits for the rest of its upstreams' first starts once one has
settled, before serving those that have started: one still starting is served once it answers
(its pinned tools meanwhile answer upstream_unavailable)."""

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
            budgets=config.budgets,
        )
        self.upstream.on_content = on_content
        self.upstream.log_as = f"{LOG_AS}: {config.name}"
        self.upstream.name = config.name
        self.upstream.probes_asks = config.probe
        per_identity = config.per_identity
        self.instances = (
            None if per_identity is None else Instances(self.upstream, per_identity, errlog=errlog)
        )
        """Its per-identity processes, when it has them (the shared one lists, and serves none
        of the calls)."""
        self.listing: Listing | None = None
        self.content: UpstreamContent | None = None
        """Its resources, templates and prompts as last listed (kept while it is down: they
        answer upstream_unavailable)."""
        self.listings = 0
        """How many listings of its tools it has given in this process."""
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
        for member in self.members:  # each one's resource updates, to their subscribers
            member.upstream.on_updated = functools.partial(self.content.updated, member.upstream)
        self.serving: Final = Serving(
            content=self.content, tools_change=True, lifespans=(self.lifespan,)
        )
        """What either wire serves beside the tools (the upstreams' resources and prompts),
        that its tools may change, and every upstream's run, to be entered around the
        serving."""
        self._started = False
        self._owners: dict[str, str] = {}
        """Who serves each served key (a tool's name, `resource:URI`...): after the start, the
        first upstream to serve it keeps it."""
        self._tool_collision: str | None = None
        self._content_collision: str | None = None
        self._content_owners: dict[str, str] = {}
        self._logged: set[str] = set()
        self.failed: FederationFailed | None = None
        """Why the federation could not start, once it could not."""

    def upstream_states(self) -> list[dict[str, object]]:
        """Each upstream as the operator's page shows it: its state (`Upstream.state`), the
        tools it lists now (some may not be served: the log says why), its starts, the wait
        its calls are told while it is down, and how many of its changes wait for an approval
        (`strictcall tools diff`)."""
        pins = self.pins
        return [
            upstream_row(
                member.config.name,
                member.upstream,
                0 if member.listing is None else len(member.listing),
                None if pins is None else pins.waiting_for(member.config.name),
                member.instances,
            )
            for member in self.members
        ]

    def audit_server_requests(self, record: Callable[[AuditRecord], None]) -> None:
        """Audit every request its upstreams make of a caller during a call in `record`
        (the server's audit log), those of their per-identity processes too."""
        for member in self.members:
            member.upstream.conversations.record = record

    @property
    def has_instances(self) -> bool:
        """Whether any upstream runs a process per caller identity."""
        return any(member.instances is not None for member in self.members)

    def instance_counts(self) -> dict[str, tuple[int, int, int]]:
        """Each per-identity upstream's instances: (running now, started, stopped for being
        idle)."""
        return {
            member.config.name: member.instances.counts
            for member in self.members
            if member.instances is not None
        }

    def budget_refusals(self) -> dict[tuple[str, str], int]:
        """Each upstream's listings refused past a budget, by (upstream, budget)."""
        return {
            (member.config.name, budget): n
            for member in self.members
            for budget, n in member.upstream.budget_refusals.items()
        }

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
                await self._first_starts()
                for member in self.members:
                    if not member.settled.is_set():
                        member.why_missing = (
                            f"still starting {SERVE_WITHIN_S:g} s after the first one settled;"
                            " served once it answers"
                        )
                self._rebuild()  # the pinned tools of those that did not start
                self._rebuild_content()
                collision = self._tool_collision or self._content_collision
                if collision is not None:
                    raise FederationFailed(collision)
                self._owners.update(self._content_owners)
                self._started = True
                self._say_missing()
                self._warn_unserved_rules()
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

    async def _first_starts(self) -> None:
        """Wait for every upstream's first start to settle (started, or failed), but no more
        than `SERVE_WITHIN_S` after the first one did: one that hangs delays no other."""
        first = anyio.Event()

        async def settle(member: Member) -> None:
            await member.settled.wait()
            first.set()

        async with anyio.create_task_group() as group:
            for member in self.members:
                group.start_soon(settle, member)
            await first.wait()
            with anyio.move_on_after(SERVE_WITHIN_S):
                for member in self.members:
                    await member.settled.wait()
            group.cancel_scope.cancel()

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
                    instances = member.instances
                    if instances is None:
                        await anyio.sleep_forever()
                    else:
                        async with instances.lifespan():
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
            self._note(
                f"serving {counted(served, 'upstream')}, {counted(len(self.gateway.tools), 'tool')}"
            )
            return
        named = "; ".join(f"{m.config.name} ({m.why_missing})" for m in missing)
        self._note(
            f"serving {served} of {counted(len(self.members), 'upstream')};"
            f" missing, retried: {named}"
        )

    async def _watch_pins(self) -> None:
        pins = self.pins
        assert pins is not None
        while True:
            await anyio.sleep(PIN_POLL_S)
            if pins.holding and pins.refresh():
                self._rebuild()
                self._rebuild_content()

    def _listing_of(self, index: int) -> Callable[[Listing], None]:
        def take(listing: Listing) -> None:
            member = self.members[index]
            member.listing = listing
            member.listings += 1
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
        owners = self._owners if self._started else dict(self._owners)
        index, refused, collisions = index_content(
            entries, self.config.separator, owners=owners, admit=self._admit
        )
        self.content.replace(index)
        if not self._started:
            self._content_collision = collisions[0] if collisions else None
            self._content_owners = owners
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
        # at start, who lists a name now; after it, who served it first (kept for the run)
        owners: dict[str, str] = self._owners if self._started else {}
        refused: dict[str, str] = {}
        collision: str | None = None
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
                    if not self._started:  # refused at start, in one line (the first one)
                        collision = collision or (
                            f"tool name {one_line(json.dumps(served))} of upstream"
                            f" {config.name} collides with the same name of upstream {owner}:"
                            " give one of them another prefix"
                        )
                        continue
                    refused[served] = (
                        f"upstream {config.name}'s collides with upstream {owner}'s, which"
                        " keeps it (it served it first)"
                    )
                    continue
                tool = self._served(member, listed, served)
                if tool is not None:
                    tools[served] = tool
        if not self._started:
            self._tool_collision = collision
            self._owners = owners
        refused.update(self.gateway.replace_tools(tools[name] for name in sorted(tools)))
        if self._started:
            self._warn_unserved_rules()
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
            # what a later listing adds waits for an approval (the first is trusted on sight)
            waits = self._started and member.listings > 1
            held = self.pins.check(served, definition_of(listed, config.name), new_waits=waits)
            if held == NOTHING:
                return None
            if held is not None:
                pinned = proxied_tool(listed_of(held), upstream, timeout=config.timeout)
                return replace(pinned, name=served, handler=_changed, failures=(TOOL_CHANGED,))
        tool = proxied_tool(
            listed,
            upstream,
            timeout=config.timeout,
            output=output,
            instances=member.instances,
        )
        return replace(tool, name=served)

    def _admit(self, key: str, member_name: str, listed: Listed) -> bool:
        """Whether a resource, template or prompt may be served as pinned (always, without
        pinning); one changed since it was pinned, or new in a later listing, is held back."""
        if self.pins is None:
            return True
        member = next(m for m in self.members if m.config.name == member_name)
        waits = self._started and member.listings > 1
        definition = content_definition(listed, member_name)
        return self.pins.check(key, definition, new_waits=waits) is None

    def _warn_unserved_rules(self) -> None:
        """Say once each policy rule that grants none of the tools served: it hides them all."""
        holder = self.gateway.policy
        if holder is not None:
            for warning in policy_warnings(
                holder.current, [tool.name for tool in self.gateway.tools]
            ):
                if warning not in self._logged:
                    self._logged.add(warning)
                    self._note(f"policy warning: {warning}")

    def _note(self, line: str) -> None:
        self._errlog.write(f"{LOG_AS}: {line}\n")
        self._errlog.flush()


def upstream_row(
    name: str,
    upstream: Upstream,
    tools: int,
    waiting: int | None,
    instances: Instances | None = None,
) -> dict[str, object]:
    """One upstream's row on the operator's page (`waiting` None: no pinning; `instances`
    None: shared, one process for every caller, and `instances`/`max_instances` are null)."""
    state = upstream.state
    return {
        "upstream": name,
        "state": state,
        "tools": tools,
        "starts": upstream.starts,
        "retry_after_ms": None if state == "up" else upstream.retry_after_ms(),
        "changes_waiting": waiting,
        "instances": None if instances is None else instances.running,
        "max_instances": None if instances is None else instances.max_instances,
    }


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
