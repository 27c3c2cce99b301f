"""The walls between the layers, kept by a test: a module's layer is its first folder under
`src/strictcall/`, and every import in the package, at module level or inside a function, must
point along the table of directions below (never up, never sideways into a sibling), so that a
wall breaks the build, not a review.

    cli          the command line: the face, may import every layer
    server       composes gateway, wires, admission and operations; runs them
    services     the notes, the seed's demo, the proxy's upstream tools (they read the store;
                 the proxy reaches its upstream through the transports' pipes)
    transports   bytes <-> calls and answers: JSON-RPC, ASGI, MCP, provider loops (no store,
                 no policy: no error code of their own)
    identity     an identity provider's tokens: settings, JWKS, JWT verification,
                 introspection, the metadata and challenges (imports the catalogue only)
    ops          metrics, spans, the page and the breakdown: read the audit's records
    audit        the one writer of the records into the store
    storage      the stores, by job (only storage.sqlite imports sqlite3, only
                 storage.postgres psycopg)
    core         strict intake, ids, tools, schemas, listings, the pipeline, the gateway, the
                 refusals, the audit record: no I/O but the tool itself
    errors       the one catalogue (strictcall/errors.py)
    client       seed 000's reader and the HTTP client: imports nothing of the server side
    review       check and lint: read user code; import the core and the client's reader
    face         strictcall/__init__.py and __main__.py: the public names, and the short public
                 paths (strictcall.providers, strictcall.proxy, the deprecated
                 strictcall.adapters) that re-export the layers' public parts
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from strictcall import errors

PACKAGE = Path(__file__).resolve().parent.parent / "src" / "strictcall"

ALLOWED: dict[str, frozenset[str]] = {
    "errors": frozenset(),
    "core": frozenset({"errors"}),
    "storage": frozenset({"core", "errors"}),
    "audit": frozenset({"storage", "core", "errors"}),
    "ops": frozenset({"audit", "storage", "core", "errors"}),
    "transports": frozenset({"core", "errors"}),
    "services": frozenset({"transports", "storage", "core", "errors"}),
    "identity": frozenset({"errors"}),
    "server": frozenset(
        {"services", "transports", "identity", "ops", "audit", "storage", "core", "errors"}
    ),
    "client": frozenset({"core", "errors"}),
    "review": frozenset({"client", "core", "errors"}),
    "cli": frozenset(
        {
            "server",
            "identity",
            "services",
            "transports",
            "ops",
            "audit",
            "storage",
            "core",
            "errors",
            "client",
            "review",
            "face",
        }
    ),
    "face": frozenset({"server", "transports", "core", "errors", "client", "services", "cli"}),
}
"""Each layer and the layers it may import (its own modules always)."""

ROOT_MODULES = {
    "strictcall": "face",
    "strictcall.__main__": "face",
    "strictcall._starting": "face",
    "strictcall.providers": "face",
    "strictcall.proxy": "face",
    "strictcall.adapters": "face",
    "strictcall.errors": "errors",
}
DRIVERS = {"sqlite3": "strictcall.storage.sqlite", "psycopg": "strictcall.storage.postgres"}
DRIVERS["psycopg_pool"] = DRIVERS["psycopg"]


def modules(package: Path) -> Iterator[tuple[str, Path]]:
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        yield name, path


def imports_of(name: str, path: Path) -> set[str]:
    """Every module `path` imports, anywhere in it (relative imports resolved)."""
    found: set[str] = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def layer_of(module: str) -> str | None:
    """The layer of a strictcall module by its first folder (None: not strictcall's, or not
    in any layer)."""
    if module in ROOT_MODULES:
        return ROOT_MODULES[module]
    parts = module.split(".")
    if parts[0] != "strictcall" or len(parts) < 2:
        return None
    if f"strictcall.{parts[1]}" in ROOT_MODULES:  # e.g. strictcall.errors.MissingExtra
        return ROOT_MODULES[f"strictcall.{parts[1]}"]
    return parts[1] if parts[1] in ALLOWED else None


def crossings(imports: dict[str, set[str]]) -> list[str]:
    """Every import that points where the table does not allow, as `module -> imported`."""
    wrong = []
    for name, found in sorted(imports.items()):
        mine = layer_of(name)
        assert mine is not None, f"{name} is in no layer"
        for imported in sorted(found):
            theirs = layer_of(imported)
            if theirs is None and imported.startswith("strictcall.") and imported != name:
                # `from strictcall import X`: the face itself, unless X is a layer folder
                theirs = "face"
            if imported == "strictcall":
                theirs = "face"
            if theirs is None or theirs == mine:
                continue
            if theirs not in ALLOWED[mine]:
                wrong.append(f"{name} ({mine}) -> {imported} ({theirs})")
    return wrong


MODULES = dict(modules(PACKAGE))
IMPORTS = {name: imports_of(name, path) for name, path in MODULES.items()}


def test_the_walker_sees_the_package() -> None:
    assert {
        "strictcall.core.gateway",
        "strictcall.transports.mcp.stdio",
        "strictcall.storage.sqlite",
    } <= set(MODULES)
    assert "sqlite3" in IMPORTS["strictcall.storage.sqlite"]
    assert "strictcall.core.pipeline.read_call" in IMPORTS["strictcall.core.gateway"]


def test_every_module_is_in_exactly_one_layer_by_its_folder() -> None:
    stray = sorted(name for name in MODULES if layer_of(name) is None)
    assert not stray, f"modules in no layer folder: {stray}"
    root = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert root == [
        "__init__.py",
        "__main__.py",
        "_starting.py",
        "errors.py",
        "providers.py",
        "proxy.py",
    ], root


def test_every_import_points_along_the_table() -> None:
    wrong = crossings(IMPORTS)
    assert not wrong, "imports against the direction table:\n" + "\n".join(wrong)


def test_the_table_points_down_only() -> None:
    # no two layers may import each other, directly or through others (a cycle is an arrow up)
    def reach(layer: str, seen: frozenset[str] = frozenset()) -> frozenset[str]:
        found = set(ALLOWED[layer])
        for below in ALLOWED[layer] - seen:
            found |= reach(below, seen | {layer})
        return frozenset(found)

    for layer in ALLOWED:
        if layer in ("face", "cli"):  # the face re-exports the command line's entry point
            continue
        assert layer not in reach(layer), f"{layer} reaches itself"


@pytest.mark.parametrize(
    ("importer", "imported"),
    [
        ("strictcall.transports.jsonrpc", "strictcall.storage.sqlite"),  # a transport, storage
        ("strictcall.core.gateway", "strictcall.services.notes"),  # an arrow up
        ("strictcall.ops.metrics", "strictcall.transports.asgi"),  # sideways
        ("strictcall.client.reply", "strictcall.server.app"),  # the client, the server side
        ("strictcall.storage.base", "strictcall.audit.log"),  # the store, its writer
    ],
)
def test_the_wall_test_fails_on_a_violation(importer: str, imported: str) -> None:
    planted = {name: set(found) for name, found in IMPORTS.items()}
    planted[importer].add(imported)
    assert any(f"-> {imported} (" in line for line in crossings(planted))


def test_a_module_outside_any_layer_is_refused(tmp_path: Path) -> None:
    package = tmp_path / "strictcall"
    (package / "core").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "core" / "__init__.py").write_text("")
    (package / "gadgets.py").write_text("from strictcall.core import x\n")
    found = dict(modules(package))
    assert [name for name in found if layer_of(name) is None] == ["strictcall.gadgets"]


@pytest.mark.parametrize("driver", sorted(DRIVERS))
def test_only_its_storage_module_imports_a_database_driver(driver: str) -> None:
    importers = sorted(
        name
        for name, found in IMPORTS.items()
        if any(m == driver or m.startswith(driver + ".") for m in found)
    )
    assert set(importers) <= {DRIVERS[driver]} | {
        name for name in MODULES if name.startswith(DRIVERS[driver] + ".")
    }, importers


def _error_kinds() -> set[str]:
    return {
        f"strictcall.errors.{attribute}"
        for attribute, value in vars(errors).items()
        if isinstance(value, errors.ErrorKind)
    }


@pytest.mark.parametrize("name", sorted(n for n in MODULES if layer_of(n) in ("transports", "ops")))
def test_transports_and_operations_choose_no_error_code(name: str) -> None:
    assert not sorted(IMPORTS[name] & _error_kinds()), f"{name} picks error kinds itself"


def test_the_walker_sees_the_proxy() -> None:
    assert {
        "strictcall.services.proxy.upstream",
        "strictcall.services.proxy.tools",
    } <= set(MODULES)
    assert "strictcall.core.gateway.Gateway" in IMPORTS["strictcall.server.proxy"]
