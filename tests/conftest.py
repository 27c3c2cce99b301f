"""Shared test settings and fixtures: hypothesis runs bounded and without deadlines, so the
suite stays fast and its timing never decides a result; PostgreSQL databases for the tests that
run on it (see tests/pg.py); stdio upstreams unsandboxed unless a test names its sandbox (the
suite's upstreams read and write the test's own files: tests/test_sandbox*.py run bwrap)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

import pg
from debian import install_package

os.environ.setdefault("STRICTCALL_SANDBOX", "none")

settings.register_profile("strictcall", max_examples=100, deadline=None)
settings.load_profile("strictcall")


@pytest.fixture(scope="session")
def postgres() -> None:
    """PostgreSQL answers (else the test is skipped, or fails in CI): asked once per run."""
    pg.require()


@pytest.fixture
def pg_url(postgres: None) -> Iterator[str]:
    """A fresh database for one test."""
    with pg.fresh_database() as url:
        yield url


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def service_db(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """A store for a module's server, on each kind in turn: a SQLite file path, then a fresh
    PostgreSQL database's URL."""
    if request.param == "sqlite":
        yield str(tmp_path_factory.mktemp("service") / "notes.sqlite3")
        return
    request.getfixturevalue("postgres")
    with pg.fresh_database() as url:
        yield url


@pytest.fixture(scope="module")
def bwrap() -> None:
    """bubblewrap runs here (installed when missing and we may), else skip (fail on CI)."""
    from strictcall.services.proxy.spawn import bwrap_works

    why = install_package("bubblewrap", Path("/usr/bin/bwrap"))
    if why is None and not bwrap_works():
        why = "bubblewrap cannot make its namespaces on this machine"
    if why is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(why)
        pytest.skip(why)


@pytest.fixture(scope="module")
def container() -> None:
    """The container engine answers here (`make docker` installs and starts it when root and
    missing), else skip (fail on CI)."""
    from strictcall.services.proxy.container import container_works

    why = container_works()
    if why is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(why)
        pytest.skip(why)
