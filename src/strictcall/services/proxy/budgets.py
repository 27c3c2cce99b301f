"""What one upstream may list and send: counts per listing, sizes of descriptions and schemas,
the specification's name rules, notifications per second, how long and how large a caller's
answer to a request of the upstream's may be (`Budgets`, one value per upstream).

A listing past a count or size budget is refused whole, in one line naming the budget (and
that upstream's tools, or resources, templates and prompts, are not served until a listing
within it); the other upstreams are served as before. A tool or prompt whose name breaks the
specification's rules (1-128 of A-Z a-z 0-9 _ - .) is left out alone, in one line, escaped
and cut. Notifications past the rate are dropped, counted and said once a second.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Final

import mcp_types as types
import orjson

from strictcall.core.terminal import one_line

SPEC_NAME: Final = re.compile(r"[A-Za-z0-9_.-]{1,128}")
"""A tool's (and here a prompt's) name as the MCP specification says it should be."""


@dataclass(frozen=True, slots=True)
class Budgets:
    """Each upstream's budgets; every one has a default (docs/BUDGETS.md)."""

    max_tools: int = 1_000
    """Tools in one listing (every page of one tools/list)."""
    max_resources: int = 10_000
    """Resources in one listing."""
    max_templates: int = 1_000
    """Resource templates in one listing."""
    max_prompts: int = 1_000
    """Prompts in one listing."""
    max_description_bytes: int = 16_384
    """A tool's, resource's, template's or prompt's description, as UTF-8."""
    max_schema_bytes: int = 65_536
    """A tool's input or output schema, as compact JSON."""
    max_uri_chars: int = 2_048
    """A resource's URI or a template's URI template."""
    notifications_per_second: int = 100
    """Notifications the upstream may send a second (a burst of as many again is let
    through); past it they are dropped."""
    server_request_timeout_s: int = 120
    """Seconds a request the upstream makes of a caller during a call (sampling,
    elicitation, roots) waits for the caller's answer; past it the upstream gets an error."""
    max_server_answer_bytes: int = 1024 * 1024
    """The longest answer (as JSON) a caller may give a request of the upstream's; a longer
    one is refused to the upstream with an error."""

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The budgets' names, as a config file writes them."""
        return tuple(f.name for f in fields(cls))

    @classmethod
    def of(cls, table: Mapping[str, int], base: Budgets | None = None) -> Budgets:
        """`base` (the defaults) with the budgets `table` names."""
        values = {name: getattr(base or cls(), name) for name in cls.names()}
        values.update(table)
        return cls(**values)


DEFAULT_BUDGETS: Final = Budgets()

NAMES: Final = "names"
"""The `budget` a tool left out for its name is counted under (the specification's rules)."""


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a listing is refused whole: the budget it is past (a `Budgets` field's name) and the
    line that says so."""

    budget: str
    why: str


def tools_refusal(listing: Sequence[types.Tool], budgets: Budgets) -> Refusal | None:
    """Why a tools listing is refused whole (None: it is within its budgets)."""
    if len(listing) > budgets.max_tools:
        return _over(f"more than {budgets.max_tools} tools", "max_tools", budgets.max_tools)
    for tool in listing:
        described = _description_over(tool.description, budgets)
        if described is not None:
            return _of(f"tool {_shown(tool.name)}", described)
        for which, schema in (("input", tool.input_schema), ("output", tool.output_schema)):
            if schema is None:
                continue
            size = len(orjson.dumps(schema))
            if size > budgets.max_schema_bytes:
                what = f"tool {_shown(tool.name)}: its {which} schema of {size} bytes"
                return _over(what, "max_schema_bytes", budgets.max_schema_bytes)
    return None


def content_refusal(
    resources: Sequence[types.Resource],
    templates: Sequence[types.ResourceTemplate],
    prompts: Sequence[types.Prompt],
    budgets: Budgets,
) -> Refusal | None:
    """Why a listing of resources, templates and prompts is refused whole (None: within)."""
    counts = (
        (len(resources), "resources", "max_resources", budgets.max_resources),
        (len(templates), "resource templates", "max_templates", budgets.max_templates),
        (len(prompts), "prompts", "max_prompts", budgets.max_prompts),
    )
    for count, what, name, limit in counts:
        if count > limit:
            return _over(f"more than {limit} {what}", name, limit)
    for uri, listed in [(r.uri, r) for r in resources] + [(t.uri_template, t) for t in templates]:
        if len(uri) > budgets.max_uri_chars:
            return _over(f"a URI of {len(uri)} characters", "max_uri_chars", budgets.max_uri_chars)
        described = _description_over(listed.description, budgets)
        if described is not None:
            return _of(f"resource {_shown(uri)}", described)
    for prompt in prompts:
        described = _description_over(prompt.description, budgets)
        if described is not None:
            return _of(f"prompt {_shown(prompt.name)}", described)
    return None


def name_refusal(name: str) -> str | None:
    """Why a tool or prompt name is not served (None: it keeps the specification's rules)."""
    if SPEC_NAME.fullmatch(name) is not None:
        return None
    return f"name {_shown(name)} ({len(name)} characters) is not 1-128 of A-Z a-z 0-9 _ - ."


def _description_over(description: str | None, budgets: Budgets) -> Refusal | None:
    if description is None:
        return None
    size = len(description.encode("utf-8", "surrogatepass"))
    if size <= budgets.max_description_bytes:
        return None
    return _over(
        f"its description of {size} bytes", "max_description_bytes", budgets.max_description_bytes
    )


def _over(what: str, name: str, limit: int) -> Refusal:
    return Refusal(name, f"{what}, over {name} = {limit}")


def _of(whose: str, refusal: Refusal) -> Refusal:
    """`refusal`, said of `whose` (a tool, a resource, a prompt)."""
    return Refusal(refusal.budget, f"{whose}: {refusal.why}")


def _shown(text: str) -> str:
    """An upstream's name or URI as a log line may hold it: JSON, escaped, cut."""
    return one_line(orjson.dumps(text[:128]).decode())


class NotificationRate:
    """A token bucket over one upstream's notifications: `notifications_per_second` a second,
    a burst of as many again; `dropped` counts those refused."""

    def __init__(self, per_second: int, now: float) -> None:
        self.per_second = per_second
        self._tokens = float(2 * per_second)
        self._at = now
        self.dropped = 0

    def admit(self, now: float) -> bool:
        """Whether a notification arriving at `now` (monotonic seconds) is let through."""
        limit = 2 * self.per_second
        self._tokens = min(limit, self._tokens + (now - self._at) * self.per_second)
        self._at = now
        if self._tokens >= 1:
            self._tokens -= 1
            return True
        self.dropped += 1
        return False
