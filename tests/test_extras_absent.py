"""The core and the server install light: a part whose extra is missing is refused only when it
is used (`MissingExtra`), never at import. Each check runs in a fresh interpreter with the
extra's modules made unimportable, as on an install without it."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

DEADLINE_S = 60


def run_without(modules: list[str], code: str) -> subprocess.CompletedProcess[str]:
    blocked = "".join(f"sys.modules[{name!r}] = None\n" for name in modules)
    program = "import sys\n" + blocked + textwrap.dedent(code)
    return subprocess.run(
        [sys.executable, "-c", program],
        capture_output=True,
        text=True,
        timeout=DEADLINE_S,
        check=False,
    )


@pytest.mark.parametrize(
    ("extra", "modules"),
    [("oauth", ["httpx", "jwt"]), ("quotas", ["redis"]), ("client", ["httpx"])],
)
def test_the_http_server_builds_without_an_optional_extra(extra: str, modules: list[str]) -> None:
    done = run_without(
        modules,
        f"""
        import tempfile, pathlib
        from strictcall.server.app import build_app
        from strictcall.storage.sqlite import SQLiteStore
        store = SQLiteStore(str(pathlib.Path(tempfile.mkdtemp()) / "notes.sqlite3"))
        build_app(store)
        store.close()
        print("built without {extra}")
        """,
    )
    assert done.returncode == 0, done.stderr[-2000:]
