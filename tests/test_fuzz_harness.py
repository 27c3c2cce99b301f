"""The fuzzing harness (reliability/fuzz.py) run short on every target: handle(), a gateway on a
SQLite file, a real `strictcall serve` over HTTP (/rpc and MCP at /mcp) and a real
`strictcall serve --mcp-stdio`. Every
invariant must hold for every input; `make fuzz` runs the same with 20,000 inputs per target."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from reliability import fuzz

SEED = 11


def assert_clean(tally: fuzz.Tally, inputs: int) -> None:
    assert tally.inputs == inputs
    assert tally.failures == {}, "\n".join(f"{e['problem']}: {e['input']}" for e in tally.examples)
    # the generator reached every family, and the target answered more than one way
    assert {"valid", "schema", "grammar", "envelope"} <= set(tally.families)
    assert len(tally.outcomes) > 3


def test_handle_holds_every_invariant() -> None:
    assert_clean(fuzz.run_handle(400, SEED), 400)


def test_gateway_on_sqlite_holds_every_invariant(tmp_path: Path) -> None:
    tally = fuzz.run_gateway(400, SEED, tmp_path)
    assert_clean(tally, 400)
    assert tally.outcomes["ok"] > 0 and tally.outcomes["forbidden_or_missing"] > 0


def test_http_endpoint_holds_every_invariant(tmp_path: Path) -> None:
    tally = fuzz.run_http(240, SEED, tmp_path, workers=2)
    assert_clean(tally, 240)
    assert {"batch", "rpc"} <= set(tally.families)


@pytest.mark.skipif(not fuzz.mcp_available(), reason="strictcall.transports.mcp is not available")
def test_mcp_stdio_server_holds_every_invariant(tmp_path: Path) -> None:
    tally = fuzz.run_mcp(150, SEED, tmp_path)
    assert_clean(tally, 150)


@pytest.mark.skipif(not fuzz.mcp_available(), reason="strictcall.transports.mcp is not available")
def test_mcp_streamable_http_endpoint_holds_every_invariant(tmp_path: Path) -> None:
    tally = fuzz.run_mcp_http(150, SEED, tmp_path)
    assert_clean(tally, 150)
