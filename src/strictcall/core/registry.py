"""The gateway's registry: the tools by name, which of them each identity may see and call,
and what is kept of them between calls (their listings, the member names their schemas
declare), all forgotten when the tools change.

`strictcall.core.gateway.Gateway` is a registry with the ladder on top; nothing here runs a
call.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from collections.abc import Set as AbstractSet
from typing import Final

from strictcall.core.listing import ToolFormat, describe_tool
from strictcall.core.pipeline import CompiledTool
from strictcall.core.policy.holder import PolicyHolder
from strictcall.core.policy.model import Claims, Policy, scope_claims
from strictcall.core.record import ENVELOPE_NAMES, kept_pointer, member_names
from strictcall.core.schema import SchemaDefinitionError
from strictcall.core.tools import Tool
from strictcall.errors import JSONValue

Allowed = Callable[[str], AbstractSet[str] | None]
"""Which tools an identity may see and call: their names, or None for every tool."""

_VIEWS_KEPT: Final = 256
"""Per-identity views of the tools kept at once (one per distinct allow-list, usually few)."""

_POLICY_VIEWS_KEPT: Final = 4096
"""Callers whose policy views are kept at once (each a dict of its tools and their grants)."""

_LISTINGS_KEPT: Final = 256
"""Listings kept at once, one per identity and format asked for."""

_SCOPED_KEPT: Final = 256
"""Views narrowed by a token's scopes kept at once (one per view and scope set)."""


class ToolRegistry:
    """Tools registered by name, each compiled once, and who may see and call which."""

    def __init__(
        self,
        tools: Iterable[Tool] = (),
        *,
        allowed: Allowed | None = None,
        policy: PolicyHolder | None = None,
    ) -> None:
        """`allowed`: which tools each identity may see and call (None: every tool);
        `policy`: the policy in force (`strictcall.core.policy`), which then decides instead.

        Raises:
            ValueError: both `allowed` and `policy` are given.
        """
        if allowed is not None and policy is not None:
            raise ValueError("give an allow-list or a policy, not both")
        self._tools: dict[str, CompiledTool] = {}
        self._numbers = False
        self._asking = False
        """Whether any tool `asks` a capability (else what a caller offers changes nothing)."""
        self._declared: dict[str, frozenset[str]] = {}
        self._allowed = allowed
        self.policy: Final = policy
        """The policy in force, or None (then `allowed`, or every tool for everyone)."""
        self._everyone = allowed is None and policy is None
        self._needs: dict[str, Claims] = {}
        self._scoped: dict[tuple[int, Claims], tuple[object, dict[str, CompiledTool]]] = {}
        self._judged: tuple[Policy | None, dict[str, CompiledTool]] = (None, {})
        self._policy_views: dict[object, dict[str, CompiledTool]] = {}
        self._views: dict[frozenset[str], dict[str, CompiledTool]] = {}
        self._listings: dict[tuple[object, ...], list[dict[str, JSONValue]]] = {}
        self.generation = 0
        """Bumped whenever the set of tools changes, for those who cache a listing."""
        self._watchers: list[Callable[[], None]] = []
        for tool in tools:
            self.register(tool)

    @property
    def asking(self) -> bool:
        """Whether a tool `asks` something of its callers' clients (else what a caller's client
        offers changes no listing: a wire need not read it)."""
        return self._asking

    def register(self, tool: Tool) -> Tool:
        """Add a tool, compiling its schemas now so that no call pays for it.

        Raises:
            ValueError: a tool of that name is already registered.
            SchemaDefinitionError: a schema is not valid JSON Schema 2020-12.
        """
        if tool.name in self._tools:
            raise ValueError(f"a tool named {tool.name!r} is already registered")
        compiled = CompiledTool.compile(tool)
        self._tools[tool.name] = compiled
        self._numbers = self._numbers or compiled.arguments.admits_numbers
        self._asking = self._asking or bool(tool.asks)
        self._views.clear()
        self._policy_views = {}
        self._scoped = {}
        self._listings = {}
        self.generation += 1
        return tool

    def replace_tools(self, tools: Iterable[Tool]) -> dict[str, str]:
        """Serve exactly `tools` from now on (calls already running finish with the old ones).

        A tool whose schema cannot be compiled, or that repeats a name, is left out: the
        result maps each such name to the reason, and the others are served.
        """
        compiled: dict[str, CompiledTool] = {}
        refused: dict[str, str] = {}
        for tool in tools:
            if tool.name in compiled or tool.name in refused:
                refused[tool.name] = "the name is listed twice"
                compiled.pop(tool.name, None)
                continue
            try:
                compiled[tool.name] = CompiledTool.compile(tool)
            except SchemaDefinitionError as exc:
                refused[tool.name] = str(exc)
        changed = _listed(compiled) != _listed(self._tools)
        # one assignment each: a call routes against the old dict or the new, never a mixture
        self._tools = compiled
        self._numbers = any(c.arguments.admits_numbers for c in compiled.values())
        self._asking = any(c.tool.asks for c in compiled.values())
        self._views = {}
        self._policy_views = {}
        self._scoped = {}
        self._declared = {}
        self._listings = {}  # after the tools: a listing kept now is of the new ones
        self.generation += 1
        if changed:
            for watcher in list(self._watchers):
                watcher()
        return refused

    def watch_tools(self, watcher: Callable[[], None]) -> Callable[[], None]:
        """Have `watcher` called (in the thread that replaces the tools) each time
        `replace_tools` changes what is listed: a name, a description or a schema. Returns the
        function that stops it."""
        self._watchers.append(watcher)

        def unwatch() -> None:
            if watcher in self._watchers:
                self._watchers.remove(watcher)

        return unwatch

    def require_scopes(self, tool_scopes: Mapping[str, Iterable[str]]) -> None:
        """Show and route each tool named in `tool_scopes` only to callers whose claims hold
        every scope it names ("scope:S"): a token's scopes decide what tools/list shows it as
        they decide what it may call (`strictcall.server.admission.ToolScopes` answers such
        a call 403 insufficient_scope before it reaches the gateway). A caller without claims
        (strictcall's own token, an operator's identity) is not limited by scopes; a tool
        named nowhere needs none. Replaces the scopes given before."""
        self._needs = {name: scope_claims(scopes) for name, scopes in tool_scopes.items()}
        self._everyone = self._allowed is None and self.policy is None and not self._needs
        self._scoped = {}
        self._listings = {}

    def tools_for(self, identity: str, claims: Claims | None = None) -> Mapping[str, CompiledTool]:
        """The tools `identity` (with `claims`, "group:G" / "scope:S", where its token says
        them) may see and call, by name: what tools/list shows it and what tools/call routes."""
        view = self._view_for(identity, claims)
        if claims is None or not self._needs:
            return view
        key = (id(view), claims)  # the view is kept alive beside its narrowing: ids not reused
        kept = self._scoped.get(key)
        if kept is None:
            needs = self._needs
            scoped = {
                name: compiled
                for name, compiled in view.items()
                if name not in needs or needs[name] <= claims
            }
            if len(self._scoped) >= _SCOPED_KEPT:
                self._scoped = {}
            self._scoped[key] = kept = (view, scoped)
        return kept[1]

    def _view_for(self, identity: str, claims: Claims | None) -> Mapping[str, CompiledTool]:
        """The tools the allow-list or the policy gives this caller (every tool without
        either), before any scope narrows them."""
        holder = self.policy
        if holder is not None:
            if claims is None and self._judged[0] is holder.current:  # every call's path
                view = self._policy_views.get(identity)
                if view is not None:
                    return view
            return self._policy_view(holder, identity, claims)
        if self._allowed is None:
            return self._tools
        names = self._allowed(identity)
        if names is None:
            return self._tools
        key = names if type(names) is frozenset else frozenset(names)
        view = self._views.get(key)
        if view is None:
            view = {name: c for name, c in self._tools.items() if name in key}
            if len(self._views) >= _VIEWS_KEPT:
                self._views.clear()
            self._views[key] = view
        return view

    def may_use(self, identity: str, name: str, claims: Claims | None = None) -> bool:
        """Whether the policy (or the allow-list) grants `identity` the name `name` as it
        would a tool of that name: what decides a served resource's or prompt's listing and
        reading (a federation's, judged by its prefixed name); with `claims` (a provider's
        token), only when they hold every scope `require_scopes` names for `name`."""
        if claims is not None:
            needs = self._needs.get(name)
            if needs is not None and not needs <= claims:
                return False
        holder = self.policy
        if holder is not None:
            found = holder.current.rule_for(
                identity, frozenset() if claims is None else claims, name
            )
            return found is not None
        if self._allowed is None:
            return True
        names = self._allowed(identity)
        return names is None or name in names

    def _policy_view(
        self, holder: PolicyHolder, identity: str, claims: Claims | None
    ) -> Mapping[str, CompiledTool]:
        """The policy's view for this caller, kept until the tools or the policy change."""
        policy = holder.current
        views = self._policy_views
        if self._judged[0] is not policy:
            views = self._policy_views = {}
            self._judged = (policy, {})
            self._scoped = {}
            self._listings = {}
        key: object = identity if claims is None else (identity, claims)
        view = views.get(key)
        if view is None:
            view = holder.view(self._tools, identity, claims, policy)
            if len(views) >= _POLICY_VIEWS_KEPT:
                views.clear()
            views[key] = view
        return view

    @property
    def reads_numbers(self) -> bool:
        """Whether some tool's arguments may hold a number. When none may, the parse does not
        look for floats and long integers: any number in a call is refused at shape anyway, with
        the same answer however it was read. A transport that parses for the gateway passes
        this on as `numbers` (see `jsontext.parse_document`)."""
        return self._numbers

    @property
    def tools(self) -> tuple[Tool, ...]:
        """The registered tools, in registration order."""
        return tuple(compiled.tool for compiled in self._tools.values())

    def tool_named(self, call: JSONValue) -> str | None:
        """The registered tool a parsed call names, or None: what an audit record says of a
        call, whether or not it climbed further."""
        if type(call) is dict:
            name = call.get("name")
            if type(name) is str and name in self._tools:
                return name
        return None

    def source_of(self, name: str) -> str | None:
        """The upstream a registered tool forwards to (None: none, or no such tool)."""
        compiled = self._tools.get(name)
        return None if compiled is None else compiled.tool.source

    def must_await(self, call: JSONValue, identity: str, claims: Claims | None = None) -> bool:
        """Whether `call_parsed_async` would await for this parsed call: it names a tool
        `identity` may call that is async or has a time limit. Every other call (one refused
        before execute included) `call_parsed` answers in place, inside an event loop too."""
        if type(call) is dict:
            name = call.get("name")
            if type(name) is str:
                tools = self._tools if self._everyone else self.tools_for(identity, claims)
                compiled = tools.get(name)
                if compiled is not None:
                    grant = compiled.grant
                    return (
                        compiled.is_async
                        or compiled.tool.timeout is not None
                        or (grant is not None and grant.waits)
                    )
        return False

    def audit_pointer(self, tool: str | None, error: Mapping[str, object] | None) -> str | None:
        """An error's pointer as an audit record may keep it (`strictcall.core.record.
        kept_pointer`): each member name the call envelope or the tool's input schema declares
        is kept, any other name (one the model made up, which is its text) is "*"; None where
        the error has no pointer (or points at the whole call)."""
        pointer = None if error is None else error.get("pointer")
        if type(pointer) is not str or not pointer.startswith("/"):
            return None
        compiled = None if tool is None else self._tools.get(tool)
        if compiled is None:
            return kept_pointer(pointer, ENVELOPE_NAMES)
        names = self._declared.get(compiled.tool.name)
        if names is None:
            names = ENVELOPE_NAMES | member_names(compiled.arguments.advertised)
            self._declared[compiled.tool.name] = names
        return kept_pointer(pointer, names)

    def list_tools(
        self,
        format: ToolFormat = "mcp",
        *,
        identity: str | None = None,
        claims: Claims | None = None,
        offers: frozenset[str] | None = None,
    ) -> list[dict[str, JSONValue]]:
        """The tools as an agent host lists them: "mcp", "openai", "openai-responses" or
        "anthropic"; the schemas are the strict ones the gateway enforces. With `identity`,
        only the tools that identity (with `claims`) may call; with `offers` (what the caller's
        client offers), only those whose `asks` it offers all of."""
        tools = self._tools if identity is None else self.tools_for(identity, claims)
        return [
            describe_tool(c.tool, c.arguments.advertised, c.result.advertised, format)
            for c in tools.values()
            if offers is None or c.tool.asks <= offers
        ]

    def listing(
        self,
        identity: str | None = None,
        format: ToolFormat = "mcp",
        claims: Claims | None = None,
        offers: frozenset[str] | None = None,
    ) -> list[dict[str, JSONValue]]:
        """`list_tools(format, identity=identity, claims=claims, offers=offers)`, kept until
        the tools or the policy change: the wires' tools/list. The list is shared: read it,
        never change it. `offers` matters only while a tool `asks` something (else the one
        listing serves every caller)."""
        if self.policy is not None and self._judged[0] is not self.policy.current:
            self._listings = {}  # a reload: the views and listings of the old policy go
        listings = self._listings  # the one `replace_tools` empties, were it to run meanwhile
        if not self._asking:
            offers = None
        key = (identity, format) if claims is None else (identity, format, claims)
        if offers is not None:
            key = (*key, offers)
        listed = listings.get(key)
        if listed is None:
            listed = self.list_tools(format, identity=identity, claims=claims, offers=offers)
            if len(listings) >= _LISTINGS_KEPT:
                listings.clear()
            listings[key] = listed
        return listed


def _listed(tools: Mapping[str, CompiledTool]) -> list[tuple[str, str, object, object, object]]:
    """What a listing shows of `tools`: each name, description and schemas, and whom it is
    listed to (its `asks`), by name."""
    return [
        (
            name,
            tool.tool.description,
            tool.tool.input_schema,
            tool.tool.output_schema,
            tool.tool.asks,
        )
        for name, tool in sorted(tools.items())
    ]
