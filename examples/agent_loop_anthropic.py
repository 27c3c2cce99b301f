"""An agent loop on Anthropic's Messages API, with strictcall at the tools.

Run it from the repository with the virtualenv's python (`make install` made .venv and put
the `anthropic` client in it):

    .venv/bin/python examples/agent_loop_anthropic.py

In an environment of your own, `pip install 'strictcall[anthropic]'` first and run it with that
environment's python (a python without the `anthropic` package stops at its import).

With no arguments the real `anthropic` client talks to a stand-in model server started here on
127.0.0.1, which replays recorded responses (examples/recorded/anthropic_messages_*.json) and
answers 400 unless each request carries the tool results of the turn before, first in one user
message, as the API requires. The model's first `add_task` call has a priority outside the
schema's enum; strictcall answers it with `is_error: true` and a located error, and the model's
next call, fixed from that error, succeeds.

Against the real API, change nothing but the URL (the key comes from $ANTHROPIC_API_KEY):

    .venv/bin/python examples/agent_loop_anthropic.py --base-url https://api.anthropic.com

Each line printed is JSON: one per tool result ({"turn", "tool_use_id", "is_error", "content"})
and one for the final answer ({"final"}).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from anthropic import Anthropic
from standin import Route, StandIn, recorded
from task_tools import task_gateway

from strictcall import Gateway
from strictcall.providers import run_anthropic_tool_uses

MODEL = "claude-sonnet-5"
IDENTITY = "u1"  # the signed-in user, from the application's session: never from the model
TASK = "Add a high-priority task 'Buy milk', then tell me how many tasks I had before."
MAX_TURNS = 8


def agent_loop(client: Anthropic, gateway: Gateway) -> str:
    """Call the model until it stops asking for tools."""
    messages: list[Any] = [{"role": "user", "content": TASK}]
    tools: Any = gateway.list_tools("anthropic")
    for turn in range(1, MAX_TURNS + 1):
        message = client.messages.create(
            model=MODEL, max_tokens=1024, messages=messages, tools=tools
        )
        if message.stop_reason != "tool_use":
            return "".join(block.text for block in message.content if block.type == "text")
        messages.append({"role": "assistant", "content": message.content})
        results = run_anthropic_tool_uses(gateway, message, IDENTITY)
        messages.append({"role": "user", "content": results})
        for result in results:
            print(json.dumps({"turn": turn, **{k: result[k] for k in RESULT_KEYS}}))
    raise RuntimeError("the model kept calling tools")


RESULT_KEYS = ("tool_use_id", "is_error", "content")


# --- the stand-in's check: each request carries the previous turn's results --------------------


def check_messages(body: dict[str, Any], previous: dict[str, Any] | None) -> str | None:
    """The last message is the user's, and starts with one tool_result per tool_use of the
    previous response, in order, each with JSON text content and an is_error flag."""
    if previous is None:
        return None
    uses = [block["id"] for block in previous["content"] if block["type"] == "tool_use"]
    messages = body.get("messages", [])
    if len(messages) < 2 or messages[-1].get("role") != "user":
        return "the tool results must be in a user message after the assistant's"
    echoed = messages[-2].get("content")
    if (
        not isinstance(echoed, list)
        or [b.get("id") for b in echoed if b.get("type") == "tool_use"] != uses
    ):
        return "the assistant message with the tool_use blocks must come right before"
    content = messages[-1].get("content")
    if not isinstance(content, list) or len(content) < len(uses):
        return "tool_use ids were found without tool_result blocks immediately after"
    for block, use_id in zip(content, uses, strict=False):
        if block.get("type") != "tool_result" or block.get("tool_use_id") != use_id:
            return f"tool_use id {use_id} has no tool_result block in its place"
        if not isinstance(block.get("is_error"), bool) or not _json_text(block.get("content")):
            return f"the tool_result for {use_id} needs is_error and JSON text content"
    return None


def _json_text(content: object) -> bool:
    if not isinstance(content, str) or not content:
        return False
    try:
        json.loads(content)
    except ValueError:
        return False
    return True


def anthropic_error(message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": "invalid_request_error", "message": message}}


def stand_in() -> StandIn:
    """The stand-in with this example's recorded responses."""
    replies = [recorded(f"anthropic_messages_{n}.json") for n in (1, 2, 3)]
    return StandIn({"/v1/messages": Route(replies, check_messages)}, anthropic_error)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--base-url", help="the API's URL (default: a local stand-in)")
    args = parser.parse_args(argv)
    if args.base_url is not None:
        client = Anthropic(base_url=args.base_url)
        print(json.dumps({"final": agent_loop(client, task_gateway())}))
        return
    with stand_in() as server:
        client = Anthropic(base_url=server.url, api_key="stand-in")
        print(json.dumps({"final": agent_loop(client, task_gateway())}))


if __name__ == "__main__":
    main()
