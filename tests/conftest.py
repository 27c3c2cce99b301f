"""Shared test settings: hypothesis runs bounded and without deadlines, so the suite stays fast
and its timing never decides a result."""

from __future__ import annotations

from hypothesis import settings

settings.register_profile("strictcall", max_examples=100, deadline=None)
settings.load_profile("strictcall")
