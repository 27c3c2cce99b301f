"""Node.js for the tests that run the official TypeScript MCP client (tests/ts/): node itself,
and tests/ts's npm packages, installed with `npm ci` from the committed package-lock.json at most
once per session, when node_modules is missing or older than the lock. Without them a test is
skipped locally and fails in CI (CI=true), where the suite must run it."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from pathlib import Path

import pytest

TS_DIR = Path(__file__).resolve().parent / "ts"
NPM_DEADLINE_S = 300


def unavailable(reason: str) -> None:
    """Skip locally, fail in CI: there the TypeScript client must run."""
    message = f"the TypeScript MCP client tests need {reason}"
    if os.environ.get("CI") == "true":
        pytest.fail(message + " (CI=true: not skipped)")
    pytest.skip(message + "; install Node.js 20+ with npm to run them")


def _installed() -> bool:
    """Whether node_modules holds what package-lock.json pins (npm writes its own copy of the
    lock into node_modules when it installs)."""
    marker = TS_DIR / "node_modules" / ".package-lock.json"
    lock = TS_DIR / "package-lock.json"
    return marker.exists() and marker.stat().st_mtime >= lock.stat().st_mtime


@functools.cache
def _install() -> tuple[str | None, str]:
    """(node, "") once tests/ts is installed, or (None, why not); run once per session."""
    node = shutil.which("node")
    npm = shutil.which("npm")
    if node is None or npm is None:
        return None, "node and npm on PATH"
    if not _installed():
        done = subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"],
            cwd=TS_DIR,
            capture_output=True,
            text=True,
            timeout=NPM_DEADLINE_S,
            check=False,
        )
        if done.returncode != 0:
            return None, f"`npm ci` in tests/ts to succeed: {done.stderr.strip()[-500:]}"
    return node, ""


def node_with_packages() -> str:
    """The node executable, with tests/ts's packages installed; skips (fails in CI) otherwise."""
    node, missing = _install()
    if node is None:
        unavailable(missing)
    assert node is not None
    return node
