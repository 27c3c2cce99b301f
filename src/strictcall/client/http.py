"""A strict client for the JSON-RPC service, on httpx.

Every reply is read through `interpret_tool_reply`, so a result of 0, false, "", [], {} or null
is the success it is. Ids are made here (unique across clients, which matters because writes
are idempotent per call id) and batch replies are matched by id, never by position. An error
reply with id null (a parse error, an invalid request, a refused token) is raised or returned
as `UncorrelatedError`, never dropped.

    with Client("http://127.0.0.1:8765", token) as client:   # or ".../rpc", the same endpoint
        client.call("count_notes")        # -> 0 when there are none
        client.call("read_note", {"note_id": "n..."})
"""

from __future__ import annotations

import itertools
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Final, Literal

import orjson

from strictcall.errors import JSONValue, MissingExtra, StrictcallError

try:
    import httpx
except ImportError:  # pragma: no cover - exercised in a venv without the extra
    raise MissingExtra("client", "httpx") from None

from strictcall.client.reply import interpret_tool_reply
from strictcall.core.ids import check_request_id
from strictcall.core.jsontext import JSONTextError, loads_strict

Status = Literal["ok", "error", "invalid", "missing"]

DEFAULT_TIMEOUT_S: Final = 10.0
_UNCORRELATED: Final = "uncorrelated"


class ClientError(StrictcallError):
    """The client could not get a tool's value; the subclasses say why."""


class ToolError(ClientError):
    """The server answered the call with a JSON-RPC error; `error` is that error object."""

    def __init__(self, error: dict[str, JSONValue]) -> None:
        super().__init__(_describe(error))
        self.error = error

    @property
    def data(self) -> dict[str, JSONValue] | None:
        """The structured error {code, stage, retryable, ...}, when the server sent one."""
        data = self.error.get("data")
        return data if isinstance(data, dict) else None

    @property
    def code(self) -> str | None:
        """The structured error's code, e.g. "forbidden_or_missing"."""
        data = self.data
        return data.get("code") if data is not None else None

    @property
    def stage(self) -> str | None:
        """The structured error's stage, e.g. "resource"."""
        data = self.data
        return data.get("stage") if data is not None else None

    @property
    def retryable(self) -> bool:
        """Whether the same call may succeed if sent again (False when unknown)."""
        data = self.data
        return data is not None and data.get("retryable") is True


class UncorrelatedError(ToolError):
    """An error reply with id null: the server could not tell which request it answers."""


class ProtocolError(ClientError):
    """The server's answer is not a valid JSON-RPC 2.0 reply to what was sent."""


def _describe(error: dict[str, JSONValue]) -> str:
    data = error.get("data")
    if isinstance(data, dict) and "code" in data and "stage" in data:
        return f"{data['code']} at stage {data['stage']}"
    return f"JSON-RPC error {error.get('code')}"


@dataclass(frozen=True, slots=True)
class Outcome:
    """How one call of a batch ended: "ok" with a value, "error", "invalid" or "missing"."""

    request_id: str
    status: Status
    value: JSONValue = None
    error: dict[str, JSONValue] | None = None

    def unwrap(self) -> JSONValue:
        """The value of an ok outcome.

        Raises:
            ToolError: the call was answered with an error.
            ProtocolError: the call's reply was invalid or missing.
        """
        if self.status == "ok":
            return self.value
        if self.status == "error" and self.error is not None:
            raise ToolError(self.error)
        raise ProtocolError(f"reply {self.status} for request {self.request_id}")


@dataclass(frozen=True, slots=True)
class Batch:
    """A batch's outcomes, in the order the calls were given, and any id-null errors."""

    outcomes: list[Outcome]
    uncorrelated: list[UncorrelatedError] = field(default_factory=list)


class Client:
    """Calls the service's tools over HTTP with a bearer token, at `base_url` + "/rpc" (a
    `base_url` that already ends in /rpc, as the curl lines show it, is that endpoint)."""

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        timeout: float = DEFAULT_TIMEOUT_S,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        trimmed = base_url.rstrip("/")
        self.endpoint: Final = trimmed if trimmed.endswith("/rpc") else trimmed + "/rpc"
        """The URL every request is posted to: the server's JSON-RPC endpoint."""
        self._http = httpx.Client(
            timeout=timeout,
            transport=transport,
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        )
        self._prefix = secrets.token_hex(6)
        self._counter = itertools.count(1)

    def new_id(self) -> str:
        """A request id unique to this client (and, by its random prefix, across clients)."""
        return f"{self._prefix}-{next(self._counter)}"

    def call(
        self,
        name: str,
        arguments: dict[str, JSONValue] | None = None,
        *,
        call_id: str | int | None = None,
    ) -> JSONValue:
        """Call one tool and return its value, whatever it is (0, [], None included).

        `call_id` names the call for idempotent retries of writes; by default a fresh id.

        Raises:
            ToolError: the server answered with an error (`UncorrelatedError` for id null).
            ProtocolError: the answer is not a valid reply to this call.
            httpx.HTTPError: the request could not be sent or answered.
        """
        request_id = self.new_id() if call_id is None else call_id
        check_request_id(request_id)
        reply = self._post(_request(request_id, name, arguments))
        uncorrelated = _uncorrelated(reply)
        if uncorrelated is not None:
            raise uncorrelated
        read = interpret_tool_reply(reply, request_id)
        if read["status"] == "ok":
            return read["value"]
        if read["status"] == "error":
            raise ToolError(read["error"])
        raise ProtocolError(self._unexpected(f"no valid reply to request {request_id!r}"))

    def call_many(self, calls: Sequence[tuple[str, dict[str, JSONValue] | None]]) -> Batch:
        """Call several tools in one JSON-RPC batch; outcomes come back in the calls' order,
        matched to replies by id.

        Raises:
            ValueError: no calls were given (an empty batch is invalid JSON-RPC).
            ProtocolError: the answer is neither a batch reply nor an id-null error.
            httpx.HTTPError: the request could not be sent or answered.
        """
        if not calls:
            raise ValueError("a batch holds at least one call")
        ids = [self.new_id() for _ in calls]
        reply = self._post(
            [_request(i, name, args) for i, (name, args) in zip(ids, calls, strict=True)]
        )
        if isinstance(reply, dict):
            uncorrelated = _uncorrelated(reply)
            if uncorrelated is None:
                raise ProtocolError("a batch was answered with a single reply")
            return Batch([Outcome(i, "missing") for i in ids], [uncorrelated])
        if not isinstance(reply, list):
            raise ProtocolError("a batch was answered with neither an array nor an object")
        return _match(ids, reply)

    def notify(self, name: str, arguments: dict[str, JSONValue] | None = None) -> None:
        """Send a call as a notification: the server runs it and answers nothing.

        Raises:
            ProtocolError: the server answered with a body.
            httpx.HTTPError: the request could not be sent.
        """
        body = {"jsonrpc": "2.0", "method": "tools/call", "params": _params(name, arguments)}
        response = self._http.post(self.endpoint, content=orjson.dumps(body))
        if response.content:
            raise ProtocolError("a notification was answered")

    def list_tools(self) -> list[dict[str, JSONValue]]:
        """The server's tools as MCP tool definitions.

        Raises:
            ToolError, ProtocolError, httpx.HTTPError: as for `call`.
        """
        request_id = self.new_id()
        reply = self._post({"jsonrpc": "2.0", "id": request_id, "method": "tools/list"})
        uncorrelated = _uncorrelated(reply)
        if uncorrelated is not None:
            raise uncorrelated
        read = interpret_tool_reply(reply, request_id)
        if read["status"] == "error":
            raise ToolError(read["error"])
        value = read.get("value")
        if read["status"] != "ok" or not isinstance(value, dict):
            raise ProtocolError("invalid reply to tools/list")
        tools = value.get("tools")
        if not isinstance(tools, list):
            raise ProtocolError("invalid reply to tools/list")
        return tools

    def _post(self, body: JSONValue) -> JSONValue:
        response = self._http.post(self.endpoint, content=orjson.dumps(body))
        try:
            reply = loads_strict(response.content)
        except JSONTextError:
            reply = None
        if not _looks_like_jsonrpc(reply):
            raise ProtocolError(
                self._unexpected(f"HTTP {response.status_code} with no JSON-RPC 2.0 reply")
            )
        return reply

    def _unexpected(self, what: str) -> str:
        """A ProtocolError's message: what came back from which URL, and what was expected."""
        return (
            f"{_shown_url(self.endpoint)} answered {what}; expected strictcall's JSON-RPC"
            " endpoint (give Client the server's URL, e.g. http://127.0.0.1:8765, or its /rpc)"
        )

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _looks_like_jsonrpc(reply: JSONValue) -> bool:
    """Whether `reply` is a JSON-RPC 2.0 reply or a batch of them, by its envelope alone (the
    reader then checks it strictly): anything else came from another endpoint."""
    replies = reply if isinstance(reply, list) else [reply]
    return bool(replies) and all(
        isinstance(one, dict) and one.get("jsonrpc") == "2.0" and "id" in one for one in replies
    )


def _shown_url(url: str) -> str:
    """`url` as it may be shown: a user name and password in it as ***."""
    scheme, slashes, rest = url.partition("://")
    host, at, path = rest.partition("/")
    if "@" in host:
        host = "***@" + host.rpartition("@")[2]
    return f"{scheme}{slashes}{host}{at}{path}"


def _params(name: str, arguments: dict[str, JSONValue] | None) -> dict[str, JSONValue]:
    return {"name": name, "arguments": {} if arguments is None else arguments}


def _request(
    request_id: str | int, name: str, arguments: dict[str, JSONValue] | None
) -> dict[str, JSONValue]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": _params(name, arguments),
    }


def _uncorrelated(reply: JSONValue) -> UncorrelatedError | None:
    """An id-null error reply, read as strictly as any other, else None."""
    if not isinstance(reply, dict) or "id" not in reply or reply["id"] is not None:
        return None
    read = interpret_tool_reply({**reply, "id": _UNCORRELATED}, _UNCORRELATED)
    if read["status"] != "error":
        raise ProtocolError("a reply with id null that is not a valid error")
    return UncorrelatedError(read["error"])


def _match(ids: list[str], replies: list[JSONValue]) -> Batch:
    by_id: dict[str, JSONValue] = {}
    seen_twice: set[str] = set()
    uncorrelated: list[UncorrelatedError] = []
    pending = set(ids)
    for reply in replies:
        error = _uncorrelated(reply)
        if error is not None:
            uncorrelated.append(error)
            continue
        reply_id = reply.get("id") if isinstance(reply, dict) else None
        if type(reply_id) is not str or reply_id not in pending:
            raise ProtocolError("a batch reply answers no request of the batch")
        if reply_id in by_id:
            seen_twice.add(reply_id)
        by_id[reply_id] = reply
    outcomes = []
    for request_id in ids:
        if request_id in seen_twice:
            outcomes.append(Outcome(request_id, "invalid"))
        elif request_id not in by_id:
            outcomes.append(Outcome(request_id, "missing"))
        else:
            read = interpret_tool_reply(by_id[request_id], request_id)
            if read["status"] == "ok":
                outcomes.append(Outcome(request_id, "ok", value=read["value"]))
            elif read["status"] == "error":
                outcomes.append(Outcome(request_id, "error", error=read["error"]))
            else:
                outcomes.append(Outcome(request_id, "invalid"))
    return Batch(outcomes, uncorrelated)
