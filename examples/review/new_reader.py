"""The reader after a refactor that "only shortened" the test: presence became truth."""

from __future__ import annotations

from typing import Any


def read_result(reply: dict[str, Any]) -> dict[str, Any]:
    """{"status": "ok", "value": ...} when the reply has a result, else {"status": "missing"}."""
    if reply.get("result"):
        return {"status": "ok", "value": reply["result"]}
    return {"status": "missing"}
