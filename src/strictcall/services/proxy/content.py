"""A federation's resources and prompts: listed from each upstream (`list_content`), merged
and routed (`index_content`, `FederatedContent`), read through under the tools' policy.

How they are served (the choice, for hosts):

- A prompt is served as its upstream's tool would be: `prefix` `separator` `name`
  (`files_summarize`), a name hosts accept (1-64 of A-Z a-z 0-9 _ -); prompts/get routes by it.
- A resource keeps its upstream's URI: hosts and models read URIs as addresses (a file path, a
  ticket's link), and a template's URI must still expand as the upstream wrote it. Its listed
  `name` is prefixed as a tool's. resources/read routes by a registry built from the listings:
  a URI listed as a resource, or else matched by exactly one upstream's templates. Two
  upstreams listing one URI (or one template) are refused at start in one line naming both;
  a URI no upstream listed, or one that two upstreams' templates both match, is not read.
- The policy judges a resource, a template and a prompt by its prefixed name as if it were a
  tool's (`files_*` grants all of files'): listed only to those it grants, and a read or get
  it does not grant is answered forbidden_or_missing, as one of a URI or name that does not
  exist (the two are never told apart).
- What an upstream answers is read as the SDK's models (their shape checked), capped as a
  tool's result (`result_too_large`), and passed on without its `_meta`; a name or URI holding
  a control, format or separator character is not served (said once in the log, escaped).
- A listed resource, template or prompt keeps its title and icons, checked as a tool's are
  (`strictcall.core.display`: the title's control and bidi characters as U+FFFD, cut at its
  limit; an icon hosts should not fetch or show left out); its listing `_meta` is not passed.
- A session subscribes to a resource it may read by its URI (`subscribe`): one registry for the
  whole federation (`Subscriptions`: at most `MAX_SUBSCRIPTIONS` per session), the upstream that
  serves the URI subscribed once, its updates to that URI's sessions alone (`updated`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Generic, Protocol, TypeVar

import anyio
import mcp_types as types
from mcp.client.session import ClientSession
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel, ValidationError

from strictcall.core.display import MAX_ICONS, icon_problem, neutral_text
from strictcall.core.policy.model import Claims
from strictcall.core.terminal import one_line
from strictcall.core.tools import ToolFailure
from strictcall.errors import (
    FORBIDDEN_OR_MISSING,
    INVALID_REQUEST,
    INVALID_TOOL_RESULT,
    RESULT_TOO_LARGE,
    RETRY_AFTER_MS,
    TIMEOUT,
    TOOL_ERROR,
    JSONValue,
    Reason,
)
from strictcall.services.proxy.stdio import AnswerTooLarge, UnreadableAnswer
from strictcall.services.proxy.subscriptions import (
    MAX_SUBSCRIPTIONS,
    UNSUBSCRIBE_S,
    Send,
    Subscriptions,
    TooManySubscriptions,
)
from strictcall.transports.mcp.content import Kind

if TYPE_CHECKING:
    from strictcall.services.proxy.config import UpstreamConfig
    from strictcall.services.proxy.upstream import Upstream

MAX_PAGES: Final = 100
"""The most pages of one listing read from an upstream (a cursor that never ends is cut)."""

_NAME: Final = re.compile(r"[A-Za-z0-9_-]{1,64}")
"""A prompt's served name, as hosts accept a tool's (`config.HOST_NAME`)."""

_EXPRESSION: Final = re.compile(r"\{([+#./;?&]?)[A-Za-z0-9_.%,*:]+\}")

ModelT = TypeVar("ModelT", bound=BaseModel)
T = TypeVar("T")

_TOO_MANY: Final[dict[str, JSONValue]] = {
    "reason": Reason.MAX_ITEMS.value,
    "expected": MAX_SUBSCRIPTIONS,
}
"""The details of a subscription past `MAX_SUBSCRIPTIONS`: the budget, never the URI."""


@dataclass(frozen=True, slots=True)
class UpstreamContent:
    """What one upstream lists besides its tools."""

    resources: tuple[types.Resource, ...] = ()
    templates: tuple[types.ResourceTemplate, ...] = ()
    prompts: tuple[types.Prompt, ...] = ()
    offers: frozenset[Kind] = frozenset()
    """What its capabilities say it has ("resources", "prompts"), listed or not."""
    subscribes: bool = False
    """Its capabilities offer resources/subscribe."""


class _Page(Protocol):
    next_cursor: str | None


async def list_content(
    session: ClientSession, capabilities: types.ServerCapabilities, note: Callable[[str], None]
) -> UpstreamContent:
    """Every page of the resources, templates and prompts the upstream's capabilities say it
    has; a listing that fails is noted (its kind, never its text) and left empty."""
    resources: list[types.Resource] = []
    templates: list[types.ResourceTemplate] = []
    prompts: list[types.Prompt] = []
    if capabilities.resources is not None:
        for listed in await _pages(session.list_resources, "resources/list", note):
            resources.extend(listed.resources)
        for templated in await _pages(session.list_resource_templates, "templates/list", note):
            templates.extend(templated.resource_templates)
    if capabilities.prompts is not None:
        for prompted in await _pages(session.list_prompts, "prompts/list", note):
            prompts.extend(prompted.prompts)
    offers: set[Kind] = set()
    if capabilities.resources is not None:
        offers.add("resources")
    if capabilities.prompts is not None:
        offers.add("prompts")
    subscribes = capabilities.resources is not None and capabilities.resources.subscribe is True
    return UpstreamContent(
        tuple(resources), tuple(templates), tuple(prompts), frozenset(offers), subscribes
    )


PageT = TypeVar("PageT", bound=_Page)


async def _pages(
    list_page: Callable[..., Awaitable[PageT]], method: str, note: Callable[[str], None]
) -> list[PageT]:
    pages: list[PageT] = []
    cursor: str | None = None
    for _ in range(MAX_PAGES):
        params = None if cursor is None else types.PaginatedRequestParams(cursor=cursor)
        try:
            page = await list_page(params=params)
        except MCPError as exc:
            if exc.code != types.METHOD_NOT_FOUND:
                note(f"upstream {method} failed (JSON-RPC error {exc.code}); none served")
            return []
        except ValidationError:
            note(f"upstream {method} answered a listing of another shape; none served")
            return []
        pages.append(page)
        if page.next_cursor is None:
            return pages
        cursor = page.next_cursor
    note(f"upstream {method} has more than {MAX_PAGES} pages; the rest left out")
    return pages


ListedT = TypeVar("ListedT", types.Resource, types.ResourceTemplate, types.Prompt)


@dataclass(frozen=True, slots=True)
class _Served(Generic[ListedT]):
    """One resource, template or prompt as served: its upstream, the name the policy judges
    it by, its upstream's own name (a prompt's, for prompts/get) and the model listed."""

    upstream: Upstream
    owner: str
    judged: str
    own: str
    listed: ListedT
    timeout: float | None
    pattern: re.Pattern[str] | None = None


@dataclass(frozen=True, slots=True)
class ContentIndex:
    """The merged listings, sorted (resources by URI, templates by URI template, prompts by
    served name), and what the upstreams offer."""

    resources: dict[str, _Served[types.Resource]]
    templates: tuple[_Served[types.ResourceTemplate], ...]
    prompts: dict[str, _Served[types.Prompt]]
    offers: frozenset[Kind]
    subscribes: bool = False
    """One of the upstreams whose resources are served offers resources/subscribe."""


Entry = tuple["UpstreamConfig", "Upstream", UpstreamContent | None]
"""An upstream's config, its runner and its content (None: never listed)."""


_KINDS: Final = {"resource URI": "resource", "resource template": "template", "prompt": "prompt"}
"""Each collision's `what` and the kind its pin key starts with."""

Listed = types.Resource | types.ResourceTemplate | types.Prompt


def _admit_all(key: str, upstream: str, listed: Listed) -> bool:
    return True


def index_content(
    entries: Sequence[Entry],
    separator: str,
    *,
    owners: dict[str, str] | None = None,
    admit: Callable[[str, str, Listed], bool] = _admit_all,
) -> tuple[ContentIndex, dict[str, str], list[str]]:
    """The served content of `entries`, the names left out (each with its reason, for the log)
    and the collisions between upstreams (one line each, naming both).

    `owners` maps each key (`resource:URI`, `template:URI`, `prompt:NAME`) to the upstream that
    has it: one already there keeps it (a federation's after its start; added to here), and
    `admit(key, upstream, listed)` says whether its pin lets it be served."""
    owners = {} if owners is None else owners
    resources: dict[str, _Served[types.Resource]] = {}
    templates: dict[str, _Served[types.ResourceTemplate]] = {}
    prompts: dict[str, _Served[types.Prompt]] = {}
    refused: dict[str, str] = {}
    collisions: list[str] = []
    offers: set[Kind] = set()
    subscribes = False

    def claim(
        kept: dict[str, _Served[Any]],
        key: str,
        served: _Served[Any],
        what: str,
        config: UpstreamConfig,
    ) -> None:
        pin_key = f"{_KINDS[what]}:{key}"
        owner = owners.setdefault(pin_key, config.name)
        if owner != config.name:
            collisions.append(
                f"{what} {_shown(key)} of upstream {config.name} collides with the same"
                f" {what} of upstream {owner}: serve one of them only"
            )
            return
        if key not in kept and admit(pin_key, config.name, served.listed):
            kept[key] = served

    for config, upstream, content in entries:
        if content is None:
            continue
        offers |= content.offers
        subscribes = subscribes or (content.subscribes and "resources" in content.offers)
        timeout = config.timeout
        for resource in content.resources:
            judged = config.served_name(resource.name, separator)
            if not (resource.uri.isprintable() and judged.isprintable()):
                refused[_shown(resource.uri)] = "its URI or name holds a control character"
                continue
            listed = resource.model_copy(update={"name": judged, **_shown_members(resource)})
            served = _Served(upstream, config.name, judged, resource.name, listed, timeout)
            claim(resources, resource.uri, served, "resource URI", config)
        for template in content.templates:
            judged = config.served_name(template.name, separator)
            pattern = _template_pattern(template.uri_template)
            if pattern is None or not judged.isprintable():
                refused[_shown(template.uri_template)] = "not a URI template strictcall reads"
                continue
            listed_t = template.model_copy(update={"name": judged, **_shown_members(template)})
            by_template = _Served(
                upstream, config.name, judged, template.name, listed_t, timeout, pattern
            )
            claim(templates, template.uri_template, by_template, "resource template", config)
        for prompt in content.prompts:
            judged = config.served_name(prompt.name, separator)
            if _NAME.fullmatch(judged) is None:
                refused[_shown(judged)] = "hosts accept 1-64 of A-Z a-z 0-9 _ - in a prompt's name"
                continue
            listed_p = prompt.model_copy(update={"name": judged, **_shown_members(prompt)})
            claim(
                prompts,
                judged,
                _Served(upstream, config.name, judged, prompt.name, listed_p, timeout),
                "prompt",
                config,
            )
    index = ContentIndex(
        {uri: resources[uri] for uri in sorted(resources)},
        tuple(templates[key] for key in sorted(templates)),
        {name: prompts[name] for name in sorted(prompts)},
        frozenset(offers),
        subscribes,
    )
    return index, refused, collisions


def _shown(text: str) -> str:
    """A name or URI of an upstream's, as the log may print it: JSON, every character a
    terminal acts on escaped."""
    return one_line(json.dumps(text))


def _template_pattern(template: str) -> re.Pattern[str] | None:
    """The URIs an RFC 6570 template expands to, as a pattern (a simple expression matches
    one path segment; a reserved `+` or `#` one anything; a query `?`/`&` the rest of the
    query); None when the template holds braces that are not expressions."""
    parts: list[str] = []
    at = 0
    for found in _EXPRESSION.finditer(template):
        literal = template[at : found.start()]
        if "{" in literal or "}" in literal:
            return None
        parts.append(re.escape(literal))
        operator = found.group(1)
        if operator in ("+", "#"):
            parts.append(".*")
        elif operator in ("?", "&"):
            parts.append(r"(?:[?&][^#]*)?")
        else:
            parts.append(r"[^/?#]*")
        at = found.end()
    rest = template[at:]
    if "{" in rest or "}" in rest:
        return None
    parts.append(re.escape(rest))
    return re.compile("".join(parts), re.DOTALL)


class FederatedContent:
    """The served content of a federation (`McpContent`), its index replaced whole as the
    upstreams list; `may_use(identity, name, claims)` is the gateway's policy (and scopes)."""

    def __init__(self, may_use: Callable[[str, str, Claims | None], bool]) -> None:
        self._may_use = may_use
        self.index = ContentIndex({}, (), {}, frozenset())
        self._watchers: list[Callable[[Kind], None]] = []
        self.subscriptions: Final = Subscriptions()
        """Which downstream session holds which URI (at most `MAX_SUBSCRIPTIONS` each)."""
        self._subscribed_at: dict[str, Upstream] = {}
        """The upstream each URI someone holds was subscribed at (its updates alone count)."""

    def replace(self, index: ContentIndex) -> None:
        """Serve `index` from now on; the watchers are told what it changed."""
        old, self.index = self.index, index
        changed: list[Kind] = []
        if _listed(old.resources.values(), old.templates) != _listed(
            index.resources.values(), index.templates
        ):
            changed.append("resources")
        if _listed(old.prompts.values()) != _listed(index.prompts.values()):
            changed.append("prompts")
        for kind in changed:
            for watcher in list(self._watchers):
                watcher(kind)

    def watch(self, watcher: Callable[[Kind], None]) -> Callable[[], None]:
        self._watchers.append(watcher)

        def unwatch() -> None:
            if watcher in self._watchers:
                self._watchers.remove(watcher)

        return unwatch

    def offers(self) -> frozenset[Kind]:
        return self.index.offers

    def resources(self, identity: str, claims: Claims | None = None) -> list[types.Resource]:
        return [
            served.listed
            for served in self.index.resources.values()
            if self._may_use(identity, served.judged, claims)
        ]

    def templates(
        self, identity: str, claims: Claims | None = None
    ) -> list[types.ResourceTemplate]:
        return [
            served.listed
            for served in self.index.templates
            if self._may_use(identity, served.judged, claims)
        ]

    def prompts(self, identity: str, claims: Claims | None = None) -> list[types.Prompt]:
        return [
            served.listed
            for served in self.index.prompts.values()
            if self._may_use(identity, served.judged, claims)
        ]

    def routes(self, kind: Kind, key: str) -> bool:
        if kind == "resources":
            return self._resource_at(uri=key) is not None
        return key in self.index.prompts

    def _resource_at(self, uri: str) -> _Served[Any] | None:
        """The resource listed at `uri`, or else the one template of all that matches it."""
        index = self.index
        served: _Served[Any] | None = index.resources.get(uri)
        if served is None:
            matched = {
                id(t.upstream): t
                for t in index.templates
                if t.pattern is not None and t.pattern.fullmatch(uri)
            }
            served = next(iter(matched.values())) if len(matched) == 1 else None
        return served

    async def read_resource(
        self, identity: str, uri: str, claims: Claims | None = None
    ) -> types.ReadResourceResult:
        served = self._resource_at(uri)
        if served is None or not self._may_use(identity, served.judged, claims):
            raise ToolFailure(FORBIDDEN_OR_MISSING)
        request = types.ReadResourceRequest(params=types.ReadResourceRequestParams(uri=uri))
        result = await _forwarded(served, request, types.ReadResourceResult)
        return types.ReadResourceResult(contents=result.contents)

    def subscribes(self) -> bool:
        return self.index.subscribes

    async def subscribe(
        self, identity: str, caller: str, uri: str, send: Send, claims: Claims | None = None
    ) -> None:
        """Subscribe the session `caller` (of `identity`) to the resource at `uri`, its updates
        sent by `send`: the upstream that serves it is subscribed when `caller` is the first.

        Raises:
            ToolFailure: the caller may not read it, nobody serves it or its upstream does not
                offer subscriptions (forbidden_or_missing, alike); `caller` holds
                `MAX_SUBSCRIPTIONS` already (invalid_request, max_items); the upstream failed.
        """
        served = self._resource_at(uri)
        if (
            served is None
            or not self._may_use(identity, served.judged, claims)
            or not served.upstream.subscribes
        ):
            raise ToolFailure(FORBIDDEN_OR_MISSING)
        try:
            first = self.subscriptions.subscribe(caller, uri, send)
        except TooManySubscriptions:
            raise ToolFailure(INVALID_REQUEST, details=_TOO_MANY) from None
        if not first:
            return
        upstream = served.upstream
        self._subscribed_at[uri] = upstream
        try:
            await _failures(served, upstream.subscribe(uri))
        except BaseException:
            if self.subscriptions.unsubscribe(caller, uri):
                del self._subscribed_at[uri]
            raise

    async def unsubscribe(self, caller: str, uri: str) -> None:
        """The session `caller` no longer holds `uri` (one it never held: nothing happens); the
        upstream is unsubscribed when it was the last."""
        if self.subscriptions.unsubscribe(caller, uri):
            upstream = self._subscribed_at.pop(uri, None)
            if upstream is not None:
                await upstream.unsubscribe(uri)

    async def forget(self, caller: str) -> None:
        """The session `caller` ended: its subscriptions go, the upstreams unsubscribed from
        the URIs nobody holds any more."""
        gone = [
            (uri, self._subscribed_at.pop(uri, None)) for uri in self.subscriptions.forget(caller)
        ]
        with anyio.move_on_after(UNSUBSCRIBE_S):  # all of them, however many
            for uri, upstream in gone:
                if upstream is not None:
                    await upstream.unsubscribe(uri)

    async def updated(self, upstream: Upstream, params: object) -> None:
        """`upstream`'s `notifications/resources/updated`: to the sessions holding its URI, when
        it is the upstream that URI was subscribed at (another's goes nowhere)."""
        uri = params.get("uri") if type(params) is dict else None
        if type(uri) is str and self._subscribed_at.get(uri) is upstream:
            await self.subscriptions.updated(params)

    async def get_prompt(
        self,
        identity: str,
        name: str,
        arguments: dict[str, str] | None,
        claims: Claims | None = None,
    ) -> types.GetPromptResult:
        served = self.index.prompts.get(name)
        if served is None or not self._may_use(identity, served.judged, claims):
            raise ToolFailure(FORBIDDEN_OR_MISSING)
        params = types.GetPromptRequestParams(name=served.own, arguments=arguments)
        result = await _forwarded(
            served, types.GetPromptRequest(params=params), types.GetPromptResult
        )
        return types.GetPromptResult(description=result.description, messages=result.messages)

    async def complete(
        self, identity: str, params: types.CompleteRequestParams, claims: Claims | None = None
    ) -> types.CompleteResult:
        """completion/complete for a served prompt's argument (its served name mapped back to
        the upstream's own) or a served template's, from the upstream that serves it."""
        ref = params.ref
        served: _Served[Any] | None
        if isinstance(ref, types.PromptReference):
            served = self.index.prompts.get(ref.name)
            own_ref: types.PromptReference | types.ResourceTemplateReference = (
                ref if served is None else types.PromptReference(type="ref/prompt", name=served.own)
            )
        else:
            served = next(
                (t for t in self.index.templates if t.listed.uri_template == ref.uri), None
            )
            own_ref = ref
        if served is None or not self._may_use(identity, served.judged, claims):
            raise ToolFailure(FORBIDDEN_OR_MISSING)
        forwarded = types.CompleteRequestParams(
            ref=own_ref, argument=params.argument, context=params.context
        )
        request = types.CompleteRequest(params=forwarded)
        result = await _forwarded(served, request, types.CompleteResult)
        return types.CompleteResult(completion=result.completion)


def _listed(*groups: Iterable[_Served[Any]]) -> list[BaseModel]:
    return [served.listed for group in groups for served in group]


async def _forwarded(
    served: _Served[Any], request: types.ClientRequest, result_type: type[ModelT]
) -> ModelT:
    """`request` through `served`'s upstream within its timeout; failures in the catalogue's
    terms (the upstream's own error text withheld)."""
    return await _failures(served, served.upstream.forward(request, result_type))


async def _failures(served: _Served[Any], sent: Awaitable[T]) -> T:
    """`sent` (a request to `served`'s upstream) within its timeout; failures in the
    catalogue's terms (the upstream's own error text withheld)."""
    upstream = served.upstream
    try:
        with anyio.fail_after(served.timeout):
            return await sent
    except TimeoutError:
        raise ToolFailure(TIMEOUT, retry_after_ms=RETRY_AFTER_MS) from None
    except MCPError:
        raise ToolFailure(TOOL_ERROR) from None
    except (ValidationError, UnreadableAnswer):
        raise ToolFailure(INVALID_TOOL_RESULT) from None
    except AnswerTooLarge:
        raise ToolFailure(RESULT_TOO_LARGE, details={"limit": upstream.max_result_bytes}) from None


def _shown_members(
    listed: types.Resource | types.ResourceTemplate | types.Prompt,
) -> dict[str, Any]:
    """The members a listed resource, template or prompt is served with in place of its own:
    no `_meta`, its title neutralised and its icons checked as a tool's."""
    update: dict[str, Any] = {"meta": None}
    if listed.title is not None:
        update["title"] = neutral_text(listed.title)
    if listed.icons is not None:
        kept = [
            i for i in listed.icons if icon_problem(i.src, i.mime_type, i.sizes, i.theme) is None
        ]
        update["icons"] = kept[:MAX_ICONS]
    return update
