"""The half fix a review often gets next: `is not None` brings back 0, False, "" and [],
but an explicit null is still read as a missing result."""

from __future__ import annotations

from typing import Any


def read_result(reply: dict[str, Any]) -> dict[str, Any]:
    """{"status": "ok", "value": ...} when the reply has a result, else {"status": "missing"}."""
    if reply.get("result") is not None:
        return {"status": "ok", "value": reply["result"]}
    return {"status": "missing"}
