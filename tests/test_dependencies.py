"""What strictcall needs from other libraries: the core installs light, extras fail in one line,
and where the code leans on another library's internals, a change there fails here, loudly.
"""

from __future__ import annotations

import ast
import inspect
import os
import subprocess
import sys
import venv
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


def test_uvicorn_still_has_the_httptools_protocol_that_coalesce_subclasses() -> None:
    from uvicorn.protocols.http import httptools_impl

    protocol = getattr(httptools_impl, "HttpToolsProtocol", None)
    assert protocol is not None, (
        "uvicorn no longer has uvicorn.protocols.http.httptools_impl.HttpToolsProtocol, which "
        "strictcall.server.coalesce subclasses: check the new release, then move the bound in "
        "pyproject.toml"
    )
    parameters = list(inspect.signature(protocol.connection_made).parameters)
    assert parameters == ["self", "transport"], (
        "uvicorn's HttpToolsProtocol.connection_made changed its signature; "
        "strictcall.server.coalesce overrides it"
    )
    assert "self.loop =" in inspect.getsource(protocol.__init__), (
        "uvicorn's HttpToolsProtocol no longer sets self.loop, which "
        "strictcall.server.coalesce reads"
    )


def test_uvicorn_still_has_what_the_in_place_answer_leans_on() -> None:
    """strictcall.server.coalesce answers a POST /rpc in place: it overrides three of the protocol's
    parser callbacks and its task starter, ends a request as uvicorn's cycle does, and writes
    uvicorn's status lines."""
    from uvicorn.protocols.http import httptools_impl

    protocol = httptools_impl.HttpToolsProtocol
    for method, parameters in {
        "_start_asgi_task": ["self", "cycle", "app"],
        "on_headers_complete": ["self"],
        "on_message_complete": ["self"],
        "on_response_complete": ["self"],
        "data_received": ["self", "data"],
    }.items():
        found = getattr(protocol, method, None)
        assert found is not None, f"uvicorn's HttpToolsProtocol has no {method} any more"
        assert list(inspect.signature(found).parameters) == parameters, (
            f"uvicorn's HttpToolsProtocol.{method} changed its signature; "
            "strictcall.server.coalesce "
            "overrides or calls it"
        )
    status_line = getattr(httptools_impl, "STATUS_LINE", None)
    assert isinstance(status_line, dict) and status_line[200].startswith(b"HTTP/1.1 200"), (
        "uvicorn's httptools_impl.STATUS_LINE changed; strictcall.server.coalesce writes it"
    )
    cycle_source = inspect.getsource(httptools_impl.RequestResponseCycle.__init__)
    for attribute in (
        "scope",
        "body",
        "keep_alive",
        "waiting_for_100_continue",
        "default_headers",
        "response_started",
        "response_complete",
    ):
        assert f"self.{attribute} =" in cycle_source, (
            f"uvicorn's RequestResponseCycle no longer sets {attribute}, which "
            "strictcall.server.coalesce reads or sets"
        )


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
