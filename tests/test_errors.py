"""The one catalogue: every error kind is a documented constant in strictcall.errors, listed once
in CATALOGUE, with a unique code; the foundation's (code, stage, retryable) table is pinned."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import warnings
from types import MappingProxyType

import pytest

from strictcall import errors
from strictcall.errors import CATALOGUE, PARSE_REASONS, ErrorKind, Rejection, Stage

KINDS = {name: value for name, value in vars(errors).items() if isinstance(value, ErrorKind)}


def documented_kinds() -> dict[str, ast.expr | None]:
    """Each module-level `NAME = ErrorKind(...)`, mapped to the statement right after it."""
    body = ast.parse(inspect.getsource(errors)).body
    found: dict[str, ast.expr | None] = {}
    for statement, following in zip(body, [*body[1:], None], strict=True):
        targets: list[ast.expr]
        if isinstance(statement, ast.AnnAssign):
            targets = [statement.target]
        elif isinstance(statement, ast.Assign):
            targets = statement.targets
        else:
            continue
        value = statement.value
        if not (
            isinstance(value, ast.Call)
            and isinstance(value.func, ast.Name)
            and value.func.id == "ErrorKind"
        ):
            continue
        for target in targets:
            assert isinstance(target, ast.Name)
            found[target.id] = following.value if isinstance(following, ast.Expr) else None
    return found


def test_every_error_kind_constant_is_in_the_catalogue() -> None:
    assert KINDS
    assert set(KINDS.values()) <= set(CATALOGUE)


def test_catalogue_holds_only_named_constants_each_once() -> None:
    assert len(CATALOGUE) == len(set(CATALOGUE))
    assert set(CATALOGUE) == set(KINDS.values())
    assert len(KINDS) == len(CATALOGUE)  # no kind is bound to two names


def test_error_codes_are_unique() -> None:
    codes = [kind.code for kind in CATALOGUE]
    assert len(codes) == len(set(codes))


@pytest.mark.parametrize("name", sorted(KINDS))
def test_error_kind_is_well_typed(name: str) -> None:
    kind = KINDS[name]
    assert type(kind.code) is str
    assert kind.code
    assert kind.code == kind.code.strip().lower()
    assert type(kind.retryable) is bool
    assert isinstance(kind.stage, Stage)
    assert type(kind.advice) is str
    assert kind.advice


def test_every_error_kind_constant_has_a_one_line_docstring() -> None:
    found = documented_kinds()
    assert set(found) == set(KINDS)
    for name, docstring in found.items():
        assert isinstance(docstring, ast.Constant), name
        assert isinstance(docstring.value, str), name
        assert docstring.value.strip(), name
        assert "\n" not in docstring.value, name


def test_catalogue_is_in_stage_order() -> None:
    order = list(Stage)
    positions = [order.index(kind.stage) for kind in CATALOGUE]
    assert positions == sorted(positions)


FOUNDATION = {
    "INVALID_JSON": ("invalid_json", "parse", False),
    "REQUEST_TOO_LARGE": ("request_too_large", "parse", False),
    "UNKNOWN_TOOL": ("unknown_tool", "route", False),
    "INVALID_ARGUMENTS": ("invalid_arguments", "shape", False),
    "FORBIDDEN_OR_MISSING": ("forbidden_or_missing", "resource", False),
    "INVALID_TOOL_RESULT": ("invalid_tool_result", "output", False),
}


@pytest.mark.parametrize("name", FOUNDATION)
def test_foundation_kind_has_its_pinned_code_stage_and_retryable(name: str) -> None:
    kind = KINDS[name]
    assert (kind.code, kind.stage.value, kind.retryable) == FOUNDATION[name]


def test_stages_are_pinned_in_climbing_order() -> None:
    assert [stage.value for stage in Stage] == [
        "parse",
        "route",
        "shape",
        "resource",
        "execute",
        "output",
        "auth",
        "protocol",
    ]


def test_as_error_is_exactly_code_stage_retryable_as_a_fresh_dict() -> None:
    kind = errors.INVALID_JSON
    first = kind.as_error()
    assert first == {"code": kind.code, "stage": Stage.PARSE.value, "retryable": False}
    assert list(first) == ["code", "stage", "retryable"]
    assert type(first["stage"]) is str
    first["code"] = "changed"
    assert kind.as_error()["code"] == errors.INVALID_JSON.code


def test_rejection_adds_its_details_only_when_located() -> None:
    rejection = Rejection(errors.INVALID_ARGUMENTS, MappingProxyType({"pointer": "/arguments"}))
    bare = errors.INVALID_ARGUMENTS.as_error()
    assert rejection.as_error(located=False) == bare
    assert rejection.as_error() == {**bare, "pointer": "/arguments"}
    assert Rejection(errors.UNKNOWN_TOOL).as_error() == errors.UNKNOWN_TOOL.as_error()


def test_error_kinds_and_rejections_are_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        errors.INVALID_JSON.retryable = True  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        Rejection(errors.INVALID_JSON).kind = errors.UNKNOWN_TOOL  # type: ignore[misc]


def test_every_parse_fault_is_a_parse_reason_of_the_catalogue() -> None:
    from strictcall.core.jsontext import TextFault

    assert {fault.value for fault in TextFault} <= {reason.value for reason in PARSE_REASONS}


def test_every_public_exception_strictcall_defines_is_a_strictcall_error() -> None:
    import importlib
    import inspect
    import pkgutil

    import strictcall

    found = []
    with warnings.catch_warnings():  # walking imports the deprecated alias strictcall.adapters
        warnings.filterwarnings(
            "ignore", message="strictcall.adapters is deprecated", category=DeprecationWarning
        )
        modules = list(pkgutil.walk_packages(strictcall.__path__, "strictcall."))
    for module_info in modules:
        name = module_info.name
        if name.endswith("__main__") or name.split(".")[1] == "adapters":
            continue  # the deprecated alias of strictcall.providers warns on import; defines none
        try:
            module = importlib.import_module(name)
        except errors.MissingExtra:
            continue
        for attribute, value in vars(module).items():
            if (
                inspect.isclass(value)
                and issubclass(value, BaseException)
                and value.__module__ == name
                and not attribute.startswith("_")
            ):
                found.append(value)
    assert len(found) >= 12
    for exception in found:
        assert issubclass(exception, errors.StrictcallError), exception
    tree = errors.StrictcallError.__doc__ or ""
    for exception in found:
        assert exception.__name__ in tree, exception
