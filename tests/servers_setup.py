"""The PyPI MCP servers the real-server tests run (mcp-server-fetch, mcp-server-time,
mcp-server-git), installed into a venv of their own, tests/upstreams/.venv-servers, from the
pinned tests/upstreams/servers-requirements.txt; and the npm servers (tests/upstreams'
package-lock.json) with `npm ci` when node_modules is missing.

Idempotent and fast when done: the venv carries a stamp holding the hash of the requirements,
so it is made again only when they change. Run as a script (`make servers`), it prints one
line; `ensure_servers()` is what the tests call (a lock keeps two runs from building at once).
"""

from __future__ import annotations

import fcntl
import hashlib
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Final

HERE: Final = Path(__file__).resolve().parent / "upstreams"
REQUIREMENTS: Final = HERE / "servers-requirements.txt"
VENV: Final = HERE / ".venv-servers"
STAMP: Final = VENV / ".requirements-sha256"
INSTALL_TIMEOUT_S: Final = 600
SERVERS: Final = ("mcp-server-fetch", "mcp-server-time", "mcp-server-git")


_READABILITY: Final = (
    "from readabilipy import simple_json_from_html_string as read;"
    " read('<p>x</p>', use_readability=True)"
)


def server_command(name: str) -> Path:
    """The console script of one of `SERVERS` in the servers' venv."""
    return VENV / "bin" / name


def _wanted() -> str:
    return hashlib.sha256(REQUIREMENTS.read_bytes()).hexdigest()


def _installed() -> bool:
    return (
        STAMP.is_file()
        and STAMP.read_text(encoding="ascii").strip() == _wanted()
        and all(server_command(name).is_file() for name in SERVERS)
    )


def ensure_servers() -> str | None:
    """Install what is missing; None when every server is there, else why not (one line)."""
    problem = _ensure_pypi()
    if problem is None:
        problem = _ensure_npm()
    return problem


def _ensure_pypi() -> str | None:
    if _installed():
        return None
    with (HERE / ".venv-servers.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _installed():  # another run made it meanwhile
            return None
        shutil.rmtree(VENV, ignore_errors=True)
        made = subprocess.run(
            [sys.executable, "-m", "venv", str(VENV)],
            capture_output=True,
            text=True,
            timeout=INSTALL_TIMEOUT_S,
            check=False,
        )
        if made.returncode != 0:
            return f"python -m venv failed: {made.stderr.strip()[-300:]}"
        pip = [str(VENV / "bin" / "python"), "-m", "pip", "install", "--quiet"]
        done = subprocess.run(
            [*pip, "--disable-pip-version-check", "--no-deps", "-r", str(REQUIREMENTS)],
            capture_output=True,
            text=True,
            timeout=INSTALL_TIMEOUT_S,
            check=False,
        )
        if done.returncode != 0:
            return f"pip install of {REQUIREMENTS.name} failed: {done.stderr.strip()[-300:]}"
        # mcp-server-fetch's readabilipy runs `npm install` (its package-lock) on its first
        # page when npm is there: done here, once, rather than inside a test's call
        readied = subprocess.run(
            [str(VENV / "bin" / "python"), "-c", _READABILITY],
            capture_output=True,
            text=True,
            timeout=INSTALL_TIMEOUT_S,
            check=False,
        )
        if readied.returncode != 0:
            return f"readabilipy's npm install failed: {readied.stderr.strip()[-300:]}"
        STAMP.write_text(_wanted() + "\n", encoding="ascii")
    return None


def _ensure_npm() -> str | None:
    if (HERE / "node_modules" / "@modelcontextprotocol" / "server-memory").is_dir():
        return None
    npm = shutil.which("npm")
    if npm is None:
        return "npm is not installed"
    with (HERE / ".npm.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (HERE / "node_modules" / "@modelcontextprotocol" / "server-memory").is_dir():
            return None
        done = subprocess.run(
            [npm, "ci", "--silent", "--no-audit", "--no-fund"],
            cwd=HERE,
            capture_output=True,
            text=True,
            timeout=INSTALL_TIMEOUT_S,
            check=False,
        )
        if done.returncode != 0:
            return f"npm ci in tests/upstreams failed: {done.stderr.strip()[-300:]}"
    return None


if __name__ == "__main__":
    why = ensure_servers()
    if why is not None:
        print(f"strictcall: the real MCP servers are not installed: {why}", file=sys.stderr)
        sys.exit(1)
    print("strictcall: the real MCP servers are installed (tests/upstreams)")
