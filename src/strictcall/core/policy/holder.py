"""The policy in force, swapped whole on reload: a call keeps the view (and so the grants)
it was routed with, so calls in flight finish under the policy they started with."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from contextlib import asynccontextmanager
from typing import Final

from strictcall.core.pipeline import CompiledTool
from strictcall.core.policy.grant import Grant
from strictcall.core.policy.model import Claims, Policy, Rule
from strictcall.core.quota import Bucket, Limiter, QuotaStoreDown, SharedBuckets

SharedFactory = Callable[[str], SharedBuckets]
"""Makes the shared state of a policy's `shared` URL (`strictcall.storage.quotas`)."""

_SEP: Final = "\x1f"
_NO_CLAIMS: Final[Claims] = frozenset()
_SHARED_READ: Final = 1_000
"""The most buckets the page reads back from a shared state at a refresh."""
_PAGE_BUCKETS: Final = 10_000
"""The emptiest buckets the page's column is made from (the rest are fuller)."""


class PolicyHolder:
    """The policy in force and the quotas' state, which outlives a reload."""

    def __init__(self, policy: Policy, shared: SharedFactory | None = None) -> None:
        """`shared` makes the shared state for a policy that names one.

        Raises:
            ValueError: the policy names a shared state and `shared` is None.
        """
        self._factory = shared
        self.limiter: Final = Limiter()
        self.current = Policy()
        self.replace(policy)

    def replace(self, policy: Policy) -> None:
        """Put `policy` in force: calls routed from now on are judged by it.

        Raises:
            ValueError: the policy names a shared state and no factory was given.
            QuotaStoreDown: its shared state's URL cannot be used.
        """
        if policy.shared != self.current.shared or self.limiter.shared is None:
            if policy.shared is None:
                old, self.limiter.shared = self.limiter.shared, None
            else:
                if self._factory is None:
                    raise ValueError("this policy keeps quotas in a shared state: give a factory")
                old, self.limiter.shared = self.limiter.shared, self._factory(policy.shared)
            if old is not None:
                old.close()
        self.current = policy

    def view(
        self, tools: Mapping[str, CompiledTool], name: str, claims: Claims | None, policy: Policy
    ) -> dict[str, CompiledTool]:
        """The tools `policy` grants this caller, each carrying its grant (and its rule's
        time limit, where tighter than the tool's own)."""
        claims = _NO_CLAIMS if claims is None else claims
        view: dict[str, CompiledTool] = {}
        for tool_name, compiled in tools.items():
            rule = policy.rule_for(name, claims, tool_name)
            if rule is not None:
                view[tool_name] = self._granted(compiled, rule, policy, name, claims)
        return view

    def _granted(
        self, compiled: CompiledTool, rule: Rule, policy: Policy, name: str, claims: Claims
    ) -> CompiledTool:
        tool = compiled.tool
        prefix = policy.key_prefix
        buckets: list[Bucket] = []
        if rule.rate is not None:
            key = _SEP.join((prefix + "r", rule.name, name, tool.name))
            rate = rule.rate
            buckets.append(
                Bucket(key, rate.interval_ms, rate.burst, rule.name, rule.fail_closed, name)
            )
        for quota in policy.quotas_for(name, claims, tool.name):
            whose: str | None = name
            if quota.per == "identity":
                key = _SEP.join((prefix + "i", quota.name, name))
            else:
                key, whose = _SEP.join((prefix + "g", quota.name)), None
            rate = quota.rate
            buckets.append(
                Bucket(key, rate.interval_ms, rate.burst, quota.name, quota.fail_closed, whose)
            )
        limits = rule.limits
        grant = Grant(
            rule.name,
            limits.max_arguments_bytes,
            limits.max_result_bytes,
            tuple(buckets),
            self.limiter,
            rule.server_requests,
        )
        timeout = limits.timeout_s
        if timeout is not None and (tool.timeout is None or timeout < tool.timeout):
            tool = dataclasses.replace(tool, timeout=timeout)
        return dataclasses.replace(compiled, tool=tool, grant=grant)

    def nearest(self, count: int = 10) -> list[dict[str, str | float | None]]:
        """The identities nearest their quotas in this process, for the operator's page: the
        `count` emptiest buckets, each {"identity" (None for a global quota), "rule", "left"
        (the share of its burst left, 0.0 to 1.0)}."""
        return [
            {"identity": bucket.identity, "rule": bucket.rule, "left": round(left, 3)}
            for bucket, left in self.limiter.local.nearest(count)
        ]

    def nearest_by_identity(self) -> dict[str, str]:
        """Each identity's emptiest bucket, as the operator's page shows it: "RULE: N % left";
        with a shared state, read back from it (one round trip, for the buckets this process's
        calls took), every server's calls counted; else this process's own buckets."""
        shared = self.limiter.shared
        if shared is not None:
            buckets = [b for b in list(self.limiter.seen.values()) if b.identity is not None]
            try:
                ahead = shared.levels(buckets[:_SHARED_READ])
            except QuotaStoreDown:
                ahead = None  # down: this process's fallback counts, as its calls were
            if ahead is not None:
                return _emptiest(
                    (b, max(0.0, 1.0 - a / b.capacity_ms))
                    for b, a in zip(buckets, ahead, strict=False)
                )
        shown: dict[str, str] = {}
        for bucket, left in self.limiter.local.nearest(_PAGE_BUCKETS):
            if bucket.identity is not None and bucket.identity not in shown:
                shown[bucket.identity] = f"{bucket.rule}: {math.floor(left * 100)} % left"
        return shown

    def close(self) -> None:
        """Release the shared state's connections."""
        self.limiter.close()

    @asynccontextmanager
    async def serving(self) -> AsyncIterator[None]:
        """A server's lifespan: on the way out, close the connections its event loop awaited
        the shared state on."""
        try:
            yield
        finally:
            await self.limiter.aclose()


def _emptiest(filled: Iterable[tuple[Bucket, float]]) -> dict[str, str]:
    """Each identity's emptiest bucket, "RULE: N % left"."""
    lowest: dict[str, tuple[float, str]] = {}
    for bucket, left in filled:
        who = bucket.identity
        if who is not None and (who not in lowest or left < lowest[who][0]):
            lowest[who] = (left, bucket.rule)
    return {who: f"{rule}: {math.floor(left * 100)} % left" for who, (left, rule) in lowest.items()}
