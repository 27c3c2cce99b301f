"""A grant: one tool as one caller may call it, with its rule's limits and the buckets its
calls take a token from. The gateway's ladder asks it three questions, each only where the
policy set something: the arguments' size (shape), the quotas (before execute), the result's
size (output)."""

from __future__ import annotations

import json
from dataclasses import dataclass

import orjson

from strictcall.core.pipeline import frozen_details
from strictcall.core.quota import Bucket, Limiter
from strictcall.errors import ARGUMENTS_TOO_LARGE, RESULT_TOO_LARGE, JSONValue, Rejection


@dataclass(frozen=True, slots=True)
class Grant:
    """The rule that granted a tool to a caller, its size limits and the caller's buckets."""

    rule: str
    max_arguments_bytes: int | None
    max_result_bytes: int | None
    buckets: tuple[Bucket, ...]
    limiter: Limiter
    server_requests: frozenset[str] | None = None
    """The rule's `server_requests` (None: every one the caller offers)."""

    @property
    def waits(self) -> bool:
        """Whether a call must await its quotas: they are shared (a round trip away), so a
        wire answering on its event loop awaits them rather than block it."""
        return bool(self.buckets) and self.limiter.shared is not None

    def check_arguments(self, arguments: dict[str, JSONValue]) -> Rejection | None:
        """The arguments, as compact JSON, within the rule's limit (stage shape)."""
        limit = self.max_arguments_bytes
        if limit is None:
            return None
        size = json_size(arguments)
        if size is not None and size <= limit:
            return None
        return Rejection(ARGUMENTS_TOO_LARGE, frozen_details({"limit": limit, "rule": self.rule}))

    def check_result(self, result: JSONValue) -> Rejection | None:
        """The result, as compact JSON, within the rule's limit (stage output)."""
        limit = self.max_result_bytes
        if limit is None:
            return None
        size = json_size(result)
        if size is not None and size <= limit:
            return None
        return Rejection(RESULT_TOO_LARGE, frozen_details({"limit": limit, "rule": self.rule}))


def json_size(value: JSONValue) -> int | None:
    """The length of `value` as compact UTF-8 JSON, or None when it is not JSON at all (then
    it is refused as too large: the output rung has withheld any such result already)."""
    try:
        return len(orjson.dumps(value))
    except orjson.JSONEncodeError:  # an integer beyond 64 bits, which the stdlib writes
        try:
            text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        except (TypeError, ValueError, RecursionError):
            return None
        return len(text.encode("utf-8", "surrogatepass"))
