"""The gateway: registered tools behind the staged pipeline, for any tool.

    gateway = Gateway([read_note, create_note])
    answer = gateway.call('{"name":"read_note","arguments":{"note_id":"n1"}}', "u1", "call-7")

An answer is {"ok": true, "call_id": ..., "result": value} or {"ok": false, "call_id": ...,
"error": {"code", "stage", "retryable", ...details}}; see `strictcall.errors` for every code.
The identity is the caller's, given by whoever calls the gateway (a transport's token, an
operator's flag): nothing in the call's text can change it.

The seam to the wires: a transport asks `settle` (or `settle_async`) once per call and gets one
`Outcome` back, the answer with what its audit record needs (the tool named, the scrubbed
pointer, the stage, the time taken; `strictcall.core.record.record_of` makes the record); and it
asks `listing` for tools/list, kept per identity and format until the tools change (the
registry, `strictcall.core.registry`, which a Gateway is).

With a policy (`strictcall.core.policy`), rung 2 routes on the caller's view of the tools (what
its tools/list shows), and each tool in it carries its grant, which adds three checks where the
policy sets them: the arguments' size (shape), the quotas (after resource, before the tool
runs: `rate_limited`), the result's size (output).

The ladder (rungs 2 to 6, `strictcall.core.pipeline`) is written once per form: `_ladder` (sync)
and `_ladder_async`. `call` writes the sync one out once more after its parse, for speed: every
in-process call takes it, and the frame it saves is measured in its docstring; a property test
(tests/test_gateway_forms.py) pins that every form answers every call alike.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable
from time import perf_counter_ns, time_ns
from types import TracebackType
from typing import TYPE_CHECKING, Final, Literal, NamedTuple, overload

if TYPE_CHECKING:
    from strictcall.core.threads import Workers

import orjson

from strictcall.core.content import Content
from strictcall.core.execute import execute_call, execute_call_async, failure_of
from strictcall.core.ids import check_request_id
from strictcall.core.jsontext import JSONTextError, dump_text, parse_document
from strictcall.core.marks import STAGE_MARKS, StageMarks
from strictcall.core.pipeline import (
    ARGUMENTS_LEVELS,
    WITHHELD,
    Limits,
    authorize_call,
    check_arguments,
    check_content,
    check_envelope,
    check_result,
    fail,
    may_hold_float,
    plain_answer,
    read_call,
    route_call,
    succeed,
    text_refusal,
    unknown_tool,
)
from strictcall.core.policy.holder import PolicyHolder
from strictcall.core.policy.model import Claims
from strictcall.core.registry import Allowed, ToolRegistry
from strictcall.core.tools import Tool, ToolContext
from strictcall.errors import JSONValue, Rejection

_WORKERS: Final = 4


class Await(enum.Enum):
    """`Gateway.settle`'s word, in place, that the call must be awaited (`settle_async`)."""

    AWAIT = enum.auto()


AWAIT: Final = Await.AWAIT


class Outcome(NamedTuple):
    """One call as the gateway settled it: what every wire needs to answer and audit it.

    A named tuple, built with `tuple.__new__` on the wires' path: a frozen slotted dataclass
    costs 5.5 times as much to build (1.53 µs against 0.27 µs for five members, one run).
    """

    answer: dict[str, JSONValue]
    """{"ok": true, "call_id", "result"} or {"ok": false, "call_id", "error"}, as `call`."""
    tool: str | None
    """The registered tool the call named (`tool_named`), or None."""
    pointer: str | None
    """The error's pointer as an audit record may keep it (`audit_pointer`); None on success."""
    stage: str | None
    """The stage that refused the call, None for a success."""
    latency_us: int
    """The time the ladder took, in microseconds."""


_new_outcome: Final[Callable[[type[Outcome], tuple[object, ...]], Outcome]] = tuple.__new__

# A NamedTuple's own constructor is a Python function; tuple.__new__ builds the same in C.
_new_context: Final[
    Callable[[type[ToolContext], tuple[str, str | int, str, frozenset[str] | None]], ToolContext]
] = tuple.__new__


class Gateway(ToolRegistry):
    """Tools registered by name (`ToolRegistry`), each call checked in stages: parse, route,
    shape, resource, execute, output; first failure wins."""

    def __init__(
        self,
        tools: Iterable[Tool] = (),
        *,
        limits: Limits | None = None,
        workers: int = _WORKERS,
        allowed: Allowed | None = None,
        policy: PolicyHolder | None = None,
        details: bool = True,
        envelope: bool = True,
    ) -> None:
        """`workers`: the threads that run tools with a timeout (made on first use); a thread
        held by a call past its time limit is replaced (see `strictcall.core.threads`).
        `allowed`: which tools each identity may see and call; a tool it may not is answered
        at route exactly like one that does not exist (its `available` lists only the
        caller's tools). `policy`: the policy in force (`strictcall.core.policy`: who may list
        and call which tools, their limits and quotas), instead of `allowed`. `details=False`
        answers an error's code, stage and retryable only, and `envelope=False` lets a call
        hold members besides "name" and "arguments" (both as the demo's `handle` answers,
        `strictcall.services.demo`)."""
        if workers < 1:
            raise ValueError("a gateway needs at least one worker thread")
        self.limits: Final = limits if limits is not None else Limits()
        self._pool: Workers | None = None
        self._pool_size: Final = workers
        self._details: Final = details
        self._envelope: Final = envelope
        self.marks_stages = False
        """Whether `settle` and `settle_async` look for a traced request's list of stage marks
        (`strictcall.core.marks`): set by a server that traces its calls. The look (a
        context variable read) costs ~600 instructions a call, 2 % of a settled read_note (bench's
        in-memory gateway, valgrind), so a gateway no server traces never makes it."""
        super().__init__(tools, allowed=allowed, policy=policy)

    def call(self, raw: str | bytes, identity: str, call_id: str | int) -> dict[str, JSONValue]:
        """Check and run one call; never raises for any text.

        Rungs 2 to 6 are `_ladder`'s, written out here: this is every in-process call's path,
        and calling `_ladder` instead costs one frame more, ~370 instructions a call (valid
        read_note call of bench/inprocess_strictcall.py's in-memory gateway: 39,741 written
        out against 40,112 through `_ladder`, 0.9 %; refused at shape: 36,739 against 37,108,
        1.0 %; valgrind's instruction counts, 2,000 calls less none, the same session).
        tests/test_gateway_forms.py pins that the two answer every call alike. It marks no
        stage times (`_ladder`'s `marks`): an in-process call has no span.

        Raises:
            TypeError, ValueError: `identity` is not a str, or `call_id` not a request id.
            RuntimeError: the call reached an async tool from inside a running event loop
                (use `call_async` there).
        """
        _check_caller(identity, call_id)
        document = read_call(raw, self.limits, numbers=self._numbers)  # 1. parse
        if type(document) is Rejection:
            return fail(call_id, document, located=self._details)
        parsed = document.value
        tools = self._tools if self._everyone else self.tools_for(identity)
        compiled = route_call(parsed, tools)  # 2. route
        if type(compiled) is Rejection:
            return fail(call_id, compiled, located=self._details)
        if self._envelope:  # 3. shape
            rejection = check_envelope(parsed)
            if rejection is not None:
                return fail(call_id, rejection, located=self._details)
        arguments = check_arguments(parsed, compiled, document.has_float)
        if type(arguments) is Rejection:
            return fail(call_id, arguments, located=self._details)
        grant = compiled.grant
        if grant is not None and grant.max_arguments_bytes is not None:  # the policy's size
            rejection = grant.check_arguments(arguments)
            if rejection is not None:
                return fail(call_id, rejection, located=self._details)
        tool = compiled.tool
        asks = None if grant is None else grant.server_requests
        ctx = _new_context(ToolContext, (identity, call_id, tool.name, asks))
        if tool.authorize is not None:  # 4. resource
            rejection = authorize_call(compiled, ctx, arguments)
            if rejection is not None:
                return fail(call_id, rejection, located=self._details)
        if grant is not None and grant.buckets:  # the policy's quotas, before execute
            rejection = grant.limiter.admit(grant.buckets)
            if rejection is not None:
                return fail(call_id, rejection, located=self._details)
        if tool.timeout is None and not compiled.is_async:  # 5. execute: in place, untimed
            try:
                result = tool.handler(ctx, arguments)
            except Exception as exc:
                return fail(call_id, failure_of(compiled, ctx, exc), located=self._details)
        else:
            pool = None if tool.timeout is None else self._workers()
            result, rejection = execute_call(compiled, ctx, arguments, pool)
            if rejection is not None:
                return fail(call_id, rejection, located=self._details)
        if type(result) is Content:  # 6. output
            result = check_content(compiled, arguments, result, ctx)
            rejection = result if type(result) is Rejection else None
        else:
            rejection = check_result(compiled, arguments, result, ctx)
        if rejection is None and grant is not None and grant.max_result_bytes is not None:
            rejection = grant.check_result(result)
        if rejection is not None:
            return fail(call_id, rejection, located=self._details)
        if type(result) is Content:  # answered as JSON alone: see `plain_answer`
            return plain_answer(succeed(call_id, result, tool.source))
        return succeed(call_id, result, tool.source)

    @overload
    def _ladder(
        self,
        call: JSONValue,
        has_float: bool,
        identity: str,
        call_id: str | int,
        in_place: Literal[False] = False,
        claims: Claims | None = None,
        marks: StageMarks | None = None,
    ) -> dict[str, JSONValue]: ...

    @overload
    def _ladder(
        self,
        call: JSONValue,
        has_float: bool,
        identity: str,
        call_id: str | int,
        in_place: bool,
        claims: Claims | None = None,
        marks: StageMarks | None = None,
    ) -> dict[str, JSONValue] | Await: ...

    def _ladder(
        self,
        call: JSONValue,
        has_float: bool,
        identity: str,
        call_id: str | int,
        in_place: bool = False,
        claims: Claims | None = None,
        marks: StageMarks | None = None,
    ) -> dict[str, JSONValue] | Await:
        """Rungs 2 to 6, the sync form: route, shape, resource, execute, output; first failure
        wins. `in_place`: a call routed to a tool that must be awaited (async, or with a time
        limit) is `AWAIT`, before anything of it runs. `claims`: the caller's, for the
        policy ("group:G", "scope:S"). `marks`: a traced call's, given the time each stage it
        passes ends (`strictcall.core.marks`; the caller adds the last)."""
        tools = self._tools if self._everyone else self.tools_for(identity, claims)
        compiled = route_call(call, tools)  # 2. route
        if type(compiled) is Rejection:
            return fail(call_id, compiled, located=self._details)
        tool = compiled.tool
        if in_place and (
            compiled.is_async
            or tool.timeout is not None
            or (compiled.grant is not None and compiled.grant.waits)
        ):
            return AWAIT
        if marks is not None:
            marks.append(time_ns())
        if self._envelope:  # 3. shape
            rejection = check_envelope(call)
            if rejection is not None:
                return fail(call_id, rejection, located=self._details)
        arguments = check_arguments(call, compiled, has_float)
        if type(arguments) is Rejection:
            return fail(call_id, arguments, located=self._details)
        grant = compiled.grant
        if grant is not None and grant.max_arguments_bytes is not None:  # the policy's size
            rejection = grant.check_arguments(arguments)
            if rejection is not None:
                return fail(call_id, rejection, located=self._details)
        if marks is not None:
            marks.append(time_ns())
        asks = None if grant is None else grant.server_requests
        ctx = _new_context(ToolContext, (identity, call_id, tool.name, asks))
        if tool.authorize is not None:  # 4. resource
            rejection = authorize_call(compiled, ctx, arguments)
            if rejection is not None:
                return fail(call_id, rejection, located=self._details)
        if marks is not None:
            marks.append(time_ns())
        if grant is not None and grant.buckets:  # the policy's quotas, before execute
            rejection = grant.limiter.admit(grant.buckets)
            if rejection is not None:
                return fail(call_id, rejection, located=self._details)
        if tool.timeout is None and not compiled.is_async:  # 5. execute: in place, untimed
            try:
                result = tool.handler(ctx, arguments)
            except Exception as exc:
                return fail(call_id, failure_of(compiled, ctx, exc), located=self._details)
        else:
            pool = None if tool.timeout is None else self._workers()
            result, rejection = execute_call(compiled, ctx, arguments, pool)
            if rejection is not None:
                return fail(call_id, rejection, located=self._details)
        if marks is not None:
            marks.append(time_ns())
        if type(result) is Content:  # 6. output
            result = check_content(compiled, arguments, result, ctx)
            rejection = result if type(result) is Rejection else None
        else:
            rejection = check_result(compiled, arguments, result, ctx)
        if rejection is None and grant is not None and grant.max_result_bytes is not None:
            rejection = grant.check_result(result)
        if rejection is not None:
            return fail(call_id, rejection, located=self._details)
        return succeed(call_id, result, tool.source)

    async def _ladder_async(
        self,
        call: JSONValue,
        has_float: bool,
        identity: str,
        call_id: str | int,
        claims: Claims | None = None,
        marks: StageMarks | None = None,
    ) -> dict[str, JSONValue]:
        """Rungs 2 to 6, the async form: as `_ladder`, async handlers awaited and sync ones
        with a time limit timed out from the event loop (`marks` too)."""
        tools = self._tools if self._everyone else self.tools_for(identity, claims)
        compiled = route_call(call, tools)  # 2. route
        if type(compiled) is Rejection:
            return fail(call_id, compiled, located=self._details)
        if marks is not None:
            marks.append(time_ns())
        if self._envelope:  # 3. shape
            rejection = check_envelope(call)
            if rejection is not None:
                return fail(call_id, rejection, located=self._details)
        arguments = check_arguments(call, compiled, has_float)
        if type(arguments) is Rejection:
            return fail(call_id, arguments, located=self._details)
        grant = compiled.grant
        if grant is not None and grant.max_arguments_bytes is not None:  # the policy's size
            rejection = grant.check_arguments(arguments)
            if rejection is not None:
                return fail(call_id, rejection, located=self._details)
        if marks is not None:
            marks.append(time_ns())
        tool = compiled.tool
        asks = None if grant is None else grant.server_requests
        ctx = _new_context(ToolContext, (identity, call_id, tool.name, asks))
        if tool.authorize is not None:  # 4. resource
            rejection = authorize_call(compiled, ctx, arguments)
            if rejection is not None:
                return fail(call_id, rejection, located=self._details)
        if marks is not None:
            marks.append(time_ns())
        if grant is not None and grant.buckets:  # the policy's quotas, before execute
            rejection = await grant.limiter.admit_async(grant.buckets)
            if rejection is not None:
                return fail(call_id, rejection, located=self._details)
        pool = None if tool.timeout is None else self._workers()  # 5. execute
        result, rejection = await execute_call_async(compiled, ctx, arguments, pool)
        if rejection is None:
            if marks is not None:
                marks.append(time_ns())
            if type(result) is Content:  # 6. output
                result = check_content(compiled, arguments, result, ctx)
                rejection = result if type(result) is Rejection else None
            else:
                rejection = check_result(compiled, arguments, result, ctx)
        if rejection is None and grant is not None and grant.max_result_bytes is not None:
            rejection = grant.check_result(result)
        if rejection is not None:
            return fail(call_id, rejection, located=self._details)
        return succeed(call_id, result, tool.source)

    async def call_async(
        self, raw: str | bytes, identity: str, call_id: str | int
    ) -> dict[str, JSONValue]:
        """`call` from a running event loop; async handlers are awaited.

        Raises:
            TypeError, ValueError: `identity` is not a str, or `call_id` not a request id.
        """
        _check_caller(identity, call_id)
        document = read_call(raw, self.limits, numbers=self._numbers)
        if type(document) is Rejection:
            return fail(call_id, document, located=self._details)
        answer = await self._ladder_async(document.value, document.has_float, identity, call_id)
        return plain_answer(answer)

    def call_parsed(
        self, call: JSONValue, identity: str, call_id: str | int, *, has_float: bool | None = None
    ) -> dict[str, JSONValue]:
        """`call` for a call already parsed, as `call_parsed_async` says; the ladder starts at
        rung 2, route.

        Raises:
            TypeError, ValueError: `identity` is not a str, or `call_id` not a request id.
            RuntimeError: the call reached an async tool from inside a running event loop.
        """
        _check_caller(identity, call_id)
        if has_float is None:
            has_float = self._numbers and may_hold_float(call)
        return self._ladder(call, has_float, identity, call_id)

    def call_arguments(
        self, name: str, arguments: str | bytes, identity: str, call_id: str | int
    ) -> dict[str, JSONValue]:
        """`call` for a call given as its tool's name and its arguments' JSON text, as an agent
        loop's model writes it (OpenAI's `function.arguments`): rung 1 reads that text strictly
        (a parse error's `line` and `column` are in it; it may nest `limits.max_depth` deep),
        then the call climbs from rung 2 as `call_parsed` does. An empty text is a call without
        arguments (OpenAI's API writes "" for a tool whose parameters are all optional), which
        has `{}`, as in `call`. Never raises for any text.

        Raises:
            TypeError, ValueError: `identity` is not a str, or `call_id` not a request id.
            RuntimeError: the call reached an async tool from inside a running event loop.
        """
        _check_caller(identity, call_id)
        if arguments:
            limits = self.limits
            try:  # 1. parse: `read_call`'s, called directly (its frame is ~2 % of this path)
                value, has_float = parse_document(
                    arguments,
                    max_size=limits.max_size,
                    max_depth=limits.max_depth,
                    numbers=self._numbers,
                )
            except JSONTextError as exc:
                refusal = text_refusal(exc, arguments, limits, ARGUMENTS_LEVELS)
                return fail(call_id, refusal, located=self._details)
        else:
            value, has_float = {}, False
        if type(name) is not str:  # the call made here would route on it: refuse it the same
            tools = self._tools if self._everyone else self.tools_for(identity)
            return fail(call_id, unknown_tool(tools), located=self._details)
        return self._ladder({"name": name, "arguments": value}, has_float, identity, call_id)

    async def call_parsed_async(
        self, call: JSONValue, identity: str, call_id: str | int, *, has_float: bool | None = None
    ) -> dict[str, JSONValue]:
        """`call_async` for a call a transport already parsed (with `strictcall.core.jsontext`, or
        an SDK's strict reader); the ladder starts at rung 2, route. `has_float` is whether
        the parse saw a number that may be a float; None to have the gateway look.

        Raises:
            TypeError, ValueError: `identity` is not a str, or `call_id` not a request id.
        """
        _check_caller(identity, call_id)
        if has_float is None:
            # only a gateway whose tools take numbers needs to know (`reads_numbers`)
            has_float = self._numbers and may_hold_float(call)
        return await self._ladder_async(call, has_float, identity, call_id)

    @overload
    def settle(
        self,
        call: JSONValue,
        identity: str,
        call_id: str | int,
        *,
        has_float: bool | None = None,
        in_place: Literal[False] = False,
        claims: Claims | None = None,
    ) -> Outcome: ...

    @overload
    def settle(
        self,
        call: JSONValue,
        identity: str,
        call_id: str | int,
        *,
        has_float: bool | None = None,
        in_place: bool,
        claims: Claims | None = None,
    ) -> Outcome | Await: ...

    def settle(
        self,
        call: JSONValue,
        identity: str,
        call_id: str | int,
        *,
        has_float: bool | None = None,
        in_place: bool = False,
        claims: Claims | None = None,
    ) -> Outcome | Await:
        """`call_parsed`, answered as an `Outcome`: the one question a wire asks of a call.
        `claims`: the caller's token's ("group:G", "scope:S"), which the policy may match.

        `in_place`: for a wire answering inside an event loop, a call naming a tool that must
        be awaited (async, or with a time limit) is `AWAIT`, nothing of it run (ask
        `settle_async`); every other call is answered in place.

        With `marks_stages`, while the request is traced (`strictcall.core.marks.STAGE_MARKS`
        holds a list), the list is given the call's stage marks; otherwise no clock is read
        for them.

        Raises:
            TypeError, ValueError: `identity` is not a str, or `call_id` not a request id.
            RuntimeError: without `in_place`, the call reached an async tool from inside a
                running event loop.
        """
        _check_caller(identity, call_id)
        if has_float is None:
            has_float = self._numbers and may_hold_float(call)
        marks = STAGE_MARKS.get() if self.marks_stages else None
        started = perf_counter_ns()
        if marks is None:
            answer = self._ladder(call, has_float, identity, call_id, in_place, claims)
        else:  # traced: the ladder marks each stage's end
            marks[:] = (time_ns(),)
            answer = self._ladder(call, has_float, identity, call_id, in_place, claims, marks)
            marks.append(time_ns())
        if answer is AWAIT:
            return AWAIT
        return self._settled(call, answer, started)

    async def settle_async(
        self,
        call: JSONValue,
        identity: str,
        call_id: str | int,
        *,
        has_float: bool | None = None,
        claims: Claims | None = None,
    ) -> Outcome:
        """`call_parsed_async`, answered as an `Outcome`.

        Raises:
            TypeError, ValueError: `identity` is not a str, or `call_id` not a request id.
        """
        _check_caller(identity, call_id)
        if has_float is None:
            has_float = self._numbers and may_hold_float(call)
        marks = STAGE_MARKS.get() if self.marks_stages else None
        started = perf_counter_ns()
        if marks is None:
            answer = await self._ladder_async(call, has_float, identity, call_id, claims)
        else:
            marks[:] = (time_ns(),)
            answer = await self._ladder_async(call, has_float, identity, call_id, claims, marks)
            marks.append(time_ns())
        return self._settled(call, answer, started)

    def settle_text(self, raw: str | bytes, identity: str, call_id: str | int) -> Outcome:
        """`call`, answered as an `Outcome` (the command line's call).

        Raises:
            TypeError, ValueError: `identity` is not a str, or `call_id` not a request id.
            RuntimeError: the call reached an async tool from inside a running event loop.
        """
        _check_caller(identity, call_id)
        started = perf_counter_ns()
        document = read_call(raw, self.limits, numbers=self._numbers)
        if type(document) is Rejection:
            return self._settled(None, fail(call_id, document, located=self._details), started)
        answer = self._ladder(document.value, document.has_float, identity, call_id)
        return self._settled(document.value, answer, started)

    def _settled(self, call: JSONValue, answer: dict[str, JSONValue], started: int) -> Outcome:
        """The outcome of `call`, answered `answer` by a ladder that started at `started`."""
        latency_us = (perf_counter_ns() - started) // 1000
        if answer["ok"] is True:  # it climbed every rung: it named a tool by a str
            return _new_outcome(Outcome, (answer, call["name"], None, None, latency_us))
        error = answer["error"]
        tool = self.tool_named(call)
        pointer = self.audit_pointer(tool, error)
        return _new_outcome(Outcome, (answer, tool, pointer, error["stage"], latency_us))

    def call_text(self, raw: str | bytes, identity: str, call_id: str | int) -> bytes:
        """`call`, answered as UTF-8 JSON text."""
        answer = self.call(raw, identity, call_id)
        try:
            return orjson.dumps(answer)
        except orjson.JSONEncodeError:
            return encode_answer(answer)

    def _workers(self) -> Workers:
        if self._pool is None:
            from strictcall.core.threads import Workers

            self._pool = Workers(self._pool_size)
        return self._pool

    def close(self) -> None:
        """Stop the worker threads used for tools with a timeout."""
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None

    def __enter__(self) -> Gateway:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _check_caller(identity: object, call_id: object) -> None:
    """Refuse a caller's programming error: an identity that is not a str, a bad call id.

    Raises:
        TypeError, ValueError: as `check_request_id` says, or a non-str identity.
    """
    if type(identity) is not str:
        raise TypeError("identity is a str")
    if not ((type(call_id) is str and call_id) or type(call_id) is int):
        check_request_id(call_id)  # subclasses pass there; anything else raises


def encode_answer(answer: dict[str, JSONValue]) -> bytes:
    """An answer as UTF-8 JSON; a result that cannot be written (e.g. a lone surrogate in a
    string) is withheld as invalid_tool_result rather than sent broken."""
    text = dump_text(answer)
    if text is None:
        return orjson.dumps(fail(answer["call_id"], WITHHELD))
    return text
