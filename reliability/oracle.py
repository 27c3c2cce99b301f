"""The invariants every fuzz input is checked against, as functions that list what is wrong.

- A gateway or handle() answer is {"ok": true, "call_id", "result"} or {"ok": false, "call_id",
  "error": {"code", "stage", "retryable", ...}}, the call id echoed with its type, the code one
  of the catalogue's with that kind's stage and retryable flag.
- A notes tool never fails in a way it did not declare: internal_error and invalid_tool_result
  are bugs here.
- JSON-RPC over HTTP: a reply (or a batch of replies) per the spec's sections 5 and 6, the ids
  answered being exactly the ids the body's requests carry (worked out independently here from
  the request text), 204 with no body when nothing is to be answered, never a 5xx; every body
  valid UTF-8 and strict JSON.
- MCP on stdio: one answer per line, none for a notification or a response, the id echoed.
- No answer holds another owner's note text or note id; the answer to a call naming another
  owner's note is byte-identical to the answer to the same call naming a missing note.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, overload

from strictcall.core.jsontext import JSONTextError, loads_strict
from strictcall.errors import CATALOGUE, INTERNAL_ERROR, INVALID_TOOL_RESULT, Stage
from strictcall.transports.jsonrpc import ERROR_CODES

KINDS: Final = {kind.code: kind for kind in CATALOGUE}
BUG_CODES: Final = frozenset({INTERNAL_ERROR.code, INVALID_TOOL_RESULT.code})
REQUEST_MEMBERS: Final = frozenset({"jsonrpc", "id", "method", "params"})
RESPONSE_MEMBERS: Final = frozenset({"jsonrpc", "id", "result", "error"})

RequestId = str | int | None


@dataclass(frozen=True)
class Secrets:
    """Another owner's notes, which no answer to the fuzzing identities may reveal.

    `twin_of` maps each of that owner's note ids to a missing id of the same length, used to
    build the twin of an input: the same bytes naming a missing note instead.
    """

    texts: tuple[str, ...]
    ids: tuple[str, ...]
    twin_of: Mapping[str, str] = field(default_factory=dict)

    def named_in(self, data: bytes | str) -> bool:
        """Whether `data` names one of the owner's note ids (as written, unescaped)."""
        if isinstance(data, str):
            return any(note_id in data for note_id in self.ids)
        return any(note_id.encode() in data for note_id in self.ids)

    @overload
    def twin(self, data: bytes) -> bytes: ...
    @overload
    def twin(self, data: str) -> str: ...
    def twin(self, data: bytes | str) -> bytes | str:
        """`data` with each of the owner's note ids replaced by its missing twin."""
        for note_id, missing in self.twin_of.items():
            if isinstance(data, str):
                data = data.replace(note_id, missing)
            else:
                data = data.replace(note_id.encode(), missing.encode())
        return data

    def untwin(self, data: bytes) -> bytes:
        """An answer to a twin with the missing ids put back, for a byte comparison."""
        for note_id, missing in self.twin_of.items():
            data = data.replace(missing.encode(), note_id.encode())
        return data


# --- structured errors and answers -------------------------------------------------------------


def error_problems(error: Any, *, exact: bool = False) -> list[str]:
    """What is wrong with a structured error {code, stage, retryable, ...}."""
    if type(error) is not dict:
        return ["error is not an object"]
    code = error.get("code")
    kind = KINDS.get(code) if type(code) is str else None
    if kind is None:
        return [f"error code not in the catalogue: {error.get('code')!r}"]
    problems = []
    if error.get("stage") != kind.stage.value:
        problems.append(f"{kind.code}: stage {error.get('stage')!r}")
    if error.get("retryable") is not kind.retryable:
        problems.append(f"{kind.code}: retryable {error.get('retryable')!r}")
    if exact and set(error) != {"code", "stage", "retryable"}:
        problems.append(f"{kind.code}: members {sorted(error)}")
    if kind.code in BUG_CODES:
        problems.append(f"{kind.code}: a notes tool failed in a way it did not declare")
    return problems


def same_id(a: Any, b: Any) -> bool:
    """Ids compare by JSON type: 7 is not "7", True is not 1."""
    return type(a) is type(b) and a == b


def answer_problems(answer: Any, call_id: str | int, *, exact: bool = False) -> list[str]:
    """What is wrong with a gateway (or, `exact`, a seed handle()) answer."""
    if type(answer) is not dict:
        return [f"answer is a {type(answer).__name__}"]
    problems = []
    if not same_id(answer.get("call_id"), call_id):
        problems.append("call_id not echoed")
    ok = answer.get("ok")
    if ok is True:
        if set(answer) != {"ok", "call_id", "result"}:
            problems.append(f"ok answer members {sorted(answer)}")
    elif ok is False:
        if set(answer) != {"ok", "call_id", "error"}:
            problems.append(f"error answer members {sorted(answer)}")
        problems += error_problems(answer.get("error"), exact=exact)
    else:
        problems.append(f"ok is {ok!r}")
    return problems


def outcome_of(answer: Any) -> str:
    """A gateway answer's outcome for the tally: "ok" or its error code."""
    if type(answer) is dict and answer.get("ok") is True:
        return "ok"
    if type(answer) is dict and type(answer.get("error")) is dict:
        return str(answer["error"].get("code"))
    return "?"


# --- leaks -------------------------------------------------------------------------------------


def strings_in(value: Any) -> Iterator[str]:
    """Every string in a JSON value, member names included."""
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, str):
            yield node
        elif isinstance(node, list):
            stack.extend(node)
        elif isinstance(node, dict):
            stack.extend(node.keys())
            stack.extend(node.values())


def leak_problems(wire: bytes, value: Any, secrets: Secrets) -> list[str]:
    """Another owner's note text or id in an answer (as bytes, or in any string of its value,
    which catches escaped forms)."""
    problems = []
    strings = list(strings_in(value))
    for text in secrets.texts:
        if text.encode() in wire or any(text in s for s in strings):
            problems.append("leak: another owner's note text in an answer")
            break
    for note_id in secrets.ids:
        if note_id.encode() in wire or any(note_id in s for s in strings):
            problems.append("leak: another owner's note id in an answer")
            break
    return problems


def wire_problems(body: bytes) -> tuple[Any, list[str]]:
    """Parse bytes from the wire strictly: (value, problems)."""
    try:
        body.decode("utf-8", "strict")
    except UnicodeDecodeError:
        return None, ["wire: not valid UTF-8"]
    try:
        return loads_strict(body, max_size=1 << 30, max_depth=200), []
    except JSONTextError as exc:
        return None, [f"wire: not strict JSON ({exc.fault.value})"]


# --- JSON-RPC ----------------------------------------------------------------------------------


def _valid_id(message: dict[str, Any]) -> RequestId:
    """strictcall's documented id policy: a non-empty str, or an int that fits 64 bits."""
    request_id = message.get("id")
    if type(request_id) is str:
        return request_id if request_id else None
    if type(request_id) is int and -(2**63) <= request_id < 2**63:
        return request_id
    return None


def is_request_shape(message: Any) -> bool:
    """A JSON-RPC 2.0 request or notification as strictcall accepts them: jsonrpc "2.0", a str
    method, a str or int id if any, object params if any, nothing else."""
    if type(message) is not dict or not REQUEST_MEMBERS.issuperset(message):
        return False
    if message.get("jsonrpc") != "2.0" or type(message.get("method")) is not str:
        return False
    if "id" in message and _valid_id(message) is None:
        return False
    return not ("params" in message and type(message["params"]) is not dict)


def expected_reply_ids(message: Any) -> list[RequestId]:
    """The ids of the replies one parsed JSON-RPC message must get: [] for a notification."""
    if not is_request_shape(message):
        return [_valid_id(message) if type(message) is dict else None]
    return [message["id"]] if "id" in message else []


def expected_body_ids(body: bytes) -> tuple[list[RequestId], bool]:
    """The reply ids a POST /rpc body must get, and whether they come as a batch."""
    try:
        message = loads_strict(body)
    except JSONTextError:
        return [None], False
    if type(message) is list:
        if not message:
            return [None], False
        ids: list[RequestId] = []
        for item in message:
            ids += expected_reply_ids(item)
        return ids, True
    return expected_reply_ids(message), False


def reply_problems(reply: Any) -> list[str]:
    """What is wrong with one JSON-RPC reply from strictcall's /rpc."""
    if type(reply) is not dict:
        return ["reply is not an object"]
    if reply.get("jsonrpc") != "2.0":
        return ["reply: jsonrpc is not 2.0"]
    request_id = reply.get("id", ...)
    if not (request_id is None or type(request_id) is str or type(request_id) is int):
        return [f"reply: id {request_id!r}"]
    if set(reply) == {"jsonrpc", "id", "result"}:
        return []
    if set(reply) != {"jsonrpc", "id", "error"}:
        return [f"reply members {sorted(reply)}"]
    error = reply["error"]
    if type(error) is not dict or set(error) != {"code", "message", "data"}:
        return ["reply: error is not {code, message, data}"]
    problems = error_problems(error["data"])
    data = error["data"]
    stages = {stage.value for stage in Stage}
    if (
        type(data) is dict
        and data.get("stage") in stages
        and error["code"] != ERROR_CODES[Stage(data["stage"])][0]
    ):
        problems.append(f"reply: JSON-RPC code {error['code']} for stage {data['stage']}")
    return problems


def id_key(request_id: Any) -> tuple[str, Any]:
    return (type(request_id).__name__, request_id)


def rpc_body_problems(
    request: bytes, status: int, content: bytes, *, batch_expected: bool | None = None
) -> tuple[list[Any], list[str]]:
    """What is wrong with the answer to POST /rpc with a valid token: (replies, problems)."""
    expected, batch = expected_body_ids(request)
    if batch_expected is not None:
        batch = batch_expected
    if status >= 500:
        return [], [f"HTTP {status}"]
    if not expected:
        if status != 204 or content:
            return [], [f"nothing to answer, got HTTP {status} with {len(content)} bytes"]
        return [], []
    if status != 200:
        return [], [f"HTTP {status}, expected 200"]
    value, problems = wire_problems(content)
    if problems:
        return [], problems
    if batch:
        if type(value) is not list or not value:
            return [], ["a batch not answered with a non-empty array"]
        replies = value
    else:
        if type(value) is not dict:
            return [], ["a single request not answered with one object"]
        replies = [value]
    for reply in replies:
        problems += reply_problems(reply)
    if not problems:
        got = Counter(id_key(reply.get("id")) for reply in replies)
        if got != Counter(id_key(request_id) for request_id in expected):
            problems.append("reply ids are not the request ids")
    return replies, problems


# --- MCP ---------------------------------------------------------------------------------------


def _is_response(message: dict[str, Any]) -> bool:
    if not RESPONSE_MEMBERS.issuperset(message) or message.get("jsonrpc") != "2.0":
        return False
    if ("result" in message) == ("error" in message) or "id" not in message:
        return False
    if "result" in message:
        return type(message["result"]) is dict and _valid_id(message) is not None
    error = message["error"]
    return (
        (message["id"] is None or _valid_id(message) is not None)
        and type(error) is dict
        and type(error.get("code")) is int
        and type(error.get("message")) is str
    )


@dataclass(frozen=True)
class McpExpectation:
    """How many answers a stdio line must get (0 or 1) and with which id."""

    answers: int
    request_id: RequestId = None


def mcp_expectation(line: bytes, sdk_accepts: Any) -> McpExpectation:
    """What a line on the MCP server's stdin must get; `sdk_accepts(message)` says whether the
    SDK's message model takes a message strictcall lets through."""
    if not line.strip(b" \t\r"):
        return McpExpectation(0)
    try:
        message = loads_strict(line)
    except JSONTextError:
        return McpExpectation(1, None)
    if type(message) is dict and "method" not in message and RESPONSE_MEMBERS & message.keys():
        if _is_response(message) and sdk_accepts(message):
            return McpExpectation(0)  # a response to nothing the server asked: dropped
        return McpExpectation(1, _valid_id(message))
    if not is_request_shape(message):
        return McpExpectation(1, _valid_id(message) if type(message) is dict else None)
    if not sdk_accepts(message):
        return McpExpectation(1, _valid_id(message))
    if "id" not in message:
        return McpExpectation(0)
    return McpExpectation(1, message["id"])


def _error_text(content: Any) -> Any:
    """The structured error in an MCP error result's one text block, or None."""
    if type(content) is not list or len(content) != 1 or type(content[0]) is not dict:
        return None
    text = content[0].get("text")
    if type(text) is not str:
        return None
    try:
        return loads_strict(text)
    except JSONTextError:
        return None


def mcp_reply_problems(reply: Any) -> list[str]:
    """What is wrong with one answer on the MCP server's stdout."""
    if type(reply) is not dict or reply.get("jsonrpc") != "2.0":
        return ["MCP answer is not a JSON-RPC 2.0 object"]
    if "result" in reply:
        result = reply["result"]
        if type(result) is dict and "isError" in result:
            if result["isError"] is True:
                if "structuredContent" in result:  # it would have to match the outputSchema
                    return ["MCP error result with structuredContent"]
                return error_problems(_error_text(result.get("content")))
            if type(result.get("content")) is not list or len(result["content"]) != 1:
                return ["MCP tool result without exactly one content block"]
        return []
    error = reply.get("error")
    if type(error) is not dict or type(error.get("code")) is not int:
        return ["MCP answer without result or a proper error"]
    data = error.get("data")
    if type(data) is dict and "stage" in data:
        return error_problems(data)
    return []


def first(items: Sequence[str], limit: int = 3) -> list[str]:
    """The first few distinct problems."""
    seen: list[str] = []
    for item in items:
        if item not in seen:
            seen.append(item)
        if len(seen) >= limit:
            break
    return seen
