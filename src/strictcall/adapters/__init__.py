"""Deprecated: the agent loop's old path. Import from `strictcall.providers` instead; this
alias warns (DeprecationWarning) and is removed in the next release."""

import warnings

from strictcall.providers import (
    agents_function_tools,
    arun_anthropic_tool_uses,
    arun_openai_tool_calls,
    arun_responses_function_calls,
    run_anthropic_tool_uses,
    run_openai_tool_calls,
    run_responses_function_calls,
)

warnings.warn(
    "strictcall.adapters is deprecated and goes in the next release: import from"
    " strictcall.providers (the same names)",
    DeprecationWarning,
    stacklevel=2,
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
