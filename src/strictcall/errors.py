"""The one catalogue of every failure strictcall can answer with.

A failure is an `ErrorKind`: a stable `code`, the `stage` of the pipeline where it was decided,
and whether the same call can succeed if it is simply sent again (`retryable`). Every kind the
project can emit is a named constant below, with a one-line docstring; tests import these
constants and never match message text.

A `Rejection` is one failure of one call: its kind plus the details that help the agent fix the
call (a JSON Pointer, a reason, what was expected, a position). Details are only ever built from
the schema, the catalogue and positions in the text, never from the values the model sent.

Stages, in the order a call climbs them (first failure wins):

    parse -> route -> shape -> resource -> execute -> output

`auth` and `protocol` belong to the transports: a call without a valid token, or a JSON-RPC
envelope that is not a request, never reaches the ladder.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Any, Final, TypeAlias, final

JSONValue: TypeAlias = Any
"""A value that JSON text can hold: None, bool, int, float, str, list or dict with str keys."""


class Stage(StrEnum):
    """Where a call failed."""

    PARSE = "parse"
    ROUTE = "route"
    SHAPE = "shape"
    RESOURCE = "resource"
    EXECUTE = "execute"
    OUTPUT = "output"
    AUTH = "auth"
    PROTOCOL = "protocol"


class Reason(StrEnum):
    """Why a call failed where it did: the `reason` detail of parse and shape errors.

    Parse reasons say what was wrong with the text; shape reasons name the JSON Schema rule the
    arguments broke (`expected` then says what the rule asked for, from the schema alone). What
    each means is `REASON_MEANINGS`, which the README's table of reasons shows.
    """

    TOO_LARGE = "too_large"
    NOT_TEXT = "not_text"
    SYNTAX = "syntax"
    INVALID_UTF8 = "invalid_utf8"
    LONE_SURROGATE = "lone_surrogate"
    DUPLICATE_MEMBER = "duplicate_member"
    TOO_DEEP = "too_deep"
    NUMBER_OUT_OF_RANGE = "number_out_of_range"
    UNEXPECTED_MEMBER = "unexpected_member"
    MISSING_MEMBER = "missing_member"
    MIN_PROPERTIES = "min_properties"
    MAX_PROPERTIES = "max_properties"
    PROPERTY_NAMES = "property_names"
    TYPE = "type"
    ENUM = "enum"
    CONST = "const"
    FORMAT = "format"
    NOT_ALLOWED = "not_allowed"
    MIN_LENGTH = "min_length"
    MAX_LENGTH = "max_length"
    PATTERN = "pattern"
    CONTENT_ENCODING = "content_encoding"
    CONTENT_MEDIA_TYPE = "content_media_type"
    MINIMUM = "minimum"
    MAXIMUM = "maximum"
    EXCLUSIVE_MINIMUM = "exclusive_minimum"
    EXCLUSIVE_MAXIMUM = "exclusive_maximum"
    MULTIPLE_OF = "multiple_of"
    MIN_ITEMS = "min_items"
    MAX_ITEMS = "max_items"
    UNIQUE_ITEMS = "unique_items"
    UNEXPECTED_ITEM = "unexpected_item"
    CONTAINS = "contains"
    ANY_OF = "any_of"
    ONE_OF = "one_of"
    NOT = "not"
    CONSTRAINT = "constraint"


REASON_MEANINGS: Final[Mapping[Reason, str]] = MappingProxyType(
    {
        Reason.TOO_LARGE: "Longer than the size limit; not read.",
        Reason.NOT_TEXT: "Neither str nor bytes.",
        Reason.SYNTAX: "Not JSON: syntax, NaN, a comment, trailing data, a raw control character.",
        Reason.INVALID_UTF8: "Bytes that are not UTF-8.",
        Reason.LONE_SURROGATE: "A \\u escape of half a surrogate pair, which names no character.",
        Reason.DUPLICATE_MEMBER: "A member named twice (parsers differ on which one wins).",
        Reason.TOO_DEEP: "Nested deeper than the depth limit.",
        Reason.NUMBER_OUT_OF_RANGE: "A number beyond a double's range.",
        Reason.UNEXPECTED_MEMBER: "A member the schema does not have (`expected`: those it has).",
        Reason.MISSING_MEMBER: "A required member is absent (`expected`: its name).",
        Reason.MIN_PROPERTIES: "Fewer members than the schema's minProperties.",
        Reason.MAX_PROPERTIES: "More members than the schema's maxProperties.",
        Reason.PROPERTY_NAMES: "A member name the schema's propertyNames refuses.",
        Reason.TYPE: "Another JSON type than the schema asks (`expected`: the type or types).",
        Reason.ENUM: "Not one of the schema's values (`expected`: the list).",
        Reason.CONST: "Not the schema's one value (`expected`: it).",
        Reason.FORMAT: "A string not in the declared format.",
        Reason.NOT_ALLOWED: "The schema admits nothing here (false).",
        Reason.MIN_LENGTH: "Shorter than minLength.",
        Reason.MAX_LENGTH: "Longer than maxLength.",
        Reason.PATTERN: "Does not match the pattern.",
        Reason.CONTENT_ENCODING: "Not in the declared contentEncoding.",
        Reason.CONTENT_MEDIA_TYPE: "Not of the declared contentMediaType.",
        Reason.MINIMUM: "Below minimum.",
        Reason.MAXIMUM: "Above maximum.",
        Reason.EXCLUSIVE_MINIMUM: "At or below exclusiveMinimum.",
        Reason.EXCLUSIVE_MAXIMUM: "At or above exclusiveMaximum.",
        Reason.MULTIPLE_OF: "Not a multiple of multipleOf.",
        Reason.MIN_ITEMS: "Fewer items than minItems.",
        Reason.MAX_ITEMS: "More items than maxItems.",
        Reason.UNIQUE_ITEMS: "Two items are equal where uniqueItems forbids it.",
        Reason.UNEXPECTED_ITEM: "An item beyond those the schema allows.",
        Reason.CONTAINS: "No item (or too few, or too many) matches contains.",
        Reason.ANY_OF: "Matches none of anyOf's alternatives.",
        Reason.ONE_OF: "Matches none, or more than one, of oneOf's alternatives.",
        Reason.NOT: "Matches the schema under not.",
        Reason.CONSTRAINT: "Some other rule of the schema (one this catalogue does not name).",
    }
)
"""What each reason means, in one line."""

PARSE_REASONS: Final = frozenset(
    {
        Reason.TOO_LARGE,
        Reason.NOT_TEXT,
        Reason.SYNTAX,
        Reason.INVALID_UTF8,
        Reason.LONE_SURROGATE,
        Reason.DUPLICATE_MEMBER,
        Reason.TOO_DEEP,
        Reason.NUMBER_OUT_OF_RANGE,
    }
)
"""The reasons of parse errors; every other reason is a shape error's."""

RETRY_AFTER_MS: Final = 250
"""The retry hint (`retry_after_ms`) of the retryable refusals strictcall makes itself, but
`at_capacity`'s: there it is the tool's time limit, by when a worker thread is likely free."""


MAX_CALL_ID_LENGTH: Final = 256
"""The longest call id (a JSON-RPC request's str id, in characters) the transports take: a
longer one is refused at intake as invalid_request (reason max_length, `expected` and `limit`
this limit, pointer /id), answered with id null and never stored (an operator's audit would
print it)."""


@dataclass(frozen=True, slots=True)
class ErrorKind:
    """A stable (code, stage, retryable) triple and what the agent should do about it."""

    code: str
    stage: Stage
    retryable: bool
    advice: str
    _stage_name: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # the plain str, once: an enum's .value is a slow property on the error path
        object.__setattr__(self, "_stage_name", self.stage.value)

    def as_error(self) -> dict[str, JSONValue]:
        """The structured error {code, stage, retryable}, as a fresh dict."""
        return {"code": self.code, "stage": self._stage_name, "retryable": self.retryable}


_NO_DETAILS: Final[MappingProxyType[str, JSONValue]] = MappingProxyType({})


@final
@dataclass(frozen=True, slots=True)
class Rejection:
    """One call's failure: its kind and the details that locate it."""

    kind: ErrorKind
    details: MappingProxyType[str, JSONValue] = field(default_factory=lambda: _NO_DETAILS)
    _error: dict[str, JSONValue] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Built once; each answer gets a copy of it, made in C.
        object.__setattr__(self, "_error", {**self.kind.as_error(), **self.details.copy()})

    def as_error(self, *, located: bool = True) -> dict[str, JSONValue]:
        """The structured error, with the locating details unless `located` is false, as a
        fresh dict."""
        return self._error.copy() if located else self.kind.as_error()


class StrictcallError(Exception):
    """The base of every exception strictcall raises on purpose.

    StrictcallError
    ├── JSONTextError (also ValueError)        strict intake refused a text (jsontext)
    ├── SchemaDefinitionError (also ValueError) a tool's schema is not JSON Schema 2020-12
    ├── MissingExtra (also ImportError)         an optional part is used but not installed
    ├── ToolSignal                              raised by a tool's handler to the pipeline
    │   ├── ForbiddenOrMissing                  answered forbidden_or_missing (resource)
    │   ├── ToolFailure                         a declared failure: its code (execute)
    │   └── WouldWait                           an inline_first handler must not wait
    ├── ClientGone                              an HTTP client left mid-request (http)
    ├── CallCancelled                           an MCP host cancelled its call (mcp)
    ├── NotAsked                                an upstream's request not held for its caller
    ├── UpstreamFailed                          a proxy's upstream did not start (proxy)
    ├── PipeClosed                              a proxy's stdio upstream stopped answering
    ├── UnreadableAnswer                        a proxy's upstream answered no JSON-RPC response
    ├── HttpCallFailed                          ... an HTTP upstream's call got none (its status)
    ├── AnswerTooLarge                          ... or one longer than the proxy's cap
    ├── TooManySubscriptions                    a proxy's session holds its most subscriptions
    ├── PolicyError (also ValueError)           a proxy's allow-list file is malformed
    ├── UpstreamAuthFailed                      a proxy got no token for its upstream
    ├── PolicyFileError (also ValueError)       a policy file is not valid (its line, the reason)
    ├── ConfigError (also ValueError)           a federation's config file is malformed
    ├── FederationFailed                        a federation cannot start (a name collision)
    ├── SandboxUnavailable (also OSError)       an upstream's named sandbox cannot run here
    ├── QuotaStoreDown                          the shared quota state cannot be reached (quota)
    ├── StoreError                              raised by a store (storage.base)
    │   ├── StoreUnavailable                    the database cannot serve now (retryable)
    │   │   ├── SchemaTooNew                    ... its schema is newer than this code
    │   │   └── StoreUnreachable                ... it cannot be reached (psql's reason)
    │   ├── StoreBusy                           a write asked not to wait would have had to
    │   ├── StoreRefused                        the database refused a value of the call itself
    │   └── IdempotencyConflict                 a call id reused for another write
    ├── PoolFull                                no PostgreSQL connection came free in time
    ├── NoValue                                 a PostgreSQL NULL where the schema holds none
    ├── ListenError                             a server cannot listen there (listen)
    ├── ProviderUnavailable                     the identity provider did not answer (identity)
    └── ClientError                             raised by the client (client)
        ├── ToolError                           the server answered with a JSON-RPC error
        │   └── UncorrelatedError               ... with id null (parse, protocol, auth)
        └── ProtocolError                       the reply is not valid JSON-RPC 2.0

    Catching `StrictcallError` catches all of them; nothing else that strictcall raises is a
    subclass (a programmer's error, such as a bad `call_id`, is a plain TypeError/ValueError).
    """


class PolicyFileError(StrictcallError, ValueError):
    """A policy file is not valid: `line` (from 1; 0 when the whole file) and `reason`."""

    def __init__(self, line: int, reason: str) -> None:
        super().__init__(f"line {line}: {reason}" if line > 0 else reason)
        self.line = line
        self.reason = reason


class MissingExtra(StrictcallError, ImportError):
    """A part of strictcall that needs an optional extra was used without it installed."""

    def __init__(self, extra: str, module: str) -> None:
        super().__init__(
            f"this needs strictcall[{extra}] ({module} is not installed):"
            f" pip install 'strictcall[{extra}]'"
        )
        self.extra = extra


def require_extra(extra: str, module: str) -> None:
    """Import `module` or raise `MissingExtra` naming the extra that provides it.

    Raises:
        MissingExtra: `module` cannot be imported.
    """
    import importlib.util

    if importlib.util.find_spec(module) is None:
        raise MissingExtra(extra, module)


# --- parse -------------------------------------------------------------------------------------

INVALID_JSON: Final = ErrorKind(
    "invalid_json", Stage.PARSE, False, "Send the call again as one strict JSON object."
)
"""The call is not strict JSON text: bad syntax, a duplicate member name or too deep nesting."""

REQUEST_TOO_LARGE: Final = ErrorKind(
    "request_too_large", Stage.PARSE, False, "Send a smaller call; split the work if needed."
)
"""The call's text is longer than the configured limit and was not parsed."""

# --- route -------------------------------------------------------------------------------------

UNKNOWN_TOOL: Final = ErrorKind(
    "unknown_tool", Stage.ROUTE, False, "Call one of the listed tools by its exact name."
)
"""The call is not an object naming a registered tool."""

UNKNOWN_ROUND: Final = ErrorKind(
    "unknown_request_state",
    Stage.ROUTE,
    False,
    "Call the tool again without requestState; the round it names is over or not yours.",
)
"""A 2026-07-28 tools/call names a requestState of no round held for its caller (any reason)."""

UNKNOWN_METHOD: Final = ErrorKind(
    "unknown_method", Stage.ROUTE, False, "Use the JSON-RPC method tools/call or tools/list."
)
"""The JSON-RPC request names a method the server does not have."""

# --- shape -------------------------------------------------------------------------------------

ARGUMENTS_TOO_LARGE: Final = ErrorKind(
    "arguments_too_large",
    Stage.SHAPE,
    False,
    "Send smaller arguments; the policy caps this tool's arguments at `limit` bytes.",
)
"""The call's arguments, as JSON, are longer than the policy's limit for this tool (`limit`)."""

INVALID_ARGUMENTS: Final = ErrorKind(
    "invalid_arguments",
    Stage.SHAPE,
    False,
    "Fix the member at `pointer` as `reason` and `expected` say, then call again.",
)
"""The call's arguments do not match the tool's input schema."""

# --- resource ----------------------------------------------------------------------------------

FORBIDDEN_OR_MISSING: Final = ErrorKind(
    "forbidden_or_missing",
    Stage.RESOURCE,
    False,
    "Do not retry; use an id the caller owns (list them first).",
)
"""The resource does not exist or is not the caller's; the two are never told apart."""

# --- execute -----------------------------------------------------------------------------------

INTERNAL_ERROR: Final = ErrorKind(
    "internal_error", Stage.EXECUTE, False, "Do not retry the same call; report the call id."
)
"""The tool failed in a way it did not declare; details went to the operator's log only."""

TIMEOUT: Final = ErrorKind(
    "timeout", Stage.EXECUTE, True, "Retry later; the tool took longer than its time limit."
)
"""The tool did not finish within its time limit."""

BUSY: Final = ErrorKind("busy", Stage.EXECUTE, True, "Retry after `retry_after_ms` milliseconds.")
"""The tool declared itself temporarily unable to serve the call."""

AT_CAPACITY: Final = ErrorKind(
    "at_capacity",
    Stage.EXECUTE,
    True,
    "Retry after `retry_after_ms`; the call never started: no worker was free in time.",
)
"""The call never started: no worker thread was free within its time limit, or too many hung."""

STORE_UNAVAILABLE: Final = ErrorKind(
    "store_unavailable",
    Stage.EXECUTE,
    True,
    "Retry the same call (same call id) after `retry_after_ms`; nothing was changed.",
)
"""The notes store could not serve the call (locked, read-only, full or missing)."""

TOOL_ERROR: Final = ErrorKind(
    "tool_error",
    Stage.EXECUTE,
    False,
    "Do not retry the same call; the tool reported a failure (its text withheld by default).",
)
"""A proxied MCP tool answered isError; its text withheld unless passed (`--pass-errors`)."""

UPSTREAM_UNAVAILABLE: Final = ErrorKind(
    "upstream_unavailable",
    Stage.EXECUTE,
    True,
    "Retry after `retry_after_ms`; the upstream MCP server is being restarted.",
)
"""The proxied MCP server crashed, hung or is not running; strictcall restarts it."""

TOOL_CHANGED: Final = ErrorKind(
    "tool_changed",
    Stage.EXECUTE,
    False,
    "Do not retry; the upstream changed this tool since it was pinned: an operator must approve.",
)
"""A pinned upstream tool's name, description or schemas changed; not served until approved."""

IDEMPOTENCY_CONFLICT: Final = ErrorKind(
    "idempotency_conflict",
    Stage.EXECUTE,
    False,
    "Use a new call id for a new write; a call id names one write only.",
)
"""The call id was already used by this caller for a different write."""

VALUE_REFUSED: Final = ErrorKind(
    "value_refused",
    Stage.EXECUTE,
    False,
    "Do not retry the same call; the store refused one of its values as too long or unstorable.",
)
"""The store refused a value of the call itself (longer than its index allows): no fault."""

RATE_LIMITED: Final = ErrorKind(
    "rate_limited",
    Stage.EXECUTE,
    True,
    "Retry after `retry_after_ms`; the call never started: a quota of the policy is used up.",
)
"""A quota (`rule`) has no token left; the call never ran (`retry_after_ms` from its bucket)."""

QUOTA_UNAVAILABLE: Final = ErrorKind(
    "quota_unavailable",
    Stage.EXECUTE,
    True,
    "Retry after `retry_after_ms`; the call never started: the shared quota state is down.",
)
"""A quota shared across servers could not be read and its rule fails closed; it never ran."""

# --- output ------------------------------------------------------------------------------------

RESULT_TOO_LARGE: Final = ErrorKind(
    "result_too_large",
    Stage.OUTPUT,
    False,
    "Ask for less (a page, a filter); the result is larger than `limit` bytes and was withheld.",
)
"""The tool's result is larger than its `limit` in bytes (reply, proxy or policy); withheld."""

REPLY_TOO_LARGE: Final = ErrorKind(
    "reply_too_large",
    Stage.OUTPUT,
    False,
    "The call ran; send it alone or in a smaller batch: the batch's reply passed `limit` bytes.",
)
"""The batch's reply would pass its limit (`limit`, bytes): this call's result was withheld."""

INVALID_TOOL_RESULT: Final = ErrorKind(
    "invalid_tool_result",
    Stage.OUTPUT,
    False,
    "Do not retry; the tool's answer broke its own contract and was withheld.",
)
"""The tool's result does not match its output schema; the bad value was withheld."""


# --- transports: auth and protocol -------------------------------------------------------------

UNAUTHENTICATED: Final = ErrorKind(
    "unauthenticated", Stage.AUTH, False, "Send a valid token as `Authorization: Bearer <token>`."
)
"""The request carried no token, or a token the server does not know."""

FORBIDDEN_ORIGIN: Final = ErrorKind(
    "forbidden_origin",
    Stage.AUTH,
    False,
    "Call from an allowed origin; a browser page on another site may not call this server.",
)
"""The request came from a browser origin the server does not admit (DNS rebinding guard)."""

AUTH_UNAVAILABLE: Final = ErrorKind(
    "auth_unavailable",
    Stage.AUTH,
    True,
    "Retry after `retry_after_ms`; the identity provider cannot answer now.",
)
"""The token could not be checked: the identity provider did not answer as it should."""

TOKEN_STORE_UNAVAILABLE: Final = ErrorKind(
    "token_store_unavailable",
    Stage.AUTH,
    True,
    "Retry after `retry_after_ms`; the store that holds the tokens cannot answer now.",
)
"""The token could not be checked: the token store (strictcall's own tokens) did not answer."""

AUTH_THROTTLED: Final = ErrorKind(
    "auth_throttled",
    Stage.AUTH,
    True,
    "Retry after `retry_after_ms` with a valid token; this client address sent too many"
    " requests without one.",
)
"""The client address used up its budget of requests without a valid token (HTTP 429)."""

INSUFFICIENT_SCOPE: Final = ErrorKind(
    "insufficient_scope",
    Stage.AUTH,
    False,
    "Get a token with the scopes in `scope` (and the challenge), then call again.",
)
"""The token is valid but lacks a scope the call needs (HTTP 403, the scope in the challenge)."""

INVALID_REQUEST: Final = ErrorKind(
    "invalid_request",
    Stage.PROTOCOL,
    False,
    'Send a JSON-RPC 2.0 request: jsonrpc "2.0", a str or int id, a str method.',
)
"""The message is not a JSON-RPC 2.0 request (or the batch is empty)."""


CATALOGUE: Final[tuple[ErrorKind, ...]] = (
    INVALID_JSON,
    REQUEST_TOO_LARGE,
    UNKNOWN_TOOL,
    UNKNOWN_ROUND,
    UNKNOWN_METHOD,
    INVALID_ARGUMENTS,
    ARGUMENTS_TOO_LARGE,
    FORBIDDEN_OR_MISSING,
    INTERNAL_ERROR,
    TIMEOUT,
    BUSY,
    AT_CAPACITY,
    STORE_UNAVAILABLE,
    IDEMPOTENCY_CONFLICT,
    VALUE_REFUSED,
    TOOL_ERROR,
    UPSTREAM_UNAVAILABLE,
    TOOL_CHANGED,
    RATE_LIMITED,
    QUOTA_UNAVAILABLE,
    INVALID_TOOL_RESULT,
    RESULT_TOO_LARGE,
    REPLY_TOO_LARGE,
    UNAUTHENTICATED,
    FORBIDDEN_ORIGIN,
    AUTH_UNAVAILABLE,
    TOKEN_STORE_UNAVAILABLE,
    AUTH_THROTTLED,
    INSUFFICIENT_SCOPE,
    INVALID_REQUEST,
)
"""Every kind the project can emit, in stage order."""

STORE_DOWN_CODES: Final = frozenset({STORE_UNAVAILABLE.code, TOKEN_STORE_UNAVAILABLE.code})
"""The codes of calls refused because the store could not serve (what operations count as an
outage's refused calls; an identity provider's fault, `auth_unavailable`, is not one)."""
