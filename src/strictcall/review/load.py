"""Finding the function a `module:function` or `path.py:function` spec names, or saying why not."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any


class _Refused(Exception):
    """Ends a load early; its message becomes the NotLoaded answer."""


@dataclass(frozen=True, slots=True)
class NotLoaded:
    """Why a spec names no function, in one line for the user."""

    message: str


@dataclass(frozen=True, slots=True)
class Loaded:
    """A function found by its spec, with where it came from."""

    spec: str
    function: Callable[..., Any]
    path: Path | None
    """The file it was loaded from, when the spec named a file."""
    module: str | None
    """The importable module name, when the spec named a module."""
    attribute: str


def split_spec(spec: str) -> tuple[str, str]:
    """The module or path part and the attribute part of a spec."""
    where, sep, attribute = spec.rpartition(":")
    if not sep or not where or not attribute:
        raise _Refused(f"{spec!r} is not module:function or path.py:function")
    return where, attribute


def is_path(where: str) -> bool:
    """True when the module part of a spec is a file path rather than a module name."""
    return where.endswith(".py") or "/" in where or "\\" in where


def load_function(spec: str, *, label: str) -> Loaded | NotLoaded:
    """Import the function a spec names, or say in one line why it cannot."""
    try:
        return _load(spec, label)
    except _Refused as exc:
        return NotLoaded(str(exc))


def _load(spec: str, label: str) -> Loaded:
    where, attribute = split_spec(spec)
    path: Path | None = None
    module_name: str | None = None
    try:
        if is_path(where):
            path = Path(where).resolve()
            if not path.is_file():
                raise _Refused(f"{label} {spec}: no such file {where}")
            module = _import_path(path, label)
        else:
            module_name = where
            module = importlib.import_module(where)
    except _Refused:
        raise
    except SyntaxError as exc:
        raise _Refused(
            f"{label} {spec}: cannot be imported: SyntaxError at line {exc.lineno}"
        ) from None
    except ModuleNotFoundError as exc:
        raise _Refused(
            f"{label} {spec}: cannot be imported: no module named {exc.name!r}"
        ) from None
    except BaseException as exc:  # the module's own code ran and failed: say so in one line
        if isinstance(exc, KeyboardInterrupt):
            raise
        raise _Refused(
            f"{label} {spec}: cannot be imported: {type(exc).__name__}{_where(exc)}"
        ) from None
    target: object = module
    for part in attribute.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise _Refused(f"{label} {spec}: {where} has no {attribute!r}") from None
    if not callable(target):
        raise _Refused(f"{label} {spec}: {attribute!r} is not a function")
    if inspect.iscoroutinefunction(target):
        raise _Refused(f"{label} {spec}: {attribute!r} is async; check takes plain functions")
    return Loaded(spec, target, path, module_name, attribute)


def _import_path(path: Path, label: str) -> object:
    # Two files may share a stem (old/reader.py, new/reader.py): each gets a name of its own.
    name = f"_strictcall_check_{label.lower()}_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise _Refused(f"{label} {path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    # Its siblings import as they would when the file runs as a script.
    sys.path.insert(0, str(path.parent))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(path.parent))
    return module


def _where(exc: BaseException) -> str:
    tb = exc.__traceback__
    last = None
    while tb is not None:
        last = tb
        tb = tb.tb_next
    if last is None:
        return ""
    return f" ({Path(last.tb_frame.f_code.co_filename).name} line {last.tb_lineno})"
