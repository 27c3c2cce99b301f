"""A proxy: an upstream's tools behind a gateway, served over MCP stdio or HTTP."""

from __future__ import annotations

import functools
import json
import math
from collections.abc import AsyncIterator, Callable, Collection, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Final, TextIO

from strictcall.audit.log import KEEP_ALL, AuditLog, AuditRetention
from strictcall.core.gateway import Gateway
from strictcall.core.pipeline import Limits
from strictcall.core.policy import PolicyHolder, policy_warnings
from strictcall.core.record import AuditRecord
from strictcall.core.redact import Redaction
from strictcall.core.terminal import one_line
from strictcall.services.proxy.config import UpstreamConfig, known_credentials
from strictcall.services.proxy.content import FederatedContent, UpstreamContent, index_content
from strictcall.services.proxy.instances import Instances, PerIdentity
from strictcall.services.proxy.stdio import MAX_RESULT_BYTES
from strictcall.services.proxy.tools import REDACT_SECRETS, Redactions, ToolOutput, proxied_tools
from strictcall.services.proxy.upstream import Listing, Upstream, UpstreamFailed, UpstreamSpec
from strictcall.transports.serving import Serving

if TYPE_CHECKING:
    from strictcall.identity.settings import OAuthSettings
    from strictcall.server.edge import EdgeLimits, OriginPolicy
    from strictcall.server.router import RpcApp
    from strictcall.storage import Store

DEFAULT_TIMEOUT_S: Final = 60.0
"""How long a proxied call may take by default before it is answered `timeout`."""


class Proxy:
    """The tools of one upstream MCP server, served by `gateway` as strictcall tools.

    `allowed` says which tools each identity may see and call (None: all), or `policy` (the
    policy file's: who may list and call which tools, and how often); an upstream's error
    results reach the caller (redacted) unless `withhold_errors`, save for the tools
    `pass_errors` names; `redaction` is what is redacted of its answers (None: nothing);
    `timeout` is every call's limit in seconds; `max_result_bytes` the longest answer a call
    may get from the upstream (longer: result_too_large, at once, the rest of it not kept).
    With `per_identity`, each caller identity's calls go to a process of its own (started on
    its first call, stopped once idle; the shared one lists the tools and serves the
    resources and prompts).
    A tool whose schema cannot be compiled is reported on `errlog` (one line: its name and
    the reason) and not served; the others are.
    """

    def __init__(
        self,
        spec: UpstreamSpec,
        *,
        errlog: TextIO,
        allowed: Callable[[str], frozenset[str]] | None = None,
        policy: PolicyHolder | None = None,
        pass_errors: Collection[str] = (),
        withhold_errors: bool = False,
        redaction: Redaction | None = REDACT_SECRETS,
        timeout: float | None = DEFAULT_TIMEOUT_S,
        limits: Limits | None = None,
        upstream_options: Mapping[str, Any] | None = None,
        max_result_bytes: int = MAX_RESULT_BYTES,
        per_identity: PerIdentity | None = None,
    ) -> None:
        self.gateway: Final = Gateway(limits=limits, allowed=allowed, policy=policy)
        self.upstream: Final = Upstream(
            spec,
            self._take_listing,
            errlog=errlog,
            max_result_bytes=max_result_bytes,
            **(upstream_options or {}),
        )
        self.instances: Final = (
            None if per_identity is None else Instances(self.upstream, per_identity, errlog=errlog)
        )
        """Its per-identity processes, with `per_identity` (None: one for every caller)."""
        self._errlog = errlog
        self._pass_errors = frozenset(pass_errors)
        self.redactions: Final = Redactions()
        """How many secrets were redacted in the upstream's answers, by kind."""
        if redaction is not None:
            known = known_credentials([UpstreamConfig("upstream", spec, "", 1.0)])
            known = tuple(dict.fromkeys((*redaction.known, *known)))
            redaction = replace(redaction, known=known, tally=self.redactions.tally)
        self._output = ToolOutput("upstream", withhold_errors, redaction)
        self._timeout = timeout
        self._refused: dict[str, str] = {}
        self._warned: set[str] = set()
        self.content: Final = FederatedContent(self.gateway.may_use)
        """The upstream's resources and prompts, served as a federation of one serves them
        (names and URIs as the upstream lists them)."""
        self._content_refused: dict[str, str] = {}
        self._as_member = UpstreamConfig("upstream", spec, "", _no_limit(timeout))
        self.upstream.on_content = self._take_content
        self.upstream.on_updated = functools.partial(self.content.updated, self.upstream)
        self.failed: UpstreamFailed | None = None
        """Why the upstream's first start failed, once it has."""
        self._listed = 0
        self.serving: Final = Serving(
            content=self.content, tools_change=True, lifespans=(self.lifespan,)
        )
        """What either wire serves beside the tools (the upstream's resources and prompts),
        that its tools may change, and the upstream's run, to be entered around the serving."""

    def audit_server_requests(self, record: Callable[[AuditRecord], None]) -> None:
        """Audit every request the upstream makes of a caller during a call in `record` (the
        server's audit log), those of its per-identity processes too."""
        self.upstream.conversations.record = record

    def upstream_states(self) -> list[dict[str, object]]:
        """The upstream as the operator's page shows it (`Federation.upstream_states`)."""
        from strictcall.services.proxy.federation import upstream_row

        upstream = self.upstream
        return [upstream_row(upstream.name, upstream, self._listed, None, self.instances)]

    def budget_refusals(self) -> dict[tuple[str, str], int]:
        """The upstream's listings refused past a budget (`Federation.budget_refusals`)."""
        upstream = self.upstream
        return {(upstream.name, budget): n for budget, n in upstream.budget_refusals.items()}

    def instance_counts(self) -> dict[str, tuple[int, int, int]]:
        """The per-identity instances as /metrics counts them (`Federation.instance_counts`):
        none when it has one process for every caller."""
        instances = self.instances
        if instances is None:
            return {}
        return {self.upstream.name: instances.counts}

    def lifespan(self) -> AbstractAsyncContextManager[None]:
        """The upstream's run: entered in the serving loop before the first call. A first
        start that fails is kept as `failed` (and raised)."""
        return self._running()

    @asynccontextmanager
    async def _running(self) -> AsyncIterator[None]:
        entered = False
        try:
            async with self.upstream.running():
                entered = True
                if self.instances is None:
                    yield
                else:
                    async with self.instances.lifespan():
                        yield
        except BaseException as exc:
            if not entered:
                self.failed = upstream_failure(exc)
            raise

    def _take_listing(self, listing: Listing) -> None:
        self._listed = len(listing)
        output = self._output
        passed = replace(output, withhold_errors=False, pass_errors=True)
        outputs = {name: passed for name in self._pass_errors}
        tools = proxied_tools(
            listing,
            self.upstream,
            timeout=self._timeout,
            outputs=outputs,
            output=output,
            instances=self.instances,
        )
        refused = self.gateway.replace_tools(tools)
        for name, reason in refused.items():
            if self._refused.get(name) != reason:  # once per tool and reason, not per relisting
                self._errlog.write(
                    f"strictcall proxy: tool {one_line(json.dumps(name))} not served:"
                    f" {one_line(reason)}\n"
                )
        holder = self.gateway.policy
        if holder is not None:  # once per rule, not per relisting
            for warning in policy_warnings(
                holder.current, [tool.name for tool in self.gateway.tools]
            ):
                if warning not in self._warned:
                    self._warned.add(warning)
                    self._errlog.write(f"strictcall proxy: policy warning: {warning}\n")
        self._errlog.flush()
        self._refused = refused

    def _take_content(self, content: UpstreamContent) -> None:
        entry = (self._as_member, self.upstream, content)
        index, refused, _ = index_content([entry], "_")
        self.content.replace(index)
        for name, reason in refused.items():
            if self._content_refused.get(name) != reason:  # once, not per relisting
                self._content_refused[name] = reason
                self._errlog.write(f"strictcall proxy: {name} not served: {reason}\n")
        self._errlog.flush()


def _no_limit(timeout: float | None) -> float:
    return math.inf if timeout is None else timeout


def upstream_failure(exc: BaseException) -> UpstreamFailed | None:
    """The UpstreamFailed in `exc`, found through the exception groups of task groups."""
    if isinstance(exc, UpstreamFailed):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = upstream_failure(inner)
            if found is not None:
                return found
    return None


def serve_proxy_stdio(
    proxy: Proxy,
    identity: str,
    *,
    store: Store | None = None,
    audit_retention: AuditRetention | None = None,
) -> None:
    """Serve the proxy as MCP on stdin and stdout, as `identity`, until stdin ends; every call
    audited in `store` (written in batches, as the HTTP server does). The session is told
    `notifications/tools/list_changed` when the upstream's listing changes what is served.

    Raises:
        UpstreamFailed: the upstream did not start.
    """
    from strictcall.ops.tracing import traced_stdio
    from strictcall.transports.mcp import serve_stdio  # the MCP SDK loads only for a server

    policy = proxy.gateway.policy
    kept = audit_retention if audit_retention is not None else KEEP_ALL
    audit = None if store is None else AuditLog(store, retention=kept)
    record, per_call = traced_stdio(proxy.gateway, None if audit is None else audit.record)
    if audit is not None:
        proxy.audit_server_requests(audit.record)
    serving = proxy.serving
    lifespans = (
        *(() if policy is None else (policy.serving,)),
        *(() if audit is None else (audit.running,)),
        *serving.lifespans,  # the upstream's run inside the audit's: its last records last
    )
    serve_stdio(
        proxy.gateway,
        identity,
        replace(serving, record=record, call_context=per_call, lifespans=lifespans),
    )


def proxy_app(
    proxy: Proxy,
    store: Store,
    *,
    origins: OriginPolicy | None = None,
    edge: EdgeLimits | None = None,
    oauth: OAuthSettings | None = None,
    open_to_operators: bool = False,
    audit_retention: AuditRetention | None = None,
) -> RpcApp:
    """The ASGI app serving the proxy: JSON-RPC at /rpc, MCP at /mcp, tokens from `store` (and
    the identity provider's, with `oauth`), for the browser `origins` admitted and within
    `edge.max_in_flight` calls per identity, the operator page open without a token when
    `open_to_operators` (as `strictcall serve`'s app). The caller's token
    is never passed on: the upstream sees the proxy's own credentials only."""
    from strictcall.server.app import build_gateway_app

    return build_gateway_app(
        proxy.gateway,
        store,
        origins=origins,
        edge=edge,
        serving=proxy.serving,
        oauth=oauth,
        open_to_operators=open_to_operators,
        audit_to=proxy.audit_server_requests,
        redactions=lambda: proxy.redactions.counts,
        budget_refusals=proxy.budget_refusals,
        upstreams=proxy.upstream_states,
        instances=None if proxy.instances is None else proxy.instance_counts,
        audit_retention=audit_retention,
    )
