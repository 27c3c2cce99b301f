"""The public surface is deliberate: `strictcall.__all__` is sorted and names exactly what the
package exports (after httpx's test_exported_members). Some names are imported lazily, on first
use, so "exported" means: bound in the package, or resolved by its module `__getattr__`."""

from __future__ import annotations

import inspect

import pytest

import strictcall

TYPING_ONLY = {"TYPE_CHECKING"}
"""Names bound for type checkers, not for users."""


def bound_public_names() -> set[str]:
    """Every name the package has bound that is not private, a submodule or typing-only."""
    return {
        name
        for name, value in vars(strictcall).items()
        if not name.startswith("_") and not inspect.ismodule(value) and name not in TYPING_ONLY
    }


def test_all_is_sorted() -> None:
    assert strictcall.__all__ == sorted(strictcall.__all__)


def test_all_has_no_repeats() -> None:
    assert len(strictcall.__all__) == len(set(strictcall.__all__))


def test_every_bound_public_name_is_in_all() -> None:
    assert bound_public_names() <= set(strictcall.__all__)


@pytest.mark.parametrize("name", strictcall.__all__)
def test_every_name_in_all_is_the_packages_own(name: str) -> None:
    value = getattr(strictcall, name)
    assert value.__module__.startswith("strictcall.")
    assert value.__name__ == name


def test_star_import_gives_exactly_all() -> None:
    namespace: dict[str, object] = {}
    exec("from strictcall import *", namespace)
    assert sorted(name for name in namespace if name != "__builtins__") == strictcall.__all__


def test_a_name_outside_all_is_not_resolved_lazily() -> None:
    with pytest.raises(AttributeError):
        getattr(strictcall, "Nonexistent")  # noqa: B009


def test_seed_entry_points_are_exported() -> None:
    assert {"handle", "interpret_tool_reply", "loads_strict", "JSONTextError"} <= set(
        strictcall.__all__
    )
