"""The agent loop, from its public path: a provider's tool calls in, that provider's tool
results out, every call through a `strictcall.Gateway`.

- `run_openai_tool_calls` / `arun_openai_tool_calls`: Chat Completions `tool_calls` ->
  `{"role": "tool", "tool_call_id", "content"}` messages;
- `run_responses_function_calls` / `arun_responses_function_calls`: Responses `function_call`
  items -> `function_call_output` items;
- `run_anthropic_tool_uses` / `arun_anthropic_tool_uses`: Anthropic `tool_use` blocks ->
  `tool_result` blocks (`is_error: true` on refusals);
- `agents_function_tools`: the gateway's tools as the OpenAI Agents SDK's function tools.

Each takes the SDK's objects or plain dicts and needs no SDK installed to import.
"""

from strictcall.transports.providers import (
    agents_function_tools,
    arun_anthropic_tool_uses,
    arun_openai_tool_calls,
    arun_responses_function_calls,
    run_anthropic_tool_uses,
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
