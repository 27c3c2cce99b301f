"""Quota buckets shared by several servers, in Redis: one round trip per call, atomic.

A Lua script takes one token from each of a call's buckets or from none (GCRA, the TATs in
milliseconds of Redis' own clock, so that the servers' clocks do not matter), and lets each
key expire when its bucket is full again. Redis was chosen over PostgreSQL by measurement
(`bench/quota_state.py`, bench/POLICY.md): the same take is one script call against a
transaction of row locks.

The client never retries on its own: a call that cannot reach Redis within the timeouts raises
`QuotaStoreDown`, and the `Limiter` takes its rule's documented fallback.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from strictcall.core.quota import Bucket, QuotaStoreDown, Refused
from strictcall.errors import require_extra
from strictcall.storage.resp import RespScript

TIMEOUT_S: Final = 0.25
"""How long one call waits for Redis (to connect, or for the script's answer)."""

TAKE: Final = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
local new = {}
for i = 1, #KEYS do
  local interval = tonumber(ARGV[2 * i - 1])
  local burst = tonumber(ARGV[2 * i])
  local tat = tonumber(redis.call('GET', KEYS[i]))
  if tat == nil or tat < now then tat = now end
  local after = tat + interval
  local over = (tat - now) + interval - interval * burst  -- 0.0 exactly for a full bucket
  if over > 0 then return {i - 1, math.ceil(over)} end
  new[i] = after
end
for i = 1, #KEYS do
  redis.call('SET', KEYS[i], string.format('%.3f', new[i]), 'PX', math.ceil(new[i] - now) + 1)
end
return {-1, 0}
"""
"""Take a token from every bucket in KEYS (ARGV: interval_ms, burst per key), or from none:
{-1, 0}, or {index of the empty bucket, milliseconds until it has a token}."""


LEVELS: Final = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
local ahead = {}
for i = 1, #KEYS do
  local tat = tonumber(redis.call('GET', KEYS[i]))
  if tat == nil or tat < now then tat = now end
  ahead[i] = string.format('%.3f', tat - now)
end
return ahead
"""
"""How far ahead of Redis' now each bucket's TAT runs, in ms ('0': full); nothing written."""


class RedisBuckets:
    """`strictcall.core.quota.SharedBuckets` in Redis (redis-py, `strictcall[quotas]`)."""

    def __init__(self, url: str, *, timeout_s: float = TIMEOUT_S) -> None:
        """A client of the Redis at `url` (redis://, rediss://, unix://); it connects on first use.

        Raises:
            MissingExtra: redis-py is not installed.
            QuotaStoreDown: the URL cannot be used.
        """
        require_extra("quotas", "redis")
        import redis
        from redis.backoff import NoBackoff
        from redis.retry import Retry

        try:
            self._client = redis.Redis.from_url(
                url,
                socket_timeout=timeout_s,
                socket_connect_timeout=timeout_s,
                retry=Retry(NoBackoff(), 0),
                retry_on_timeout=False,
            )
        except ValueError as exc:
            raise QuotaStoreDown(f"the shared quota state's URL: {type(exc).__name__}") from None
        self._take = self._client.register_script(TAKE)
        self._levels = self._client.register_script(LEVELS)
        self._errors: tuple[type[Exception], ...] = (redis.RedisError, OSError)
        self._url = url
        self._timeout_s = timeout_s
        self._awaited: Any = None  # redis.asyncio's script, made on the loop that first awaits
        self._async_client: Any = None
        self._resp: RespScript | None = None
        if url.startswith("redis://"):  # the small client; TLS and sockets go to redis-py
            try:
                self._resp = RespScript(url, TAKE, timeout_s)
            except ValueError:
                self._resp = None

    def _args(self, buckets: Sequence[Bucket]) -> tuple[list[str], list[str]]:
        args: list[str] = []
        for bucket in buckets:
            args.append(repr(bucket.interval_ms))
            args.append(str(bucket.burst))
        return [b.key for b in buckets], args

    def take(self, buckets: Sequence[Bucket]) -> Refused | None:
        """Take one token from each bucket, atomically, or none; the refusal if one is empty.

        Raises:
            QuotaStoreDown: Redis could not be reached, or did not answer in time.
        """
        keys, args = self._args(buckets)
        try:
            index, wait = self._take(keys=keys, args=args)
        except self._errors as exc:
            raise QuotaStoreDown(type(exc).__name__) from None
        if index < 0:
            return None
        return Refused((int(index), int(wait)))

    def levels(self, buckets: Sequence[Bucket]) -> list[float]:
        """How far ahead of now each bucket's TAT runs, in ms (0.0: full): one round trip.

        Raises:
            QuotaStoreDown: Redis could not be reached, or did not answer in time.
        """
        if not buckets:
            return []
        try:
            found = self._levels(keys=[b.key for b in buckets], args=[])
        except self._errors as exc:
            raise QuotaStoreDown(type(exc).__name__) from None
        return [float(value) for value in found]

    async def take_async(self, buckets: Sequence[Bucket]) -> Refused | None:
        """`take`, awaited: the event loop serves other calls during the round trip.

        Raises:
            QuotaStoreDown: Redis could not be reached, or did not answer in time.
        """
        keys, args = self._args(buckets)
        if self._resp is not None:
            index, wait = await self._resp.run(keys, args)
        else:
            try:
                if self._awaited is None:
                    self._awaited = self._async_script()
                index, wait = await self._awaited(keys=keys, args=args)
            except self._errors as exc:
                raise QuotaStoreDown(type(exc).__name__) from None
        if index < 0:
            return None
        return Refused((int(index), int(wait)))

    def _async_script(self) -> Any:
        import redis.asyncio
        from redis.asyncio.retry import Retry
        from redis.backoff import NoBackoff

        client = self._async_client = redis.asyncio.Redis.from_url(
            self._url,
            socket_timeout=self._timeout_s,
            socket_connect_timeout=self._timeout_s,
            retry=Retry(NoBackoff(), 0),
            retry_on_timeout=False,
        )
        return client.register_script(TAKE)

    def close(self) -> None:
        """Close the connections (the awaited ones: `aclose`, on their loop)."""
        self._client.close()

    async def aclose(self) -> None:
        """Close the connections made for `take_async`, on the loop that made them."""
        client, self._async_client, self._awaited = self._async_client, None, None
        if client is not None:
            await client.aclose()
        if self._resp is not None:
            await self._resp.aclose()
