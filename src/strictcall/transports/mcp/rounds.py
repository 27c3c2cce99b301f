"""2026-07-28's input_required rounds, for the requests an upstream makes of its caller during
a call (sampling, elicitation, roots), which that wire carries in results, not as requests of
the server's.

The request goes to the caller as its tools/call's answer: an input_required result holding
it as the upstream sent it (checked as the protocol's `InputRequiredResult`) and a
`requestState`; the upstream's call is held meanwhile. The caller's next tools/call with that
requestState and its `inputResponses` resumes it: the answer goes to the upstream (through
`strictcall.services.proxy.session.Conversations.ask`, which bounds and audits it as on
2025-11-25), and the call's next answer is another round or its result.

A requestState is minted (`strictcall.core.ids`), names one round of one identity's, and is
used once: another identity's, a used one, one past its wait (`Rounds.wait_s`) and one never
minted are answered alike (`UNKNOWN_ROUND`). An identity holds at most `Rounds.max_held`
rounds at once; one more is not asked (`NotAsked`, audited `too_many_rounds`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, Final

import mcp_types as types
from mcp.shared.exceptions import MCPError

from strictcall.core.ids import mint_call_id
from strictcall.errors import JSONValue
from strictcall.transports.mcp.peer import NotAsked
from strictcall.transports.serving import Rounds

KEY: Final = "input"
"""The key of a round's one request in `inputRequests` (and of its answer in
`inputResponses`)."""

Answer = types.CallToolResult | types.InputRequiredResult


class Round:
    """One request of the upstream's held for its caller's answer."""

    def __init__(self, call: HeldCall, state: str, request: types.ServerRequest) -> None:
        self.call: Final = call
        self.state: Final = state
        self.request: Final = request
        self.answer: Final[asyncio.Future[JSONValue]] = asyncio.get_running_loop().create_future()
        """The caller's answer to the request, as it sent it (None: none under `KEY`)."""

    def result(self) -> types.InputRequiredResult:
        """The round as the caller is answered it, checked as the protocol's."""
        request = self.request.model_dump(by_alias=True, mode="json", exclude_none=True)
        return types.InputRequiredResult.model_validate(
            {
                "resultType": "input_required",
                "inputRequests": {KEY: request},
                "requestState": self.state,
            },
            by_name=False,
        )


class HeldCall:
    """One 2026-07-28 caller's call, running while its rounds go to the caller and back."""

    def __init__(self, identity: str, rounds: HeldRounds) -> None:
        self.identity: Final = identity
        self._rounds = rounds
        self._asked: asyncio.Queue[Round] = asyncio.Queue()
        self._task: asyncio.Task[types.CallToolResult] | None = None

    def start(self, call: Coroutine[Any, Any, types.CallToolResult]) -> None:
        """Run the call (in the current context: its peer is this call's)."""
        self._task = self._rounds.run(call)

    async def ask(self, request: types.ServerRequest, result_type: Any) -> Any:
        """`peer.Ask`: hold `request` as a round for the caller and wait (within
        `Rounds.wait_s`) for its answer, read as `result_type`.

        Raises:
            NotAsked: the caller holds as many rounds as it may.
            TimeoutError: no answer within `Rounds.wait_s`.
            MCPError: the caller's follow-up held no answer under `KEY`.
        """
        held = self._rounds.hold(self, request)
        self._asked.put_nowait(held)
        try:
            answer = await asyncio.wait_for(held.answer, self._rounds.budgets.wait_s)
        finally:
            self._rounds.drop(held.state)
        if not isinstance(answer, dict):
            raise MCPError(types.INVALID_PARAMS, "The caller sent no answer")
        return result_type.model_validate(answer, by_name=False)

    async def next(self) -> Answer:
        """The call's next answer for its caller: a round to answer, or its result.

        Raises:
            Whatever the call raises (`CallCancelled`).
        """
        task = self._task
        assert task is not None, "start the call first"
        asked = asyncio.ensure_future(self._asked.get())
        try:
            await asyncio.wait({task, asked}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not asked.done():
                asked.cancel()
        if asked.done() and not asked.cancelled():
            return asked.result().result()
        return task.result()


class HeldRounds:
    """The rounds held for their callers, by requestState, within `budgets`."""

    def __init__(self, budgets: Rounds) -> None:
        self.budgets: Final = budgets
        self._held: dict[str, Round] = {}
        self._per_identity: dict[str, int] = {}
        self._running: set[asyncio.Task[types.CallToolResult]] = set()

    def run(
        self, call: Coroutine[Any, Any, types.CallToolResult]
    ) -> asyncio.Task[types.CallToolResult]:
        """A held call's task, kept until it ends (its caller may have gone: it ends within
        its rounds' waits and audits itself)."""
        task = asyncio.get_running_loop().create_task(call)
        self._running.add(task)
        task.add_done_callback(self._ended)
        return task

    def _ended(self, task: asyncio.Task[types.CallToolResult]) -> None:
        self._running.discard(task)
        if not task.cancelled():
            task.exception()  # retrieved: a caller gone never reads it

    def hold(self, call: HeldCall, request: types.ServerRequest) -> Round:
        """A new round of `call`'s, under a new requestState.

        Raises:
            NotAsked: its identity holds `budgets.max_held` rounds already.
        """
        held = self._per_identity.get(call.identity, 0)
        if held >= self.budgets.max_held:
            raise NotAsked("too_many_rounds")
        state = mint_call_id("round")
        self._held[state] = Round(call, state, request)
        self._per_identity[call.identity] = held + 1
        return self._held[state]

    def take(self, state: JSONValue, identity: str) -> Round | None:
        """The round `state` names, if it is held for `identity` (then no longer: a state is
        used once), else None, whichever the reason."""
        held = self._held.get(state) if type(state) is str else None
        if held is None or held.call.identity != identity or held.answer.done():
            return None
        self.drop(held.state)
        return held

    def drop(self, state: str) -> None:
        """Forget the round `state` names (answered, or past its wait)."""
        held = self._held.pop(state, None)
        if held is None:
            return
        left = self._per_identity[held.call.identity] - 1
        if left:
            self._per_identity[held.call.identity] = left
        else:
            del self._per_identity[held.call.identity]

    def held(self, identity: str) -> int:
        """How many rounds `identity` holds now."""
        return self._per_identity.get(identity, 0)
