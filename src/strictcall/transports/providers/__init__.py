"""The agent loop: a provider's tool calls in, that provider's tool results out, strictly.

- `run_openai_tool_calls` / `arun_openai_tool_calls`: Chat Completions `tool_calls` ->
  `{"role": "tool", "tool_call_id", "content"}` messages;
- `run_responses_function_calls` / `arun_responses_function_calls`: Responses `function_call`
  items -> `function_call_output` items;
- `run_anthropic_tool_uses` / `arun_anthropic_tool_uses`: Anthropic `tool_use` blocks ->
  `tool_result` blocks (`is_error: true` on refusals);
- `agents_function_tools`: the gateway's tools as the OpenAI Agents SDK's function tools.

Each takes the SDK's objects or plain dicts and needs no SDK installed to import.
"""

from strictcall.transports.providers.agents import agents_function_tools
from strictcall.transports.providers.anthropic import (
    arun_anthropic_tool_uses,
    run_anthropic_tool_uses,
)
from strictcall.transports.providers.openai import (
    arun_openai_tool_calls,
    arun_responses_function_calls,
    run_openai_tool_calls,
    run_responses_function_calls,
)

__all__ = [
    "agents_function_tools",
    "arun_anthropic_tool_uses",
    "arun_openai_tool_calls",
    "arun_responses_function_calls",
    "run_anthropic_tool_uses",
    "run_openai_tool_calls",
    "run_responses_function_calls",
]
