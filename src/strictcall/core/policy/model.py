"""The policy as values: rules that grant tools to callers, quotas that limit how often.

A caller is a name and, where the token says them (OAuth, the identity issue), claims: a
frozenset of "group:NAME" and "scope:NAME" strings. A rule's `who` holds names ("alice"),
claims ("group:support", "scope:notes.read") and "*" (anyone); its `tools` holds exact names,
prefixes ending in "*" ("github__*", for a federated upstream's prefixed tools) and "*" (every
tool). A prefix matches whole segments of a name (a segment ends at `_ - . / :`): `jira*` and
`jira_*` grant `jira_search`, never `jiraext_search`. Names are compared exactly: no case
folding, no Unicode normalization, no trimming.

For each tool, the first rule (in file order) whose `who` matches the caller and whose `tools`
match the tool grants it, with that rule's limits and per-(identity, tool) rate; a tool no rule
grants is hidden (default deny). Every quota whose `who` and `tools` match applies too.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import Final, Literal

from strictcall.core.terminal import counted

EVERYONE: Final = "*"
SCOPE_PREFIX: Final = "scope:"
GROUP_PREFIX: Final = "group:"
CLAIM_PREFIXES: Final = (GROUP_PREFIX, SCOPE_PREFIX)
SERVER_REQUESTS: Final = ("sampling", "elicitation", "roots")
"""The requests a tool's server may make of its caller during a call (sampling/createMessage,
elicitation/create, roots/list), as a rule's `server_requests` names them."""
DEFAULT_DENY: Final = "default-deny"
"""What the audit names as the rule that hid a tool no rule grants (a rule may not be so
named)."""

Claims = frozenset[str]


def scope_claims(scopes: Iterable[str], groups: Iterable[str] = ()) -> Claims:
    """A token's scopes and groups as the claims a rule's `who` names ("scope:NAME",
    "group:NAME")."""
    return frozenset(
        (*(SCOPE_PREFIX + scope for scope in scopes), *(GROUP_PREFIX + group for group in groups))
    )


@dataclass(frozen=True, slots=True)
class Rate:
    """`count` calls per `period_s` seconds, at most `burst` at once."""

    count: int
    period_s: float
    burst: int

    @property
    def interval_ms(self) -> float:
        """Milliseconds per token."""
        return self.period_s * 1000.0 / self.count


@dataclass(frozen=True, slots=True)
class ToolLimits:
    """A rule's limits on the tools it grants; None: the tool's own (no limit of the rule)."""

    timeout_s: float | None = None
    max_arguments_bytes: int | None = None
    max_result_bytes: int | None = None


@dataclass(frozen=True, slots=True)
class Rule:
    """Grants `tools` to the callers `who` matches, with `limits` and an optional `rate` per
    (identity, tool)."""

    name: str
    who: tuple[str, ...]
    tools: tuple[str, ...]
    limits: ToolLimits = ToolLimits()
    rate: Rate | None = None
    fail_closed: bool = False
    server_requests: frozenset[str] | None = None
    """Which of `SERVER_REQUESTS` the tools' servers may make of the caller during a call
    (None: every one the caller's client offers); any other is refused to the server at once."""


@dataclass(frozen=True, slots=True)
class Quota:
    """A bucket per identity (`per = "identity"`) or one for all (`"global"`), over the calls
    of the callers `who` matches to the tools `tools` matches."""

    name: str
    per: Literal["identity", "global"]
    rate: Rate
    who: tuple[str, ...] = (EVERYONE,)
    tools: tuple[str, ...] = (EVERYONE,)
    fail_closed: bool = False


@dataclass(frozen=True, slots=True)
class Policy:
    """The rules and quotas of one policy file, and where shared quotas are kept."""

    rules: tuple[Rule, ...] = ()
    quotas: tuple[Quota, ...] = ()
    shared: str | None = None
    """The shared state's URL (redis://...), or None: every quota in this process alone."""
    key_prefix: str = "strictcall:quota:"

    def rule_for(self, name: str, claims: Claims, tool: str) -> Rule | None:
        """The rule that grants `tool` to this caller, or None: it is hidden."""
        for rule in self.rules:
            if matches_caller(rule.who, name, claims) and matches_tool(rule.tools, tool):
                return rule
        return None

    def quotas_for(self, name: str, claims: Claims, tool: str) -> list[Quota]:
        """The quotas a call of this caller to `tool` counts against."""
        return [
            quota
            for quota in self.quotas
            if matches_caller(quota.who, name, claims) and matches_tool(quota.tools, tool)
        ]


def matches_caller(who: tuple[str, ...], name: str, claims: Claims) -> bool:
    """Whether an entry of `who` is "*", the caller's exact name, or one of its claims."""
    for entry in who:
        if entry == EVERYONE:
            return True
        if entry.startswith(CLAIM_PREFIXES):
            if entry in claims:
                return True
        elif entry == name:
            return True
    return False


SEGMENT_ENDS: Final = "_-./:"
"""The characters that end a segment of a tool's name (`jira_search`: `jira`, then `search`)."""


def matches_tool(tools: tuple[str, ...], tool: str) -> bool:
    """Whether an entry of `tools` is "*", the tool's exact name, or a prefix of it written
    with a trailing "*" that ends on a whole segment: `jira_*` and `jira*` both grant
    `jira_search` (and `jira*` grants `jira` itself), neither grants `jiraext_search`."""
    for entry in tools:
        if entry in (tool, EVERYONE):
            return True
        if entry.endswith("*") and _on_segments(entry[:-1], tool):
            return True
    return False


def _on_segments(prefix: str, tool: str) -> bool:
    """Whether `tool` starts with `prefix` and the prefix ends where a segment of it does."""
    if not tool.startswith(prefix):
        return False
    if not prefix or prefix[-1] in SEGMENT_ENDS or len(tool) == len(prefix):
        return True
    return tool[len(prefix)] in SEGMENT_ENDS


def policy_warnings(policy: Policy, served: Collection[str] | None = None) -> list[str]:
    """What in `policy` is most likely a mistake, one sentence each: no rule at all (every tool
    hidden from every caller), or a rule whose `tools` match none of the tools `served` (None:
    not known, as for `strictcall policy check`)."""
    if not policy.rules:
        return ["the policy has no rule: every tool is hidden from every caller"]
    if served is None:
        return []
    return [
        f"rule {json.dumps(rule.name)} grants no served tool: its tools"
        f" {json.dumps(list(rule.tools))} match none of the {counted(len(served), 'tool')}"
        " served"
        for rule in policy.rules
        if not any(matches_tool(rule.tools, tool) for tool in served)
    ]
