"""Deprecated: use `strictcall.providers` (the package warns on import)."""

from strictcall.providers import (
    arun_openai_tool_calls,
    arun_responses_function_calls,
    run_openai_tool_calls,
    run_responses_function_calls,
)

__all__ = [
    "arun_openai_tool_calls",
    "arun_responses_function_calls",
    "run_openai_tool_calls",
    "run_responses_function_calls",
]
