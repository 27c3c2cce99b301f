"""Quotas as token buckets (GCRA): which calls a bucket admits, and when the next one may come.

A bucket of `rate` calls per period with `burst` holds at most `burst` tokens and gains one
every `interval` (the period over the count); a call takes one token from every bucket that
applies to it, or from none: all of them admit it, or it is refused with the wait until the
emptiest one has a token again (`retry_after_ms`). Over any period the bucket admits at most
`count` calls plus its `burst`.

State is the "theoretical arrival time" (TAT) of each bucket, in milliseconds: kept in this
process (`LocalBuckets`), or shared by several servers (`SharedBuckets`, implemented in
`strictcall.storage.quotas`), which the `Limiter` asks first and falls back from, open or
closed per rule, when it cannot be reached. Nothing here does I/O itself.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Final, Protocol

from strictcall.core.pipeline import frozen_details
from strictcall.errors import QUOTA_UNAVAILABLE, RATE_LIMITED, Rejection, StrictcallError

_log = logging.getLogger("strictcall.quota")

DOWN_FOR_S: Final = 1.0
"""After the shared state failed, calls use the fallback this long before it is tried again
(so that an outage costs one failed round trip a second, not one per call)."""

_LOCAL_KEPT: Final = 100_000
"""Local buckets kept at once; a full table forgets the buckets already full again."""


@dataclass(frozen=True, slots=True)
class Bucket:
    """One bucket a call takes a token from: its key, its interval and burst, and its rule."""

    key: str
    interval_ms: float
    """Milliseconds per token: the period over the count."""
    burst: int
    """The most tokens it holds (at least 1)."""
    rule: str
    """The name of the policy's rule or quota that made it (what a refusal names)."""
    fail_closed: bool
    """When the shared state is down: True refuses (`quota_unavailable`); False keeps
    counting in this process alone."""
    identity: str | None = None
    """Whose bucket it is (None: a global quota's, everyone's): for the operator's page."""
    capacity_ms: float = field(init=False, repr=False, compare=False)
    """`interval_ms * burst`: how far ahead of now the TAT may run."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "capacity_ms", self.interval_ms * self.burst)


class Refused(tuple[int, int]):
    """(index of the refusing bucket, milliseconds until it has a token)."""

    __slots__ = ()


class QuotaStoreDown(StrictcallError):
    """The shared quota state could not be read or written (raised by a `SharedBuckets`)."""


class SharedBuckets(Protocol):
    """Buckets shared by several servers (`strictcall.storage.quotas`)."""

    def take(self, buckets: Sequence[Bucket]) -> Refused | None:
        """Take one token from each bucket, atomically, or none; the refusal if one is empty.

        Raises:
            QuotaStoreDown: the shared state could not be reached.
        """
        ...

    async def take_async(self, buckets: Sequence[Bucket]) -> Refused | None:
        """`take`, awaited on the running event loop.

        Raises:
            QuotaStoreDown: the shared state could not be reached.
        """
        ...

    def levels(self, buckets: Sequence[Bucket]) -> list[float]:
        """How far ahead of now each bucket's TAT runs, in ms (0.0: full), read, not taken.

        Raises:
            QuotaStoreDown: the shared state could not be reached.
        """
        ...

    def close(self) -> None:
        """Release the connections."""
        ...

    async def aclose(self) -> None:
        """Release the connections `take_async` made, on their event loop."""
        ...


def gcra(
    tats: Sequence[float | None], buckets: Sequence[Bucket], now: float
) -> Refused | list[float]:
    """The buckets' new TATs when every one admits a call at `now`, else the first refusal."""
    new: list[float] = []
    for index, (tat, bucket) in enumerate(zip(tats, buckets, strict=True)):
        start = now if tat is None or tat < now else tat
        after = start + bucket.interval_ms
        # (start - now) first: exactly 0.0 for a full bucket, where (start + interval) - now
        # may round above interval and refuse a call the bucket has room for
        over = (start - now) + bucket.interval_ms - bucket.interval_ms * bucket.burst
        if over > 0:
            return Refused((index, max(1, math.ceil(over))))
        new.append(after)
    return new


class LocalBuckets:
    """Buckets kept in this process: one server alone needs nothing else."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._tats: dict[str, float] = {}
        self._buckets: dict[str, Bucket] = {}
        self._lock = threading.Lock()
        self._clock = clock

    def take(self, buckets: Sequence[Bucket]) -> Refused | None:
        """Take one token from each bucket, or none; the refusal if one is empty."""
        with self._lock:
            now = self._clock() * 1000.0
            tats = self._tats
            get = tats.get
            found: list[float] = []
            for bucket in buckets:  # `gcra`, written out: every call of a policy takes it
                tat = get(bucket.key, now)
                waited = tat - now if tat > now else 0.0  # 0.0 exactly for a full bucket
                if waited + bucket.interval_ms > bucket.capacity_ms:
                    over = waited + bucket.interval_ms - bucket.capacity_ms
                    return Refused((len(found), max(1, math.ceil(over))))
                found.append(now + waited + bucket.interval_ms)
            if len(tats) >= _LOCAL_KEPT:
                self._forget(now)
                tats = self._tats
            known = self._buckets
            for bucket, tat in zip(buckets, found, strict=True):
                key = bucket.key
                if key not in known:
                    known[key] = bucket
                tats[key] = tat
            return None

    def nearest(self, count: int) -> list[tuple[Bucket, float]]:
        """The `count` buckets with the fewest tokens left, each with how full it is (0.0
        empty, 1.0 full): the identities nearest their quotas, for the operator's page."""
        with self._lock:
            now = self._clock() * 1000.0
            kept = [(self._buckets[key], tat) for key, tat in self._tats.items() if tat > now]
        filled = [(b, max(0.0, 1.0 - (tat - now) / b.capacity_ms)) for b, tat in kept]
        filled.sort(key=lambda pair: pair[1])
        return filled[:count]

    def _forget(self, now: float) -> None:
        """Drop the buckets that are full again (their TAT has passed): they hold nothing."""
        self._tats = {key: tat for key, tat in self._tats.items() if tat > now}
        self._buckets = {key: self._buckets[key] for key in self._tats}


class Limiter:
    """Takes a call's tokens: from the shared state when there is one, else (or while it is
    down, for buckets that fail open) from this process's buckets."""

    def __init__(
        self, shared: SharedBuckets | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.local: Final = LocalBuckets(clock)
        self.shared = shared
        self._clock = clock
        self._down_until = 0.0
        self.faults = 0
        """Calls the shared state could not serve (each counted once, in /metrics)."""
        self.fell_open = 0
        """Of those, calls counted in this process alone (their rules fail open)."""
        self.fell_closed = 0
        """Of those, calls refused `quota_unavailable` (their rules fail closed)."""
        self._mutex = threading.Lock()
        self.seen: dict[str, Bucket] = {}
        """The buckets calls took from the shared state, by key (for the operator's page: the
        shared state is read back for them there, not per call)."""

    def _saw(self, buckets: Sequence[Bucket]) -> None:
        seen = self.seen
        for bucket in buckets:
            if bucket.key not in seen:
                if len(seen) >= _LOCAL_KEPT:
                    seen.clear()  # the page then shows the buckets of the calls since
                seen[bucket.key] = bucket

    def admit(self, buckets: Sequence[Bucket]) -> Rejection | None:
        """The refusal of a call whose buckets cannot all give it a token, else None."""
        shared = self.shared
        if shared is None:  # one process: its own buckets, the path every call takes
            refused = self.local.take(buckets)
            return None if refused is None else _refusal(buckets, refused)
        self._saw(buckets)
        if self._clock() >= self._down_until:
            try:
                refused = shared.take(buckets)
            except QuotaStoreDown:
                self._went_down()
            else:
                if self._down_until != 0.0:
                    self._came_back()
                return _refusal(buckets, refused)
        closed = [b for b in buckets if b.fail_closed]  # the shared state is down
        with self._mutex:
            self.faults += 1
            if closed:
                self.fell_closed += 1
            else:
                self.fell_open += 1
        if closed:
            wait = max(1, math.ceil((self._down_until - self._clock()) * 1000))
            details = {"retry_after_ms": wait, "rule": closed[0].rule}
            return Rejection(QUOTA_UNAVAILABLE, frozen_details(details))
        return _refusal(buckets, self.local.take(buckets))

    async def admit_async(self, buckets: Sequence[Bucket]) -> Rejection | None:
        """`admit`, the shared state's round trip awaited (an event loop's wire)."""
        shared = self.shared
        if shared is None or self._clock() < self._down_until:
            return self.admit(buckets)
        self._saw(buckets)
        try:
            refused = await shared.take_async(buckets)
        except QuotaStoreDown:
            self._went_down()
            return self.admit(buckets)  # down now: each rule's way
        if self._down_until != 0.0:
            self._came_back()
        return _refusal(buckets, refused)

    def _went_down(self) -> None:
        """Note the shared state down for `DOWN_FOR_S`; say so once per outage."""
        with self._mutex:
            was_up = self._down_until == 0.0
            self._down_until = self._clock() + DOWN_FOR_S
        if was_up:
            _log.warning(
                "strictcall: the shared quota state cannot be reached; rules that fail open"
                " count in this process alone, rules that fail closed refuse (quota_unavailable)"
            )

    def _came_back(self) -> None:
        """The shared state answered after an outage: say so, once."""
        with self._mutex:
            if self._down_until == 0.0:
                return
            self._down_until = 0.0
        _log.warning("strictcall: the shared quota state answers again")

    def close(self) -> None:
        """Release the shared state's connections."""
        if self.shared is not None:
            self.shared.close()

    async def aclose(self) -> None:
        """Release the shared state's awaited connections, on the loop that awaited them."""
        if self.shared is not None:
            await self.shared.aclose()


def _refusal(buckets: Sequence[Bucket], refused: Refused | None) -> Rejection | None:
    """`rate_limited` naming the bucket's rule, with its wait, or None."""
    if refused is None:
        return None
    index, wait = refused
    details = {"retry_after_ms": wait, "rule": buckets[index].rule}
    return Rejection(RATE_LIMITED, frozen_details(details))
