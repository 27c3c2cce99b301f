"""What strictcall needs from other libraries: the core installs light, extras fail in one line,
and where the code leans on another library's internals, a change there fails here, loudly.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import os
import subprocess
import sys
import textwrap
import venv
from collections.abc import Iterator
from pathlib import Path

import jsonschema_rs
import pytest

ROOT = Path(__file__).resolve().parent.parent
INSTALL_TIMEOUT_S = 600


@pytest.fixture(scope="module")
def core_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtualenv with `pip install strictcall` (the core alone, no extras)."""
    where = tmp_path_factory.mktemp("core-venv")
    venv.EnvBuilder(with_pip=True).create(where)
    python = where / "bin" / "python"
    installed = subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", str(ROOT)],
        capture_output=True,
        text=True,
        timeout=INSTALL_TIMEOUT_S,
        check=False,
        cwd=where,  # not the source tree: the installed package is the one imported
    )
    assert installed.returncode == 0, installed.stderr[-2000:]
    return python


def run_in(python: Path, code: str) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("COV_")}
    env.pop("PYTHONPATH", None)
    return subprocess.run(
        [str(python), "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=python.parent,
        env=env,
    )


def test_the_core_install_has_no_server_mcp_or_client_library(core_venv: Path) -> None:
    done = run_in(
        core_venv,
        "import importlib.util as u\n"
        "print(sorted(m for m in ('uvicorn', 'mcp', 'httpx', 'starlette', 'anyio',"
        " 'prometheus_client', 'opentelemetry')"
        " if u.find_spec(m) is not None))",
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_the_core_install_runs_a_call_through_the_gateway(core_venv: Path) -> None:
    done = run_in(
        core_venv,
        "from strictcall import Gateway, tool\n"
        "@tool()\n"
        "def add(a: int, b: int = 0) -> int:\n"
        "    '''Add.'''\n"
        "    return a + b\n"
        "g = Gateway([add])\n"
        'print(g.call_text(\'{"name":"add","arguments":{"a":2,"b":-2}}\', \'u1\', \'c1\'))\n'
        'answer = g.call(\'{"name":"add","arguments":{"a":1.0}}\', \'u1\', \'c2\')\n'
        "print(answer['error']['code'])",
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        'b\'{"ok":true,"call_id":"c1","result":0}\'',
        "invalid_arguments",
    ]


@pytest.mark.parametrize(
    ("code", "extra"),
    [
        ("from strictcall import Client", "client"),
        ("import strictcall.transports.mcp", "mcp"),
        ("import strictcall.server.app", "server"),
        ("import strictcall.ops.metrics", "metrics"),
    ],
    ids=["client", "mcp", "server", "metrics"],
)
def test_a_missing_extra_is_one_error_naming_it(core_venv: Path, code: str, extra: str) -> None:
    done = run_in(
        core_venv,
        "from strictcall.errors import MissingExtra\n"
        f"try:\n    {code}\n"
        "except MissingExtra as exc:\n    print(exc.extra)\n",
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == extra


def test_serve_without_its_extra_says_so_in_one_line(core_venv: Path, tmp_path: Path) -> None:
    strictcall = core_venv.parent / "strictcall"
    done = subprocess.run(
        [str(strictcall), "serve", "--port", "0", "--db", str(tmp_path / "x.sqlite3")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    [line] = done.stderr.splitlines()
    assert "strictcall[server]" in line


# --- other libraries' internals that strictcall leans on ---------------------------------------
# Each library's private parts are used from one module of strictcall's only (its "home", named
# in every message here); a release that changes one fails here, saying what and where.

UVICORN_HOME = "strictcall.server._uvicorn"
MCP_SDK_HOME = "strictcall.services.proxy._mcp_sdk"
ASYNCIO_HOME = "strictcall.services.proxy._asyncio"
MOVE_THE_BOUND = "check the new release, then move the bound in pyproject.toml"


def defined_parameters(owner: object, method: str) -> list[str] | None:
    """The parameters of `owner.method` as its source defines them (None: not defined there).
    Read from the source, not the live attribute: another library may have replaced it (the
    MCP SDK loads sse_starlette, which wraps uvicorn.Server.handle_exit at import)."""
    if not isinstance(owner, type):
        found = getattr(owner, method, None)
        return None if found is None else list(inspect.signature(found).parameters)
    for cls in owner.__mro__[:-1]:
        for node in ast.walk(ast.parse(textwrap.dedent(inspect.getsource(cls)))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == method:
                arguments = node.args
                every = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]
                return [argument.arg for argument in every]
    return None


def assert_signature(owner: object, method: str, parameters: list[str], leaned_on_by: str) -> None:
    found = defined_parameters(owner, method)
    name = f"{getattr(owner, '__module__', '')}.{getattr(owner, '__qualname__', owner)}.{method}"
    assert found is not None, f"{name} is gone; {leaned_on_by} uses it: {MOVE_THE_BOUND}"
    assert found == parameters, (
        f"{name} changed its signature (was {parameters}); {leaned_on_by} overrides or calls"
        f" it: {MOVE_THE_BOUND}"
    )


def assert_sets(owner: type, method: str, attributes: list[str], leaned_on_by: str) -> None:
    source = inspect.getsource(getattr(owner, method))
    for attribute in attributes:
        assert f"self.{attribute} =" in source or f"self.{attribute}: " in source, (
            f"{owner.__module__}.{owner.__qualname__}.{method} no longer sets {attribute}, which"
            f" {leaned_on_by} reads or sets: {MOVE_THE_BOUND}"
        )


def test_uvicorn_still_has_the_asgi_type_its_protocols_are_typed_with() -> None:
    from uvicorn import _types

    assert hasattr(_types, "ASGI3Application"), (
        f"uvicorn._types.ASGI3Application is gone; {UVICORN_HOME} imports it: {MOVE_THE_BOUND}"
    )


def test_uvicorn_still_has_the_httptools_protocol_that_strictcall_subclasses() -> None:
    from uvicorn.protocols.http import httptools_impl

    protocol = getattr(httptools_impl, "HttpToolsProtocol", None)
    assert protocol is not None, (
        "uvicorn.protocols.http.httptools_impl.HttpToolsProtocol is gone; "
        f"{UVICORN_HOME} subclasses it: {MOVE_THE_BOUND}"
    )
    for method, parameters in {
        "connection_made": ["self", "transport"],
        "connection_lost": ["self", "exc"],
        "data_received": ["self", "data"],
        "on_message_begin": ["self"],
        "on_headers_complete": ["self"],
        "on_body": ["self", "body"],
        "on_message_complete": ["self"],
        "on_response_complete": ["self"],
        "timeout_keep_alive_handler": ["self"],
        "_start_asgi_task": ["self", "cycle", "app"],
        "_unset_keepalive_if_required": ["self"],
        "_should_upgrade": ["self"],  # overridden: an Upgrade is refused, never handed on
        "_unsupported_upgrade_warning": ["self"],
    }.items():
        assert_signature(protocol, method, parameters, UVICORN_HOME)
    assert_sets(
        protocol,
        "__init__",
        [
            "loop",
            "app",
            "logger",
            "timeout_keep_alive",
            "server_state",
            "connections",
            "pipeline",
            "flow",
        ],
        UVICORN_HOME,
    )
    assert_sets(protocol, "connection_made", ["transport", "flow"], UVICORN_HOME)
    from uvicorn.protocols.http.flow_control import FlowControl
    from uvicorn.server import ServerState

    assert_signature(FlowControl, "resume_reading", ["self"], UVICORN_HOME)
    assert_sets(ServerState, "__init__", ["total_requests"], UVICORN_HOME)


def test_uvicorn_still_has_what_the_in_place_answer_leans_on() -> None:
    """An answer made in place writes uvicorn's status lines and ends its request as uvicorn's
    cycle does."""
    from uvicorn.protocols.http import httptools_impl

    status_line = getattr(httptools_impl, "STATUS_LINE", None)
    assert isinstance(status_line, dict) and status_line[200].startswith(b"HTTP/1.1 200"), (
        f"uvicorn's httptools_impl.STATUS_LINE changed; {UVICORN_HOME} writes it: {MOVE_THE_BOUND}"
    )
    assert_sets(
        httptools_impl.RequestResponseCycle,
        "__init__",
        [
            "scope",
            "body",
            "keep_alive",
            "waiting_for_100_continue",
            "default_headers",
            "response_started",
            "response_complete",
        ],
        UVICORN_HOME,
    )


def test_uvicorn_still_has_the_server_and_supervisor_strictcall_subclasses() -> None:
    import uvicorn
    from uvicorn.supervisors import multiprocess

    assert_sets(uvicorn.Server, "__init__", ["_captured_signals", "started"], UVICORN_HOME)
    assert_signature(uvicorn.Server, "handle_exit", ["self", "sig", "frame"], UVICORN_HOME)
    assert_signature(uvicorn.Server, "startup", ["self", "sockets"], UVICORN_HOME)
    assert_signature(uvicorn.Server, "shutdown", ["self", "sockets"], UVICORN_HOME)
    assert_sets(uvicorn.Server, "startup", ["servers"], UVICORN_HOME)
    supervisor = multiprocess.Multiprocess
    assert_signature(supervisor, "init_processes", ["self"], UVICORN_HOME)
    assert_sets(supervisor, "__init__", ["processes", "should_exit"], UVICORN_HOME)
    assert_signature(
        multiprocess.Process, "wait_until_ready", ["self", "timeout", "should_exit"], UVICORN_HOME
    )


def test_the_mcp_sdk_still_has_the_internals_the_proxy_leans_on() -> None:
    from mcp.os.posix import utilities
    from mcp.shared import _httpx_utils, jsonrpc_dispatcher

    made = getattr(_httpx_utils, "create_mcp_http_client", None)
    assert made is not None and "headers" in inspect.signature(made).parameters, (
        f"mcp.shared._httpx_utils.create_mcp_http_client(headers=...) changed; {MCP_SDK_HOME}"
        f" makes an HTTP upstream's client with it: {MOVE_THE_BOUND}"
    )
    assert_signature(
        utilities, "terminate_posix_process_tree", ["process", "timeout_seconds"], MCP_SDK_HOME
    )
    assert '"last_context"' in inspect.getsource(jsonrpc_dispatcher), (
        "the MCP SDK's dispatcher no longer reads `last_context` off its read stream, which "
        f"{MCP_SDK_HOME} passes on for the streams the proxy wraps: {MOVE_THE_BOUND}"
    )


def test_asyncio_still_keeps_a_subprocess_transport_the_proxy_closes() -> None:
    async def started() -> object:
        process = await asyncio.create_subprocess_exec(sys.executable, "-c", "")
        await process.wait()
        transport = getattr(process, "_transport", None)
        if transport is not None:
            transport.close()
        return transport

    transport = asyncio.run(started())
    assert callable(getattr(transport, "close", None)), (
        f"asyncio.subprocess.Process no longer keeps `_transport`; {ASYNCIO_HOME} closes it"
        " for a process without pipes of its own: check this Python's asyncio"
    )


def foreign_imports() -> Iterator[tuple[str, str]]:
    """(strictcall module, another library's module it imports), for every import in src."""
    package = ROOT / "src" / "strictcall"
    for path in sorted(package.rglob("*.py")):
        name = ".".join(path.relative_to(package.parent).with_suffix("").parts)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                found = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            else:
                continue
            for imported in found:
                if imported.split(".")[0] != "strictcall":
                    yield name.removesuffix(".__init__"), imported


def test_each_librarys_private_parts_are_imported_in_its_one_home_only() -> None:
    homes = {"uvicorn": UVICORN_HOME, "mcp": MCP_SDK_HOME}
    wrong = []
    for module, imported in foreign_imports():
        library = imported.split(".")[0]
        private = any(part.startswith("_") for part in imported.split(".")[1:-1])
        private = private or (imported.split(".")[-1].startswith("_") and "." in imported)
        if library == "uvicorn" and module != UVICORN_HOME:
            wrong.append(f"{module} imports {imported}: uvicorn is {UVICORN_HOME}'s alone")
        elif private and module != homes.get(library):
            wrong.append(f"{module} imports {imported}, another library's private part")
    assert wrong == []


def test_jsonschema_rs_still_names_every_error_kind_the_describer_reads() -> None:
    from strictcall.core.schema.describe import _REASONS

    kinds = set(dir(jsonschema_rs.ValidationErrorKind))
    missing = sorted((set(_REASONS) - {"DependentRequired", "MinContains", "MaxContains"}) - kinds)
    assert not missing, (
        f"jsonschema-rs no longer has the error kinds {missing}, which "
        "strictcall.core.schema.describe maps to reasons: check the new release, then move the "
        "bound "
        "in pyproject.toml"
    )
    assert "Custom" in kinds, "strictcall.core.schema.describe reads jsonschema-rs's Custom kind"


def test_the_running_python_is_a_supported_one() -> None:
    assert sys.version_info >= (3, 11)


def test_psycopg_still_makes_its_error_from_a_failed_libpq_result(postgres: None) -> None:
    """strictcall.storage.postgres._libpq calls psycopg.errors.error_from_result (not public)
    for the reads the loop sends through libpq itself: a failed result must still become the
    exception psycopg raises for its own calls, its class from the SQLSTATE."""
    import psycopg
    from psycopg import errors

    import pg

    make = getattr(errors, "error_from_result", None)
    assert make is not None, (
        "psycopg no longer has psycopg.errors.error_from_result, which "
        "strictcall.storage.postgres._libpq calls: check the new release, then move the bound "
        "in pyproject.toml"
    )
    assert list(inspect.signature(make).parameters) == ["result", "encoding"], (
        "psycopg's errors.error_from_result changed its signature; "
        "strictcall.storage.postgres._libpq calls it as (result, encoding=...)"
    )
    from strictcall.storage.postgres._libpq import error_of

    with psycopg.connect(pg.ADMIN_URL, autocommit=True) as conn:
        result = conn.pgconn.exec_(b"SELECT * FROM strictcall_no_such_table")
        error = error_of(result, conn.info.encoding)
    assert isinstance(error, errors.UndefinedTable), (
        "psycopg.errors.error_from_result no longer gives the SQLSTATE's class (42P01: "
        "UndefinedTable); strictcall.storage.postgres.session reads faults by that class"
    )
    assert error.sqlstate == "42P01"


def uses_name(path: Path, name: str) -> bool:
    """Whether the module at `path` reads `name` as an attribute or imports it."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Attribute) and node.attr == name:
            return True
        if isinstance(node, ast.alias) and name in (node.name, node.name.rsplit(".", 1)[-1]):
            return True
    return False


def test_psycopgs_private_part_is_used_from_one_module_only() -> None:
    src = ROOT / "src" / "strictcall"
    users = sorted(
        str(path.relative_to(src))
        for path in src.rglob("*.py")
        if uses_name(path, "error_from_result")
    )
    assert users == ["storage/postgres/_libpq.py"]
