"""The walls between the layers, kept by a test: every import in the package, at module level or
inside a function, is read from the source, so that a wall breaks the build, not a review.

    the core      errors, ids, jsontext, schema, tools, pipeline, gateway, listing, seed, reply,
                  refusals, workers: no transport, no store, no service, no database driver
    storage       only storage.sqlite imports sqlite3, only storage.postgres imports psycopg
    the reader    reply imports nothing of the server side
    the sides     the server side imports nothing of the client, the client nothing of the server
    transports    choose no error code: they import no ErrorKind of the catalogue (the agent
                  loop adapters are a transport: a provider's turn in, its results out)
    operations    metrics, spans, the page, the breakdown: read what the audit records; nothing
                  below them imports them but the server that wires them and the commands
    the proxy     serves an upstream's tools through the core and the transports; nothing but
                  the command line imports it, and it imports nothing of strictcall's client
                  (it speaks to its upstream through the MCP SDK's)
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from strictcall import errors

PACKAGE = Path(__file__).resolve().parent.parent / "src" / "strictcall"

CORE = {
    "strictcall.errors",
    "strictcall.ids",
    "strictcall.jsontext",
    "strictcall.schema",
    "strictcall.tools",
    "strictcall.pipeline",
    "strictcall.gateway",
    "strictcall.listing",
    "strictcall.seed",
    "strictcall.reply",
    "strictcall.refusals",
    "strictcall.workers",
}
TRANSPORTS = {
    "strictcall.jsonrpc",
    "strictcall.http",
    "strictcall.mcp",
    "strictcall.server",
    "strictcall.coalesce",
    "strictcall.guard",
    "strictcall.edge",
    "strictcall.adapters",
    "strictcall.listen",
    "strictcall.processes",
}
SERVICE = {"strictcall.notes", "strictcall.audit", "strictcall.storage"}
CLIENT = {"strictcall.client"}
PROXY = {"strictcall.proxy"}
FACE = {"strictcall.cli", "strictcall.commands", "strictcall.__main__"}
OPERATIONS = {"strictcall.ops"}
"""Metrics, spans, the operator page and the audit's breakdown (`strictcall.ops`)."""
DRIVERS = {"sqlite3": "strictcall.storage.sqlite", "psycopg": "strictcall.storage.postgres"}
DRIVERS["psycopg_pool"] = DRIVERS["psycopg"]


def modules() -> Iterator[tuple[str, Path]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
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


def in_group(module: str, group: set[str]) -> bool:
    return any(module == member or module.startswith(member + ".") for member in group)


MODULES = dict(modules())
IMPORTS = {name: imports_of(name, path) for name, path in MODULES.items()}


def test_the_walker_sees_the_package() -> None:
    assert {"strictcall.gateway", "strictcall.mcp.stdio", "strictcall.storage.sqlite"} <= set(
        MODULES
    )
    assert "sqlite3" in IMPORTS["strictcall.storage.sqlite"]
    assert "strictcall.pipeline.read_call" in IMPORTS["strictcall.gateway"]


def test_every_module_belongs_to_one_layer() -> None:
    for name in MODULES:
        if name == "strictcall":
            continue
        groups = [CORE, TRANSPORTS, SERVICE, CLIENT, PROXY, FACE, OPERATIONS]
        assert sum(in_group(name, group) for group in groups) <= 1, name


@pytest.mark.parametrize("name", sorted(n for n in MODULES if in_group(n, CORE)))
def test_the_core_imports_no_transport_store_service_or_face(name: str) -> None:
    walls = TRANSPORTS | SERVICE | CLIENT | PROXY | FACE | OPERATIONS
    crossing = sorted(m for m in IMPORTS[name] if in_group(m, walls))
    assert not crossing, f"{name} imports {crossing}"


@pytest.mark.parametrize("driver", sorted(DRIVERS))
def test_only_its_storage_module_imports_a_database_driver(driver: str) -> None:
    importers = sorted(
        name
        for name, found in IMPORTS.items()
        if in_group(driver, found) or any(m == driver or m.startswith(driver + ".") for m in found)
    )
    assert set(importers) <= {DRIVERS[driver]}, importers


def test_the_reply_reader_imports_nothing_of_the_server_side() -> None:
    strictcall_imports = {m for m in IMPORTS["strictcall.reply"] if m.startswith("strictcall")}
    assert all(in_group(m, {"strictcall.errors", "strictcall.ids"}) for m in strictcall_imports)


@pytest.mark.parametrize(
    "name", sorted(n for n in MODULES if in_group(n, TRANSPORTS | SERVICE | OPERATIONS))
)
def test_the_server_side_imports_nothing_of_the_client(name: str) -> None:
    assert not [m for m in IMPORTS[name] if in_group(m, CLIENT)]


def test_the_client_imports_nothing_of_the_server_side() -> None:
    server_side = TRANSPORTS | SERVICE | OPERATIONS
    assert not [m for m in IMPORTS["strictcall.client"] if in_group(m, server_side)]


@pytest.mark.parametrize("name", sorted(n for n in MODULES if in_group(n, TRANSPORTS | SERVICE)))
def test_only_the_server_wires_the_operations_in(name: str) -> None:
    # the transports and the service know nothing of metrics, spans or the page: the server
    # module builds them around the audit's records (and the commands read the breakdown)
    if name == "strictcall.server":
        return
    assert not [m for m in IMPORTS[name] if in_group(m, OPERATIONS)], name


@pytest.mark.parametrize("name", sorted(n for n in MODULES if in_group(n, OPERATIONS)))
def test_operations_choose_no_error_code(name: str) -> None:
    kinds = {
        f"strictcall.errors.{attribute}"
        for attribute, value in vars(errors).items()
        if isinstance(value, errors.ErrorKind)
    }
    assert not sorted(IMPORTS[name] & kinds), f"{name} picks error kinds itself"


@pytest.mark.parametrize("name", sorted(n for n in MODULES if in_group(n, TRANSPORTS)))
def test_a_transport_chooses_no_error_code(name: str) -> None:
    kinds = {
        f"strictcall.errors.{attribute}"
        for attribute, value in vars(errors).items()
        if isinstance(value, errors.ErrorKind)
    }
    assert not sorted(IMPORTS[name] & kinds), f"{name} picks error kinds itself"


@pytest.mark.parametrize(
    "name", sorted(n for n in MODULES if in_group(n, CORE | TRANSPORTS | SERVICE | CLIENT))
)
def test_nothing_but_the_command_line_imports_the_proxy(name: str) -> None:
    assert not [m for m in IMPORTS[name] if in_group(m, PROXY)], name


@pytest.mark.parametrize("name", sorted(n for n in MODULES if in_group(n, PROXY)))
def test_the_proxy_imports_nothing_of_the_client(name: str) -> None:
    assert not [m for m in IMPORTS[name] if in_group(m, CLIENT)], name


def test_the_walker_sees_the_proxy() -> None:
    assert {"strictcall.proxy.upstream", "strictcall.proxy.tools"} <= set(MODULES)
    assert "strictcall.gateway.Gateway" in IMPORTS["strictcall.proxy.run"]
    assert "strictcall.proxy" in IMPORTS["strictcall.commands"]
