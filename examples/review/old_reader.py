"""The reader before the refactor: a reply is a success when it has a "result" member."""

from __future__ import annotations

from typing import Any


def read_result(reply: dict[str, Any]) -> dict[str, Any]:
    """{"status": "ok", "value": ...} when the reply has a result, else {"status": "missing"}."""
    if "result" in reply:
        return {"status": "ok", "value": reply["result"]}
    return {"status": "missing"}
