"""The many-hosts drill: three servers on one PostgreSQL database, driven at once (writers
on every server, each call sent to two of them together), the first killed with kill -9
mid-burst. Every acknowledged write must be there exactly once; every call sent twice applied
once, both servers answering it alike. Run on processes and namespaces
(tests/test_many_servers.py) and on containers (tests/test_container.py).
"""

from __future__ import annotations

import signal
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import httpx
import orjson

from strictcall.storage import open_store


class Server(Protocol):
    """A running server, however it runs."""

    @property
    def base_url(self) -> str: ...

    def stop(self, sig: int = signal.SIGTERM) -> int:
        """Signal it and wait until it exits; its exit status (-N when signal N ended it)."""
        ...


LOAD_S = 3.0
KILL_AFTER_ACKS = 150
WRITERS = 6
PAIRS = 3


@dataclass
class Tally:
    """What the callers saw."""

    acked: dict[str, tuple[str, str]] = field(default_factory=dict)  # call id -> (id, text)
    pairs: list[tuple[str, str, dict[str, str] | None, dict[str, str] | None]] = field(
        default_factory=list
    )
    refused: Counter[str] = field(default_factory=Counter)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def count(self) -> int:
        with self.lock:
            return len(self.acked)


def create(
    clients: list[httpx.Client], first: int, call_id: str, text: str, tally: Tally
) -> dict[str, str] | None:
    """create_note with this call id, from server `first` on: a server that cannot answer
    (killed) or answers with a retryable error is left for the next, with the same call id."""
    body = orjson.dumps(
        {
            "jsonrpc": "2.0",
            "id": call_id,
            "method": "tools/call",
            "params": {"name": "create_note", "arguments": {"text": text}},
        }
    )
    for k in range(len(clients) * 2):
        client = clients[(first + k) % len(clients)]
        try:
            reply = orjson.loads(client.post("/rpc", content=body).content)
        except httpx.HTTPError:
            continue  # the server died under the call: the outcome is unknown, retry elsewhere
        if "result" in reply:
            result: dict[str, str] = reply["result"]
            return result
        data = reply["error"]["data"]
        with tally.lock:
            tally.refused[data["code"]] += 1
        if not data["retryable"]:
            return None
    return None


def drive_kill_and_check(pg_url: str, token: str, servers: Sequence[Server]) -> None:
    """Drive the three at once, kill the first mid-burst, and check every write."""
    tally = Tally()
    stop = threading.Event()
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}

    def clients() -> list[httpx.Client]:
        return [httpx.Client(base_url=s.base_url, headers=headers, timeout=10) for s in servers]

    def writer(w: int) -> None:
        mine = clients()
        n = 0
        while not stop.is_set():
            call_id, text = f"w{w}-{n}", f"text w{w}-{n}"
            result = create(mine, w + n, call_id, text, tally)
            if result is not None:
                with tally.lock:
                    tally.acked[call_id] = (result["note_id"], text)
            n += 1
        for c in mine:
            c.close()

    def pair(p: int) -> None:
        # two threads send each call at once, to two different servers
        barrier = threading.Barrier(2)
        answers: list[dict[str, str] | None] = [None, None]

        def side(s: int, call_id: str, text: str, mine: list[httpx.Client]) -> None:
            barrier.wait(10)
            answers[s] = create(mine, p + s, call_id, text, tally)

        left, right = clients(), clients()
        n = 0
        while not stop.is_set():
            call_id, text = f"p{p}-{n}", f"text p{p}-{n}"
            threads = [
                threading.Thread(target=side, args=(s, call_id, text, c))
                for s, c in ((0, left), (1, right))
            ]
            for t in threads:
                t.start()
            for t in threads:
                t.join(30)
            with tally.lock:
                tally.pairs.append((call_id, text, answers[0], answers[1]))
            n += 1
        for c in left + right:
            c.close()

    workers = [threading.Thread(target=writer, args=(w,)) for w in range(WRITERS)]
    workers += [threading.Thread(target=pair, args=(p,)) for p in range(PAIRS)]
    started = time.monotonic()
    for t in workers:
        t.start()
    try:
        while tally.count() < KILL_AFTER_ACKS and time.monotonic() - started < LOAD_S * 5:
            time.sleep(0.01)
        assert servers[0].stop(signal.SIGKILL) == -signal.SIGKILL  # mid-burst
        killed_at = tally.count()
        time.sleep(max(0.0, LOAD_S - (time.monotonic() - started)))  # the burst goes on
    finally:
        stop.set()
        for t in workers:
            t.join(60)
    assert tally.count() > killed_at  # the two others went on serving

    store = open_store(pg_url)
    try:
        notes = store.list_notes("u1")
    finally:
        store.close()
    by_text = Counter(note.text for note in notes)
    by_id = {note.note_id: note.text for note in notes}
    assert len(by_id) == len(notes)
    for call_id, (note_id, text) in tally.acked.items():
        assert by_id.get(note_id) == text, call_id  # acknowledged: there
        assert by_text[text] == 1, call_id  # and once
    assert any(first is not None and second is not None for _, _, first, second in tally.pairs)
    for call_id, text, first, second in tally.pairs:
        assert by_text[text] <= 1, call_id  # applied once at most
        if first is not None and second is not None:
            assert first == second, call_id  # both servers answered the first result
        for answer in (first, second):
            if answer is not None:
                assert by_id.get(answer["note_id"]) == text, call_id
    assert all(by_text[text] == 1 for text in by_text)  # nothing anywhere applied twice
    for server in servers[1:]:
        assert server.stop() == 0
