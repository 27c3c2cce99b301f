"""Admission (`strictcall.server.admission`) in process, on real stores: each step alone, the
steps composed and in their order, the one table of HTTP statuses and headers, and the same
request answered alike in place (`answer_now`) and awaited (ASGI)."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest

from strictcall.core.record import AuditRecord
from strictcall.core.refusals import AUTH_DOWN, CALLER_BUSY, FOREIGN_ORIGIN, NO_TOKEN
from strictcall.errors import (
    AUTH_THROTTLED,
    AUTH_UNAVAILABLE,
    BUSY,
    FORBIDDEN_ORIGIN,
    INSUFFICIENT_SCOPE,
    RETRY_AFTER_MS,
    TOKEN_STORE_UNAVAILABLE,
    UNAUTHENTICATED,
    ErrorKind,
    Rejection,
)
from strictcall.server.admission import (
    HTTP_STATUS,
    Admission,
    BearerIdentity,
    CallsInFlight,
    InFlight,
    OriginCheck,
    refusal_response,
)
from strictcall.server.edge import OriginPolicy
from strictcall.server.router import RpcApp
from strictcall.services.notes import notes_gateway
from strictcall.storage.postgres import PostgresStore
from strictcall.storage.sqlite import SQLiteStore
from strictcall.transports.asgi import (
    IDENTITY_KEY,
    Later,
    Message,
    Response,
    Scope,
    response_headers,
)
from strictcall.transports.jsonrpc import RpcService

CALL = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"count_notes"}}'
ALLOWED = "https://app.example"
FOREIGN = "https://evil.example"


class Recorded:
    """Audit records, kept in order (the recorder every step and the service write to)."""

    def __init__(self) -> None:
        self.records: list[AuditRecord] = []

    def __call__(self, record: AuditRecord) -> None:
        self.records.append(record)

    def seen(self) -> list[AuditRecord]:
        """The records without their times (the same request audited twice is equal so)."""
        return [record._replace(at=0.0, latency_us=0) for record in self.records]


class Answering:
    """The innermost wire of a step's test: answers 200 with the identity it finds, both ways,
    and can hold its ASGI answer open until told (a call in flight)."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.hold = False
        self.entered = 0

    def _answer(self, scope: Scope) -> Response:
        body = str(scope.get(IDENTITY_KEY, "-")).encode()  # absent: no step identified it
        return 200, response_headers(body), body

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        self.entered += 1
        if self.hold:
            await self.release.wait()
        status, headers, body = self._answer(scope)
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    def answer_now(self, scope: Scope, body: bytes | bytearray) -> Response | None:
        return self._answer(scope)


def made_now(answer: Response | Later | None) -> Response | None:
    """An answer made in place with nothing to await (what these wires' answers are)."""
    assert answer is None or isinstance(answer, tuple)
    return answer


def scope_of(token: str | None = None, origin: str | None = None) -> Scope:
    headers = [(b"host", b"x"), (b"content-type", b"application/json")]
    if origin is not None:
        headers.append((b"origin", origin.encode()))
    if token is not None:
        headers.append((b"authorization", b"Bearer " + token.encode()))
    headers.append((b"content-length", str(len(CALL)).encode()))
    return {"type": "http", "method": "POST", "path": "/rpc", "headers": headers}


async def awaited(app: Any, scope: Scope) -> Response:
    """`app` run as ASGI on `scope` with CALL as its body: the answer it sent."""
    sent: list[Message] = []
    messages = iter([{"type": "http.request", "body": CALL, "more_body": False}])

    async def receive() -> Message:
        return next(messages, {"type": "http.disconnect"})

    async def send(message: Message) -> None:
        sent.append(message)

    await app(scope, receive, send)
    start, body = sent
    return start["status"], list(start["headers"]), body["body"]


def headers_of(response: Response) -> dict[bytes, bytes]:
    return dict(response[1])


def code_of(record: AuditRecord) -> str | None:
    return record.code


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteStore]:
    opened = SQLiteStore(str(tmp_path / "admission.sqlite3"))
    yield opened
    opened.close()


# --- the one decision of status and headers ---------------------------------------------------


def test_each_refusal_has_one_status_in_one_table() -> None:
    assert dict(HTTP_STATUS) == {
        FORBIDDEN_ORIGIN: 403,
        UNAUTHENTICATED: 401,
        INSUFFICIENT_SCOPE: 403,
        BUSY: 429,
        AUTH_UNAVAILABLE: 503,
        TOKEN_STORE_UNAVAILABLE: 503,
        AUTH_THROTTLED: 429,
    }
    for refusal, kind in [
        (FOREIGN_ORIGIN, FORBIDDEN_ORIGIN),
        (NO_TOKEN, UNAUTHENTICATED),
        (CALLER_BUSY, BUSY),
        (AUTH_DOWN, TOKEN_STORE_UNAVAILABLE),
    ]:
        assert refusal.kind is kind
        assert refusal_response(refusal)[0] == HTTP_STATUS[kind]


def test_401_challenges_for_a_bearer_token_and_403_says_nothing_more() -> None:
    unauthenticated = headers_of(refusal_response(NO_TOKEN))
    assert unauthenticated[b"www-authenticate"] == b'Bearer realm="strictcall"'
    assert b"retry-after" not in unauthenticated
    forbidden = headers_of(refusal_response(FOREIGN_ORIGIN))
    assert b"www-authenticate" not in forbidden and b"retry-after" not in forbidden


@pytest.mark.parametrize(
    ("kind", "milliseconds", "seconds"),
    [
        (BUSY, RETRY_AFTER_MS, b"1"),
        (BUSY, 1000, b"1"),
        (BUSY, 1001, b"2"),
        (BUSY, 0, b"0"),  # a hint of none is still a hint: sent, not dropped
        (AUTH_UNAVAILABLE, RETRY_AFTER_MS, b"1"),
        (AUTH_UNAVAILABLE, 2500, b"3"),
    ],
)
def test_429_and_503_carry_retry_after_in_whole_seconds_rounded_up(
    kind: ErrorKind, milliseconds: int, seconds: bytes
) -> None:
    refusal = Rejection(kind, MappingProxyType({"retry_after_ms": milliseconds}))
    status, headers, _ = refusal_response(refusal)
    assert status == HTTP_STATUS[kind]
    assert dict(headers)[b"retry-after"] == seconds


def test_the_catalogues_busy_and_auth_down_say_when_to_retry() -> None:
    for refusal in (CALLER_BUSY, AUTH_DOWN):
        assert headers_of(refusal_response(refusal))[b"retry-after"] == b"1"


def test_a_refusal_body_is_a_json_rpc_error_with_the_structured_error() -> None:
    import json

    _, headers, body = refusal_response(CALLER_BUSY)
    reply = json.loads(body)
    assert reply["id"] is None
    assert reply["error"]["data"]["code"] == BUSY.code
    assert reply["error"]["data"]["retryable"] is True
    assert dict(headers)[b"content-length"] == str(len(body)).encode()


# --- each step alone ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("origin", "status"),
    [(None, 200), (ALLOWED, 200), (FOREIGN, 403), ("null", 403)],
    ids=["none", "allowed", "foreign", "null"],
)
def test_the_origin_step_alone_refuses_only_a_foreign_origin_and_audits_it(
    origin: str | None, status: int
) -> None:
    recorded = Recorded()
    step = OriginCheck(Answering(), recorded, OriginPolicy(frozenset({ALLOWED})))
    in_place = made_now(step.answer_now(scope_of(origin=origin), CALL))
    assert in_place is not None and in_place[0] == status
    assert asyncio.run(awaited(step, scope_of(origin=origin)))[0] == status
    expected = [] if status == 200 else [FORBIDDEN_ORIGIN.code] * 2
    assert [code_of(r) for r in recorded.records] == expected
    assert all(r.identity is None for r in recorded.records)


def test_the_token_step_alone_puts_the_identity_in_the_scope(store: SQLiteStore) -> None:
    token = store.create_token("u1")
    recorded = Recorded()
    step = BearerIdentity(Answering(), recorded, store)
    assert step.answer_now(scope_of(token), CALL) == (200, response_headers(b"u1"), b"u1")
    assert asyncio.run(awaited(step, scope_of(token)))[2] == b"u1"
    assert recorded.records == []


@pytest.mark.parametrize("token", [None, "sc_unknown", ""], ids=["none", "unknown", "empty"])
def test_the_token_step_alone_refuses_a_caller_it_does_not_know(
    store: SQLiteStore, token: str | None
) -> None:
    recorded = Recorded()
    inner = Answering()
    step = BearerIdentity(inner, recorded, store)
    in_place = made_now(step.answer_now(scope_of(token), CALL))
    assert in_place is not None and in_place[0] == 401
    assert asyncio.run(awaited(step, scope_of(token)))[0] == 401
    assert inner.entered == 0
    assert [code_of(r) for r in recorded.records] == [UNAUTHENTICATED.code] * 2


def test_the_token_step_alone_is_503_while_the_store_cannot_answer(
    store: SQLiteStore, tmp_path: Path
) -> None:
    with sqlite3.connect(tmp_path / "admission.sqlite3") as broken:
        broken.execute("DROP TABLE tokens")  # every lookup now fails in the database
    recorded = Recorded()
    step = BearerIdentity(Answering(), recorded, store)
    in_place = made_now(step.answer_now(scope_of("sc_any"), CALL))
    assert in_place is not None and in_place[0] == 503
    assert headers_of(in_place)[b"retry-after"] == b"1"
    assert asyncio.run(awaited(step, scope_of("sc_any")))[:2] == in_place[:2]
    assert [code_of(r) for r in recorded.records] == [TOKEN_STORE_UNAVAILABLE.code] * 2


def test_a_token_store_a_round_trip_away_is_awaited_never_looked_up_in_place(
    pg_url: str,
) -> None:
    store = PostgresStore(pg_url)
    try:
        assert store.tokens_inline is False
        token = store.create_token("u1")
        recorded = Recorded()
        step = BearerIdentity(Answering(), recorded, store)
        assert step.answer_now(scope_of(token), CALL) is None  # the server awaits it instead
        assert step.answer_now(scope_of("sc_unknown"), CALL) is None
        assert recorded.records == []  # nothing audited in place

        async def both() -> tuple[Response, Response]:
            return await awaited(step, scope_of(token)), await awaited(step, scope_of("sc_x"))

        known, unknown = asyncio.run(both())
        assert known[0] == 200 and known[2] == b"u1"
        assert unknown[0] == 401
        assert [code_of(r) for r in recorded.records] == [UNAUTHENTICATED.code]
    finally:
        store.close()


def test_the_in_flight_step_alone_refuses_one_call_past_the_limit_and_audits_who() -> None:
    recorded = Recorded()
    inner = Answering()
    in_flight = InFlight(2)
    step = CallsInFlight(inner, recorded, in_flight)
    inner.hold = True

    async def scenario() -> list[Response]:
        scope = {**scope_of(), IDENTITY_KEY: "u1"}
        held = [asyncio.create_task(awaited(step, dict(scope))) for _ in range(2)]
        for _ in range(1000):  # a bounded number of the loop's turns, no timed sleep
            if inner.entered == 2:  # both are in the app, holding their places
                break
            await asyncio.sleep(0)
        assert inner.entered == 2
        assert in_flight["u1"] == 2
        refused_awaited = await awaited(step, dict(scope))
        refused_now = made_now(step.answer_now(dict(scope), CALL))
        other = made_now(
            step.answer_now({**scope_of(), IDENTITY_KEY: "u2"}, CALL)
        )  # another caller
        inner.release.set()
        served = await asyncio.gather(*held)
        assert refused_now is not None and other is not None
        return [refused_awaited, refused_now, other, *served]

    refused_awaited, refused_now, other, *served = asyncio.run(scenario())
    assert refused_awaited == refused_now
    assert refused_now[0] == 429 and headers_of(refused_now)[b"retry-after"] == b"1"
    assert other[0] == 200 and [answer[0] for answer in served] == [200, 200]
    assert in_flight["u1"] == 0 and in_flight["u2"] == 0  # every place given back
    assert [(r.code, r.identity) for r in recorded.records] == [(BUSY.code, "u1")] * 2


def test_a_call_in_place_gives_its_place_back_even_when_it_raises() -> None:
    class Failing(Answering):
        def answer_now(self, scope: Scope, body: bytes | bytearray) -> Response | None:
            raise RuntimeError("the tool's own fault")

    in_flight = InFlight(1)
    step = CallsInFlight(Failing(), Recorded(), in_flight)
    with pytest.raises(RuntimeError):
        step.answer_now({**scope_of(), IDENTITY_KEY: "u1"}, CALL)
    assert in_flight["u1"] == 0


# --- composed -------------------------------------------------------------------------------


def composed(store: SQLiteStore, recorded: Recorded, max_in_flight: int = 4) -> RpcApp:
    """The server's own /rpc (the notes service) behind the server's own admission."""
    admission = Admission(
        store, recorded, origins=OriginPolicy(frozenset({ALLOWED})), max_in_flight=max_in_flight
    )
    service = RpcService(notes_gateway(store), recorded)
    return RpcApp(service, store, max_body=1 << 20, record=recorded, admission=admission)


def test_a_foreign_origin_is_refused_before_the_token_is_read(store: SQLiteStore) -> None:
    recorded = Recorded()
    app = composed(store, recorded)
    for token in (None, "sc_unknown", store.create_token("u1")):
        answer = made_now(app.answer_now(scope_of(token, FOREIGN), CALL))
        assert answer is not None and answer[0] == 403  # never 401: nothing said of tokens
        assert b"www-authenticate" not in headers_of(answer)
    assert [code_of(r) for r in recorded.records] == [FORBIDDEN_ORIGIN.code] * 3


def test_an_unknown_caller_is_refused_before_calls_in_flight_are_counted(
    store: SQLiteStore,
) -> None:
    recorded = Recorded()
    app = composed(store, recorded, max_in_flight=1)
    assert app.admission.in_flight.enter("u1")  # u1's one place is taken
    answer = made_now(app.answer_now(scope_of("sc_unknown"), CALL))
    assert answer is not None and answer[0] == 401
    busy = made_now(app.answer_now(scope_of(store.create_token("u1")), CALL))
    assert busy is not None and busy[0] == 429
    assert [(r.code, r.identity) for r in recorded.records] == [
        (UNAUTHENTICATED.code, None),
        (BUSY.code, "u1"),
    ]


def request_kinds(store: SQLiteStore) -> dict[str, tuple[str | None, str | None]]:
    token = store.create_token("u1")
    return {
        "served": (token, None),
        "served-allowed-origin": (token, ALLOWED),
        "foreign-origin": (token, FOREIGN),
        "no-token": (None, None),
        "unknown-token": ("sc_unknown", ALLOWED),
        "busy": (store.create_token("busy"), None),
    }


@pytest.mark.parametrize(
    ("kind", "status"),
    [
        ("served", 200),
        ("served-allowed-origin", 200),
        ("foreign-origin", 403),
        ("no-token", 401),
        ("unknown-token", 401),
        ("busy", 429),
    ],
)
def test_in_place_and_awaited_give_the_same_status_headers_body_and_audit(
    tmp_path: Path, kind: str, status: int
) -> None:
    answers: list[Response] = []
    audits: list[list[AuditRecord]] = []
    for path in ("in-place", "awaited"):  # each on a store of its own, made alike
        store = SQLiteStore(str(tmp_path / f"{path}.sqlite3"))
        try:
            recorded = Recorded()
            app = composed(store, recorded, max_in_flight=1)
            token, origin = request_kinds(store)[kind]
            assert app.admission.in_flight.enter("busy")  # "busy" has its one call running
            if path == "in-place":
                answer = made_now(app.answer_now(scope_of(token, origin), CALL))
                assert answer is not None
            else:
                answer = asyncio.run(awaited(app, scope_of(token, origin)))
            answers.append(answer)
            audits.append(recorded.seen())
        finally:
            store.close()
    in_place, awaited_answer = answers
    assert in_place[0] == status
    assert in_place == awaited_answer
    assert audits[0] == audits[1] and len(audits[0]) == 1


def test_a_call_awaited_in_place_holds_its_place_until_it_is_answered() -> None:
    release = asyncio.Event()

    class Later(Answering):
        def answer_now(self, scope: Scope, body: bytes | bytearray) -> Any:
            async def answer() -> Response:
                await release.wait()
                return (200, response_headers(b"u1"), b"u1")

            return answer()

    in_flight = InFlight(1)
    recorded = Recorded()
    step = CallsInFlight(Later(), recorded, in_flight)

    async def scenario() -> tuple[Any, Any]:
        scope = {**scope_of(), IDENTITY_KEY: "u1"}
        later = step.answer_now(dict(scope), CALL)
        assert later is not None and not isinstance(later, tuple)
        task = asyncio.create_task(later)
        await asyncio.sleep(0)  # the call runs, holding its place
        assert in_flight["u1"] == 1
        busy = made_now(step.answer_now(dict(scope), CALL))  # one more while it runs: refused now
        release.set()
        return busy, await task

    busy, served = asyncio.run(scenario())
    assert isinstance(busy, tuple) and busy[0] == 429
    assert served[0] == 200
    assert in_flight["u1"] == 0  # given back once answered
    assert [(r.code, r.identity) for r in recorded.records] == [(BUSY.code, "u1")]
