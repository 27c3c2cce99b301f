"""Deprecated: use `strictcall.providers` (the package warns on import)."""

from strictcall.providers import arun_anthropic_tool_uses, run_anthropic_tool_uses

__all__ = ["arun_anthropic_tool_uses", "run_anthropic_tool_uses"]
