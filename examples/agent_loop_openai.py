"""An agent loop on OpenAI's API, Chat Completions and Responses, with strictcall at the tools.

Run it from the repository with the virtualenv's python (`make install` made .venv and put
the `openai` client in it):

    .venv/bin/python examples/agent_loop_openai.py

In an environment of your own, `pip install 'strictcall[openai]'` first and run it with that
environment's python (a python without the `openai` package stops at its import).

With no arguments the real `openai` client talks to a stand-in model server started here on
127.0.0.1, which replays recorded responses (examples/recorded/openai_*.json) and answers 400
unless each request carries the tool results of the turn before. In both loops the model's
first call is bad (an unexpected member `due`; a duplicate `priority`, which `json.loads` would
have taken silently), strictcall refuses it with a located error, and the model's next call,
fixed from that error, succeeds. (With `strict: true` OpenAI's own decoding keeps a model from
the first mistake; models and servers without it do make them.)

Against the real API, change nothing but the URL (the key comes from $OPENAI_API_KEY):

    .venv/bin/python examples/agent_loop_openai.py --base-url https://api.openai.com/v1

Each line printed is JSON: one per tool result ({"api", "turn", "call_id", "content"}) and one
per loop's final answer ({"api", "final"}).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from openai import OpenAI
from standin import Route, StandIn, recorded
from task_tools import task_gateway

from strictcall import Gateway
from strictcall.providers import run_openai_tool_calls, run_responses_function_calls

MODEL = "gpt-5.4-mini"
IDENTITY = "u1"  # the signed-in user, from the application's session: never from the model
TASK = "Add a high-priority task 'Buy milk', then tell me how many tasks I had before."
MAX_TURNS = 8


def chat_loop(client: OpenAI, gateway: Gateway) -> str:
    """Chat Completions: call the model until it answers without tool calls."""
    messages: list[Any] = [{"role": "user", "content": TASK}]
    tools: Any = gateway.list_tools("openai")
    for turn in range(1, MAX_TURNS + 1):
        message = client.chat.completions.create(model=MODEL, messages=messages, tools=tools)
        reply = message.choices[0].message
        if not reply.tool_calls:
            return reply.content or ""
        messages.append(reply)
        results = run_openai_tool_calls(gateway, reply, IDENTITY)
        messages.extend(results)
        for result in results:
            emit("chat", turn, result["tool_call_id"], result["content"])
    raise RuntimeError("the model kept calling tools")


def responses_loop(client: OpenAI, gateway: Gateway) -> str:
    """Responses: call the model until its output holds no function calls."""
    items: list[Any] = [{"role": "user", "content": TASK}]
    tools: Any = gateway.list_tools("openai-responses")
    for turn in range(1, MAX_TURNS + 1):
        response = client.responses.create(model=MODEL, input=items, tools=tools)
        if not any(item.type == "function_call" for item in response.output):
            return response.output_text
        items += response.output
        results = run_responses_function_calls(gateway, response, IDENTITY)
        items += results
        for result in results:
            emit("responses", turn, result["call_id"], result["output"])
    raise RuntimeError("the model kept calling tools")


def emit(api: str, turn: int, call_id: object, content: object) -> None:
    print(json.dumps({"api": api, "turn": turn, "call_id": call_id, "content": content}))


# --- the stand-in's checks: each request carries the previous turn's results -------------------


def check_chat(body: dict[str, Any], previous: dict[str, Any] | None) -> str | None:
    """Every tool call of the previous response is echoed and answered by a tool message."""
    if previous is None:
        return None
    messages = body.get("messages", [])
    echoed = {
        call.get("id")
        for message in messages
        if message.get("role") == "assistant"
        for call in message.get("tool_calls") or []
    }
    answers = {m.get("tool_call_id"): m for m in messages if m.get("role") == "tool"}
    for call in previous["choices"][0]["message"].get("tool_calls") or []:
        if call["id"] not in echoed:
            return f"the assistant message with tool call {call['id']} is missing"
        answer = answers.get(call["id"])
        if answer is None:
            return f"no tool message responds to tool_call_id {call['id']}"
        if not _json_text(answer.get("content")):
            return f"the tool message for {call['id']} is not JSON text"
    return None


def check_responses(body: dict[str, Any], previous: dict[str, Any] | None) -> str | None:
    """Every function call of the previous response is echoed and has its output item."""
    if previous is None:
        return None
    items = body.get("input", [])
    echoed = {i.get("call_id") for i in items if i.get("type") == "function_call"}
    outputs = {i.get("call_id"): i for i in items if i.get("type") == "function_call_output"}
    for item in previous["output"]:
        if item["type"] != "function_call":
            continue
        if item["call_id"] not in echoed:
            return f"the function call {item['call_id']} is missing from the input"
        output = outputs.get(item["call_id"])
        if output is None:
            return f"no function_call_output for call_id {item['call_id']}"
        if not _json_text(output.get("output")):
            return f"the output for {item['call_id']} is not JSON text"
    return None


def _json_text(content: object) -> bool:
    if not isinstance(content, str) or not content:
        return False
    try:
        json.loads(content)
    except ValueError:
        return False
    return True


def openai_error(message: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": "invalid_request_error", "param": None,
                      "code": None}}  # fmt: skip


def stand_in() -> StandIn:
    """The stand-in with this example's recorded responses."""
    return StandIn(
        {
            "/v1/chat/completions": Route(
                [recorded(f"openai_chat_{n}.json") for n in (1, 2, 3)], check_chat
            ),
            "/v1/responses": Route(
                [recorded(f"openai_responses_{n}.json") for n in (1, 2, 3)], check_responses
            ),
        },
        openai_error,
    )


def run(client: OpenAI) -> None:
    print(json.dumps({"api": "chat", "final": chat_loop(client, task_gateway())}))
    print(json.dumps({"api": "responses", "final": responses_loop(client, task_gateway())}))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--base-url", help="the API's URL (default: a local stand-in)")
    args = parser.parse_args(argv)
    if args.base_url is not None:
        run(OpenAI(base_url=args.base_url))
        return
    with stand_in() as server:
        run(OpenAI(base_url=server.url + "/v1", api_key="stand-in"))


if __name__ == "__main__":
    main()
