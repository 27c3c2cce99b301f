"""The planted set behind docs/LINT.md's recall figure: truthiness-for-presence defects written
in the forms issue 30 lists (and a few more), each with the line the lint must point at, and
correct look-alikes on which it must stay silent. Data only: test_review_lint runs them."""

from __future__ import annotations

from typing import Final

DEFECTS: Final[list[tuple[str, int, str]]] = [
    (
        "seed-natural",
        4,
        """
def interpret(reply: dict, expected_id: str) -> dict:
    result = reply.get("result")
    if not result:
        return {"status": "error", "reason": "no result"}
    return {"status": "ok", "value": result}
""",
    ),
    (
        "seed-direct",
        3,
        """
def interpret(reply):
    if reply.get("result"):
        return {"status": "ok", "value": reply["result"]}
    return {"status": "missing"}
""",
    ),
    (
        "walrus",
        3,
        """
def count_of(reply):
    if (count := reply.get("count")):
        return {"count": count}
    return {"error": "no count"}
""",
    ),
    (
        "annotated-then-or",
        4,
        """
def timeout_of(config: dict) -> float:
    timeout: float | None = config.get("timeout")
    return timeout or 30.0
""",
    ),
    (
        "tuple-unpacking",
        4,
        """
def page(params):
    limit, offset = params.get("limit"), params.get("offset")
    return {"limit": limit or 50, "offset": offset or 0}
""",
    ),
    (
        "all-generator",
        3,
        """
def all_answered(replies):
    return all(r.get("result") for r in replies)
""",
    ),
    (
        "any-generator",
        3,
        """
def any_exit_code(runs):
    if any(run.get("exit_code") for run in runs):
        return "failed"
    return "ok"
""",
    ),
    (
        "filter-none",
        3,
        """
def ids_of(messages):
    return list(filter(None, (m.get("id") for m in messages)))
""",
    ),
    (
        "ternary-self",
        4,
        """
def default_of(schema):
    default = schema.get("default")
    return default if default else None
""",
    ),
    (
        "attribute-or",
        9,
        """
from dataclasses import dataclass

@dataclass
class Options:
    timeout: float | None = None

def deadline(options: Options) -> float:
    return options.timeout or 60.0
""",
    ),
    (
        "attribute-or-untyped",
        3,
        """
def deadline(options):
    return options.timeout or 60.0
""",
    ),
    (
        "id-zero",
        4,
        """
def matches(reply, expected_id):
    reply_id = reply.get("id")
    if not reply_id:
        return False
    return reply_id == expected_id
""",
    ),
    (
        "structured-content",
        4,
        """
def content_of(result: dict) -> object:
    structured = result.get("structuredContent")
    if structured:
        return structured
    return result.get("content")
""",
    ),
    (
        "exit-code-or",
        3,
        """
def exit_code(outcome):
    return outcome.get("exit_code") or 1
""",
    ),
    (
        "remaining-or",
        3,
        """
def remaining(quota):
    left = quota.get("remaining") or 100
    return left
""",
    ),
    (
        "results-plural",
        4,
        """
def search(response):
    results = response.get("results")
    if not results:
        raise LookupError("search failed")
    return results
""",
    ),
    (
        "typeddict",
        9,
        """
from typing import TypedDict

class Usage(TypedDict, total=False):
    input_tokens: int
    output_tokens: int

def tokens(usage: Usage) -> int:
    return usage.get("input_tokens") or -1
""",
    ),
    (
        "pydantic-model",
        8,
        """
from pydantic import BaseModel

class Settings(BaseModel):
    temperature: float | None = None

def temperature_of(settings: Settings) -> float:
    return settings.temperature or 0.7
""",
    ),
    (
        "json-schema",
        10,
        """
SCHEMA = {
    "type": "object",
    "properties": {"retries": {"type": "integer"}},
}


def retries_of(arguments):
    retries = arguments.get("retries")
    return retries or 3
""",
    ),
    (
        "guarded-subscript",
        4,
        """
def value_of(reply):
    if "value" in reply:
        if not reply["value"]:
            return {"status": "empty"}
        return {"status": "ok", "value": reply["value"]}
    return {"status": "missing"}
""",
    ),
    (
        "and-chain",
        3,
        """
def result_of(reply, expected_id):
    if reply.get("id") == expected_id and reply.get("result"):
        return reply["result"]
    return None
""",
    ),
    (
        "comprehension-condition",
        3,
        """
def scores(rows):
    return [row["score"] for row in rows if row.get("score")]
""",
    ),
    (
        "bool-call",
        4,
        """
def has_result(reply):
    value = reply.get("result")
    return bool(value)
""",
    ),
    (
        "is-none-nearby",
        6,
        """
def limit_of(params):
    limit = params.get("limit")
    if limit is None:
        return 10
    if not limit:
        return 10
    return limit
""",
    ),
    (
        "while-remaining",
        4,
        """
def drain(state, step):
    left = state.get("remaining")
    while left:
        left = step(left - 1)
    return left
""",
    ),
    (
        "half-fix-is-not-none",
        5,
        """
from typing import Any

def read(reply: dict[str, Any]) -> dict[str, Any]:
    if reply.get("result") is not None:
        return {"status": "ok", "value": reply["result"]}
    return {"status": "missing"}
""",
    ),
]
"""(id, the line the lint must point at, code)."""

KNOWN_MISSES: Final = frozenset({"bool-call"})
"""Planted defects the default confidence misses, as measured (docs/LINT.md): `bool()` alone
is no evidence (on real code every `bool(d.get(k))` read was a flag)."""

LOOK_ALIKES: Final[list[tuple[str, str]]] = [
    (
        "presence",
        """
def interpret(reply):
    if "result" in reply:
        return {"status": "ok", "value": reply["result"]}
    return {"status": "missing"}
""",
    ),
    (
        "empty-default",
        """
def items_of(reply):
    return reply.get("results") or []
""",
    ),
    (
        "get-with-default",
        """
def timeout_of(config):
    return config.get("timeout", 30)
""",
    ),
    (
        "none-default",
        """
def timeout_of(config):
    timeout = config.get("timeout")
    return 30 if timeout is None else timeout
""",
    ),
    (
        "flag",
        """
def streaming(options):
    if options.get("stream"):
        return "sse"
    return "json"
""",
    ),
    (
        "object-registry",
        """
class Registry:
    def __init__(self) -> None:
        self._tools: dict[str, Tool] = {}

    def add(self, tool):
        existing = self._tools.get(tool.name)
        if existing:
            return existing
        self._tools[tool.name] = tool
        return tool
""",
    ),
    (
        "iterated-list",
        """
def names(reply):
    tools = reply.get("tools")
    if not tools:
        return []
    return [tool["name"] for tool in tools]
""",
    ),
    (
        "environment",
        """
import os

def port():
    return os.environ.get("PORT") or "8000"
""",
    ),
    (
        "alias-chain",
        """
def prompt_tokens(usage):
    return usage.get("input_tokens") or usage.get("prompt_tokens")
""",
    ),
    (
        "optional-object-attribute",
        """
from dataclasses import dataclass

@dataclass
class Session:
    client: Client | None = None

def close(session: Session) -> None:
    if session.client:
        session.client.close()
""",
    ),
    (
        "non-optional-count",
        """
from dataclasses import dataclass

@dataclass
class Usage:
    requests: int = 0

def describe(usage: Usage) -> str:
    return "used" if usage.requests else "unused"
""",
    ),
    (
        "fill-in",
        """
def fill(config):
    if config.get("timeout") is None:
        config["timeout"] = 30
    return config
""",
    ),
]
"""(id, code) on which the lint must find nothing."""
