"""Readers for the `strictcall check` tests: the seed's reply reader, its two refactors, an
equivalent rewrite, and functions that raise, hang or change their input."""

from __future__ import annotations

from typing import Any


def read_by_presence(reply: dict[str, Any]) -> dict[str, Any]:
    """The seed's success branch: a result is present."""
    if "result" in reply:
        return {"status": "ok", "value": reply["result"]}
    return {"status": "missing"}


def read_by_truth(reply: dict[str, Any]) -> dict[str, Any]:
    """The refactor: a result is truthy."""
    if reply.get("result"):  # strictcall: ignore[SC101] -- the seed's bug, on purpose
        return {"status": "ok", "value": reply["result"]}
    return {"status": "missing"}


def read_by_not_none(reply: dict[str, Any]) -> dict[str, Any]:
    """The half fix: a result is not None."""
    if reply.get("result") is not None:  # strictcall: ignore[SC104] -- the half fix
        return {"status": "ok", "value": reply["result"]}
    return {"status": "missing"}


def read_by_lookup(reply: dict[str, Any]) -> dict[str, Any]:
    """An equivalent rewrite: try the lookup."""
    try:
        value = reply["result"]
    except KeyError:
        return {"status": "missing"}
    return {"status": "ok", "value": value}


def read_or_raise(reply: dict[str, Any]) -> dict[str, Any]:
    """Raises KeyError where the presence reader answers missing."""
    return {"status": "ok", "value": reply["result"]}


def read_forever(reply: dict[str, Any]) -> dict[str, Any]:
    """Never returns when the result is present."""
    while "result" in reply:
        pass
    return {"status": "missing"}


def read_and_pop(reply: dict[str, Any]) -> dict[str, Any]:
    """Answers as the presence reader but takes the result out of the reply."""
    if "result" in reply:
        return {"status": "ok", "value": reply.pop("result")}
    return {"status": "missing"}


def read_pair(reply: dict[str, Any], expected_id: str) -> dict[str, Any]:
    """Takes two arguments, where the others take one."""
    return read_by_presence(reply)


def seed_interpret(reply: Any, expected_id: Any) -> dict[str, Any]:
    """Seed 000's interpret_tool_reply, as the seed writes it."""
    if not isinstance(reply, dict):
        return {"status": "invalid"}
    if reply.get("jsonrpc") != "2.0" or reply.get("id") != expected_id:
        return {"status": "invalid"}
    has_result = "result" in reply
    has_error = "error" in reply
    if has_result == has_error:
        return {"status": "invalid"}
    if has_result:
        return {"status": "ok", "value": reply["result"]}
    error = reply["error"]
    if (
        not isinstance(error, dict)
        or type(error.get("code")) is not int
        or not isinstance(error.get("message"), str)
    ):
        return {"status": "invalid"}
    return {"status": "error", "error": error}


def seed_interpret_by_truth(reply: Any, expected_id: Any) -> dict[str, Any]:
    """The seed's reader with `has_result = bool(reply.get("result"))`."""
    if not isinstance(reply, dict):
        return {"status": "invalid"}
    if reply.get("jsonrpc") != "2.0" or reply.get("id") != expected_id:
        return {"status": "invalid"}
    has_result = bool(reply.get("result"))  # strictcall: ignore[SC101] -- the seed's bug
    has_error = "error" in reply
    if has_result == has_error:
        return {"status": "invalid"}
    if has_result:
        return {"status": "ok", "value": reply["result"]}
    error = reply["error"]
    if (
        not isinstance(error, dict)
        or type(error.get("code")) is not int
        or not isinstance(error.get("message"), str)
    ):
        return {"status": "invalid"}
    return {"status": "error", "error": error}


def seed_interpret_by_not_none(reply: Any, expected_id: Any) -> dict[str, Any]:
    """The seed's reader with `has_result = reply.get("result") is not None`."""
    if not isinstance(reply, dict):
        return {"status": "invalid"}
    if reply.get("jsonrpc") != "2.0" or reply.get("id") != expected_id:
        return {"status": "invalid"}
    has_result = reply.get("result") is not None  # strictcall: ignore[SC104] -- the half fix
    has_error = "error" in reply
    if has_result == has_error:
        return {"status": "invalid"}
    if has_result:
        return {"status": "ok", "value": reply["result"]}
    error = reply["error"]
    if (
        not isinstance(error, dict)
        or type(error.get("code")) is not int
        or not isinstance(error.get("message"), str)
    ):
        return {"status": "invalid"}
    return {"status": "error", "error": error}


def strict_reply(reply: Any, expected_id: str | int) -> dict[str, Any]:
    """strictcall's reply contract in other words: every key looked up by presence."""
    from strictcall.client.reply import same_id
    from strictcall.core.ids import check_request_id

    check_request_id(expected_id)
    if type(reply) is not dict:
        return {"status": "invalid"}
    if "jsonrpc" not in reply or reply["jsonrpc"] != "2.0":
        return {"status": "invalid"}
    if "id" not in reply or not same_id(reply["id"], expected_id):
        return {"status": "invalid"}
    if ("result" in reply) == ("error" in reply):
        return {"status": "invalid"}
    if "result" in reply:
        return {"status": "ok", "value": reply["result"]}
    error = reply["error"]
    if type(error) is not dict or "code" not in error or "message" not in error:
        return {"status": "invalid"}
    if type(error["code"]) is not int or not isinstance(error["message"], str):
        return {"status": "invalid"}
    return {"status": "error", "error": error}


def total_by_presence(rows: list[dict[str, int]]) -> int:
    """Sums each row's count, 0 included; a row without one counts as 1."""
    return sum(row.get("count", 1) for row in rows)


def total_by_truth(rows: list[dict[str, int]]) -> int:
    """The refactor: a count of 0 now counts as 1."""
    return sum(row.get("count") or 1 for row in rows)  # strictcall: ignore -- on purpose


def half(value: float) -> float:
    """Half of a float."""
    return value / 2


def half_by_truth(value: float) -> float:
    """Half of a float, but a falsy one becomes 0.0 (and -0.0 loses its sign)."""
    return value / 2 if value else 0.0


def exact(value: int) -> int:
    """The int itself."""
    return value


def through_float(value: int) -> int:
    """The int through a float: exact below 2**53 only."""
    return int(float(value))


def noisy_reader(reply: dict[str, Any]) -> dict[str, Any]:
    """The seed's truth refactor, in a function that reads other keys too."""
    trace = reply.get("trace")
    if reply.get("result"):  # strictcall: ignore -- on purpose
        return {"status": "ok", "value": reply["result"], "traced": trace is not None}
    return {"status": "missing", "traced": trace is not None}


def noisy_presence(reply: dict[str, Any]) -> dict[str, Any]:
    """The seed's presence reader, in a function that reads other keys too."""
    trace = reply.get("trace")
    if "result" in reply:
        return {"status": "ok", "value": reply["result"], "traced": trace is not None}
    return {"status": "missing", "traced": trace is not None}
