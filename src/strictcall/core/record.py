"""The audit record: one call as the operator sees it, never argument values or note text.

The one place records are made: `record_of` makes the record of a call the gateway settled
(its `Outcome`), `refusal_record` the record of a message a wire refused before the ladder
(admission, the JSON-RPC envelope, MCP's intake). Every wire and the command line use these, so
that a call's record is the same whichever way it came. The audit log batches them into the
store, and operations (metrics, spans, the page) read them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final, NamedTuple

from strictcall.core.ids import mint_call_id
from strictcall.core.policy.model import DEFAULT_DENY
from strictcall.errors import FORBIDDEN_OR_MISSING

if TYPE_CHECKING:
    from strictcall.core.gateway import Outcome

AUDIT_POINTER_MAX: Final = 256
"""The longest pointer an audit record keeps (declared names are the operator's, but deep)."""

ENVELOPE_NAMES: Final = frozenset({"name", "arguments"})
"""The member names every call may hold, which a kept pointer shows as they are."""


class AuditRecord(NamedTuple):
    """One call, as the operator sees it: never argument values or note text."""

    at: float
    call_id: str | None
    identity: str | None
    tool: str | None
    outcome: str
    code: str | None
    stage: str | None
    latency_us: int
    reason: str | None = None
    """The catalogue's reason of a parse or shape error (`strictcall.errors.Reason`); for a
    refusal of the policy, the name of its rule (`default-deny` for a tool no rule grants); for
    an upstream's error result, the upstream's name (never its text)."""
    pointer: str | None = None
    """Where a shape error is, as the gateway's `audit_pointer` shows it: member names the
    tool's schema declares, any other name as "*" (a name the model made up is its text)."""

    @classmethod
    def of_call(
        cls,
        call_id: str | int | None,
        identity: str | None,
        tool: str | None,
        error: Mapping[str, Any] | None,
        latency_us: int,
        *,
        pointer: str | None = None,
    ) -> AuditRecord:
        """The record of one call, now: a success when `error` is None, else its code, stage
        and reason. `pointer` is given by the caller, already made safe to keep
        (`Gateway.audit_pointer`): the error's own may hold a name the model made up."""
        reason = None if error is None else error.get("reason")
        return cls(
            time.time(),
            None if call_id is None else str(call_id),
            identity,
            tool,
            "ok" if error is None else "error",
            None if error is None else error["code"],
            None if error is None else error["stage"],
            latency_us,
            reason if type(reason) is str else None,
            pointer,
        )


# A NamedTuple's own constructor is a Python function; tuple.__new__ builds the same in C.
_new_record: Final[Callable[[type[AuditRecord], tuple[object, ...]], AuditRecord]] = tuple.__new__
_now: Final = time.time


def record_of(outcome: Outcome, identity: str | None) -> AuditRecord:
    """The record of a call the gateway settled (`Gateway.settle`): its call id, the tool it
    named, and for a refusal the code, stage, reason and the pointer as the gateway kept it."""
    answer = outcome.answer
    call_id = answer["call_id"]
    if type(call_id) is not str:
        call_id = str(call_id)
    if answer["ok"] is True:
        fields = (_now(), call_id, identity, outcome.tool, "ok", None, None, outcome.latency_us)
        return _new_record(AuditRecord, (*fields, None, None))
    error = answer["error"]
    reason = error.get("reason")
    if type(reason) is not str:
        reason = _policy_rule(error, outcome.tool)
    return _new_record(
        AuditRecord,
        (
            _now(),
            call_id,
            identity,
            outcome.tool,
            "error",
            error["code"],
            error["stage"],
            outcome.latency_us,
            reason if type(reason) is str else None,
            outcome.pointer,
        ),
    )


POLICY_CODES: Final = frozenset(
    {"rate_limited", "quota_unavailable", "arguments_too_large", "result_too_large"}
)
"""The refusals a policy's rule makes; their record's `reason` is the rule's name."""


def _policy_rule(error: Mapping[str, Any], tool: str | None) -> str | None:
    """The policy's rule that refused a call, as its record keeps it in `reason`: the rule a
    policy refusal names, or `DEFAULT_DENY` for a registered tool the caller may not see (the
    caller is told `unknown_tool`, as for a tool that does not exist; the operator is not)."""
    code = error["code"]
    if code == "tool_error":  # an upstream's error result names its upstream, never its text
        upstream = error.get("upstream")
        return upstream if type(upstream) is str else None
    if code in POLICY_CODES:
        rule = error.get("rule")
        return rule if type(rule) is str else None
    if code == "unknown_tool" and tool is not None:
        return DEFAULT_DENY
    return None


def refusal_record(
    error: Mapping[str, Any],
    identity: str | None,
    call_id: str | int | None = None,
    tool: str | None = None,
    latency_us: int = 0,
) -> AuditRecord:
    """The record of a message refused before (or beside) the gateway's ladder: its structured
    `error`, with the call id and the registered tool it named when they could be read."""
    return AuditRecord.of_call(call_id, identity, tool, error, latency_us)


RESOURCE_READ: Final = "resource:"
"""What a resources/read's record keeps where a call's tool stands: this, then the URI read."""
PROMPT_GET: Final = "prompt:"
"""What a prompts/get's record keeps where a call's tool stands: this, then the prompt's name."""
CONTENT_KINDS: Final = {RESOURCE_READ: "resources/read", PROMPT_GET: "prompts/get"}
"""The prefix of a read's record, and the method it was (as /metrics labels its reads)."""
AUDIT_URI_MAX: Final = 512
"""The most characters of a URI a record keeps (a template's variables are the caller's)."""


def content_method(tool: str | None) -> str | None:
    """The method of a read's or get's record ("resources/read", "prompts/get"), or of a
    request of an upstream's ("elicitation/create", ...), as counts group it (its URI may be
    the caller's text, one key per read); None for any other."""
    if tool is not None and tool.startswith(_CONTENT_PREFIXES):
        return CONTENT_KINDS[tool[: tool.index(":") + 1]]
    if tool is not None and tool.startswith(SERVER_REQUEST):
        kind = tool[len(SERVER_REQUEST) :].partition(":")[0]
        return SERVER_REQUEST_METHODS.get(kind)
    return None


SERVER_REQUEST: Final = "server-request:"
"""What the record of a request an upstream made of a caller during a call keeps where a
call's tool stands: this, its kind (sampling, elicitation, roots), ":" and the upstream's
name."""
SERVER_REQUEST_METHODS: Final = {
    "sampling": "sampling/createMessage",
    "elicitation": "elicitation/create",
    "roots": "roots/list",
}
"""Each kind of request of an upstream's, and its method (as counts group them)."""
SERVER_REQUEST_OUTCOMES: Final = frozenset(
    {
        "answered",
        "refused_by_policy",
        "no_capability",
        "no_caller",
        "timed_out",
        "too_large",
        "caller_error",
        "too_many_rounds",
    }
)
"""How a request of an upstream's ended, as its record's `reason` says: answered by the
caller; refused because the policy's rule forbids its kind, the caller's client does not offer
it (or its wire cannot carry it), or no one caller's call could be told to be its own; the
caller did not answer in time, answered too much, or answered with an error (or failed); or
its 2026-07-28 caller held as many input_required rounds as it may (`Rounds.max_held`)."""


def server_request_record(
    kind: str,
    upstream: str,
    identity: str | None,
    call_id: str | int | None,
    outcome: str,
    latency_us: int,
) -> AuditRecord:
    """The record of one request an upstream made during a call: its kind and upstream where a
    call's tool stands, the caller it was the call of (None: none could be told), the call's
    id, "ok" when answered (else "error"), and `outcome` as its reason; never what was asked or
    answered."""
    if outcome not in SERVER_REQUEST_OUTCOMES:
        raise ValueError(f"{outcome!r} is not one of SERVER_REQUEST_OUTCOMES")
    return AuditRecord(
        time.time(),
        None if call_id is None else str(call_id),
        identity,
        f"{SERVER_REQUEST}{kind}:{upstream}",
        "ok" if outcome == "answered" else "error",
        None,
        None,
        latency_us,
        outcome,
    )


_CONTENT_PREFIXES: Final = tuple(CONTENT_KINDS)


def content_record(
    prefix: str,
    served: str | None,
    identity: str | None,
    error: Mapping[str, Any] | None,
    latency_us: int,
    call_id: str | None,
) -> AuditRecord:
    """The record of a resources/read or prompts/get (`prefix`: `RESOURCE_READ` or
    `PROMPT_GET`): the URI or name as served (None: one nothing serves, the caller's text not
    kept), at most `AUDIT_URI_MAX` characters. One that is served yet answered
    forbidden_or_missing was refused by the policy: its reason is `DEFAULT_DENY`, as for a
    tool the caller may not see (the caller is told the same as for one that does not exist)."""
    named = prefix if served is None else prefix + served[:AUDIT_URI_MAX]
    record = AuditRecord.of_call(call_id, identity, named, error, latency_us)
    if served is not None and error is not None and error["code"] == FORBIDDEN_OR_MISSING.code:
        return record._replace(reason=DEFAULT_DENY)
    return record


OPERATOR_COMMANDS: Final = frozenset({"tokens list", "tokens revoke"})
"""The operator's commands kept in the audit where a call's tool stands (`command_record`):
the page and `stats` count them apart from the agents' calls."""


def command_record(
    command: str, identity: str | None, error: Mapping[str, Any] | None = None
) -> AuditRecord:
    """The record of an operator's command on the store (`strictcall tokens list`, `revoke`):
    the command where a call's tool stands, `identity` whose tokens, `error` when it was
    refused; its call id minted as every call id is."""
    if command not in OPERATOR_COMMANDS:
        raise ValueError(f"{command!r} is not one of OPERATOR_COMMANDS")
    return AuditRecord.of_call(mint_call_id("cli"), identity, command, error, 0)


def kept_pointer(pointer: str, declared: frozenset[str]) -> str:
    """`pointer` as an audit record may keep it: each member name in `declared` kept, any other
    name "*" (a name the model made up is its text), array indexes kept; at most
    `AUDIT_POINTER_MAX` characters."""
    kept = [
        part if _is_index(part) or _unescaped(part) in declared else "*"
        for part in pointer[1:].split("/")
    ]
    return ("/" + "/".join(kept))[:AUDIT_POINTER_MAX]


def member_names(schema: object) -> frozenset[str]:
    """Every member name a schema declares anywhere in it (properties, required)."""
    names: set[str] = set()
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            properties = node.get("properties")
            if isinstance(properties, dict):
                names.update(key for key in properties if isinstance(key, str))
            required = node.get("required")
            if isinstance(required, list):
                names.update(key for key in required if isinstance(key, str))
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return frozenset(names)


def _is_index(part: str) -> bool:
    """Whether a pointer's part is an array index (digits, no leading zero, at most 9)."""
    return part.isascii() and part.isdigit() and len(part) <= 9 and (part == "0" or part[0] != "0")


def _unescaped(part: str) -> str:
    """A pointer's part as the member name it stands for (RFC 6901)."""
    return part.replace("~1", "/").replace("~0", "~")
