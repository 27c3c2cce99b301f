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
    (
        "temperature-get-or",
        3,
        """
def sampling(kwargs):
    temperature = kwargs.get("temperature") or 0.7
    return {"temperature": temperature}
""",
    ),
    (
        "top-p-attribute-or",
        9,
        """
from dataclasses import dataclass

@dataclass
class ModelSettings:
    top_p: float | None = None

def request(settings: ModelSettings) -> dict:
    return {"top_p": settings.top_p or 1.0}
""",
    ),
    (
        "seed-self-or",
        8,
        """
import random

class Sampler:
    def __init__(self, seed: int | None = None) -> None:
        self.seed = seed
    def draw(self) -> int:
        return self.seed or random.randint(1, 2**31)
""",
    ),
    (
        "penalties-subscript-or",
        4,
        """
def penalties(config):
    return {
        "presence_penalty": config["presence_penalty"] or 0.5,
        "frequency_penalty": config.get("frequency_penalty") or 0.2,
    }
""",
    ),
    (
        "subscript-or-timeout",
        3,
        """
def connect(config, open_socket):
    return open_socket(config["host"], timeout=config["timeout"] or 30)
""",
    ),
    (
        "annotated-int-get-or",
        3,
        """
def retries_of(options: dict) -> int:
    retries: int = options.get("retries") or 3
    if retries == 0:
        return 0
    return retries
""",
    ),
    (
        "ternary-subscript",
        3,
        """
def limit_of(params):
    return params["limit"] if params.get("limit") else 100
""",
    ),
    (
        "walrus-comprehension",
        3,
        """
def scores(rows):
    return [s for row in rows if (s := row.get("score"))]
""",
    ),
    (
        "all-counts",
        3,
        """
def every_tool_answered(results):
    return all(r.get("result") for r in results if r.get("jsonrpc") == "2.0")
""",
    ),
    (
        "jsonrpc-id-zero",
        3,
        """
def is_notification(message):
    if message.get("jsonrpc") == "2.0" and not message.get("id"):
        return True
    return False
""",
    ),
    (
        "mcp-content-empty",
        3,
        """
def tool_failed(result):
    if not result.get("content") and not result.get("isError"):
        return True
    return False
""",
    ),
    (
        "documented-no-limit",
        9,
        """
from dataclasses import dataclass

@dataclass
class Budget:
    max_calls: int | None = None  # 0 = no limit

def calls_left(budget: Budget, used: int) -> int:
    limit = budget.max_calls or 100
    return limit - used
""",
    ),
    (
        "literal-level",
        9,
        """
from typing import Literal
from pydantic import BaseModel

class Options(BaseModel):
    verbosity: Literal[0, 1, 2] | None = None

def level(options: Options) -> int:
    return options.verbosity or 1
""",
    ),
    (
        "compared-with-zero",
        3,
        """
def delay_of(retry):
    delay = retry.get("delay") or 1.0
    if retry.get("delay") == 0:
        return None
    return delay
""",
    ),
    (
        "threshold-attribute-documented",
        12,
        """
class Retriever:
    def __init__(self, similarity: float | None = None) -> None:
        \"\"\"A retriever.

        Args:
            similarity: the cosine threshold, 0.0 to 1.0; 0.0 keeps every match.
        \"\"\"
        self.similarity = similarity

    def query(self, search, text):
        return search(text, threshold=self.similarity or 0.6)
""",
    ),
]
"""(id, the line the lint must point at, code)."""

KNOWN_MISSES: Final = frozenset[str]()
"""Planted defects `--explore` misses, as measured (docs/LINT.md)."""

SHOWN_BY_DEFAULT: Final = frozenset(
    {
        "all-counts",
        "and-chain",
        "annotated-int-get-or",
        "compared-with-zero",
        "comprehension-condition",
        "documented-no-limit",
        "guarded-subscript",
        "half-fix-is-not-none",
        "id-zero",
        "is-none-nearby",
        "json-schema",
        "jsonrpc-id-zero",
        "literal-level",
        "mcp-content-empty",
        "penalties-subscript-or",
        "pydantic-model",
        "results-plural",
        "seed-direct",
        "seed-natural",
        "seed-self-or",
        "structured-content",
        "temperature-get-or",
        "ternary-self",
        "ternary-subscript",
        "threshold-attribute-documented",
        "top-p-attribute-or",
        "walrus",
    }
)
"""Planted defects the default (what the code shows) reports, as measured (docs/LINT.md);
the others are reported by `--explore`, as guesses."""

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
