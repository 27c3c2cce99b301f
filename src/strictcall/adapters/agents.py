"""Deprecated: use `strictcall.providers` (the package warns on import)."""

from strictcall.providers import agents_function_tools

__all__ = ["agents_function_tools"]
