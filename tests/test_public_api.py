"""The public surface is deliberate: `strictcall.__all__` is sorted and names exactly what the
package exports (after httpx's test_exported_members). Some names are imported lazily, on first
use, so "exported" means: bound in the package, or resolved by its module `__getattr__`."""

from __future__ import annotations

import importlib
import inspect
import subprocess
import sys

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


# --- the short public paths: what the docs name, pinned so a refactor cannot move it --------

PUBLIC_PATHS = {
    "strictcall.providers": [
        "agents_function_tools",
        "arun_anthropic_tool_uses",
        "arun_openai_tool_calls",
        "arun_responses_function_calls",
        "run_anthropic_tool_uses",
        "run_openai_tool_calls",
        "run_responses_function_calls",
    ],
    "strictcall.proxy": [
        "ConfigError",
        "Federation",
        "FederationConfig",
        "FederationFailed",
        "Proxy",
        "UpstreamConfig",
        "UpstreamFailed",
        "UpstreamSpec",
        "federation_app",
        "federation_config",
        "load_config",
        "proxy_app",
        "serve_federation_stdio",
        "serve_proxy_stdio",
    ],
}

PINNED_ROOT = [
    "Annotations",
    "Client",
    "Content",
    "Display",
    "ErrorKind",
    "ForbiddenOrMissing",
    "Gateway",
    "Icon",
    "JSONTextError",
    "Limits",
    "ProtocolError",
    "Rejection",
    "Stage",
    "Tool",
    "ToolContext",
    "ToolError",
    "ToolFailure",
    "UncorrelatedError",
    "WouldWait",
    "audio_block",
    "handle",
    "image_block",
    "interpret_tool_reply",
    "loads_strict",
    "resource_block",
    "resource_link_block",
    "running_inline",
    "text_block",
    "tool",
]


def test_the_package_exports_exactly_the_pinned_names() -> None:
    assert strictcall.__all__ == PINNED_ROOT


@pytest.mark.parametrize("path", sorted(PUBLIC_PATHS))
def test_each_public_path_exports_exactly_its_pinned_names(path: str) -> None:
    module = importlib.import_module(path)
    assert module.__all__ == PUBLIC_PATHS[path]
    for name in module.__all__:
        assert getattr(module, name).__name__ == name


def run_python(code: str, *warning_options: str) -> subprocess.CompletedProcess[str]:
    """`code` in a fresh interpreter (an import warns once per process)."""
    return subprocess.run(
        [sys.executable, *warning_options, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_old_adapters_path_still_imports_and_warns_it_is_deprecated() -> None:
    code = (
        "import warnings\n"
        "with warnings.catch_warnings(record=True) as seen:\n"
        "    warnings.simplefilter('always')\n"
        "    from strictcall.adapters import run_openai_tool_calls\n"
        "    from strictcall.adapters.anthropic import run_anthropic_tool_uses\n"
        "from strictcall.providers import run_openai_tool_calls as new\n"
        "assert run_openai_tool_calls is new\n"
        "kinds = [w.category.__name__ for w in seen]\n"
        "assert kinds == ['DeprecationWarning'], kinds\n"
        "assert 'strictcall.providers' in str(seen[0].message)\n"
    )
    done = run_python(code)
    assert done.returncode == 0, done.stderr


def test_the_new_paths_import_without_any_warning() -> None:
    done = run_python("import strictcall.providers, strictcall.proxy", "-W", "error")
    assert done.returncode == 0, done.stderr


def test_the_old_path_is_an_error_where_warnings_are() -> None:
    done = run_python("import strictcall.adapters", "-W", "error::DeprecationWarning")
    assert done.returncode != 0 and "DeprecationWarning" in done.stderr
