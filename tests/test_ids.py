"""Call ids, which idempotency rests on, are minted by one function (`core.ids.mint_call_id`),
and no module of the server side mints random ids of its own."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from strictcall.core.ids import mint_call_id

PACKAGE = Path(__file__).resolve().parent.parent / "src" / "strictcall"

SERVER_SIDE = ("transports", "server", "services", "cli", "audit", "ops")
"""The folders whose call ids must come from `mint_call_id` (storage mints tokens and note
ids, the client its own request ids: neither is a call id the server mints)."""

RANDOM_SOURCES = frozenset({"uuid", "secrets", "random"})


def test_a_minted_call_id_is_its_prefix_and_32_hex_digits() -> None:
    minted = mint_call_id("n")
    assert re.fullmatch(r"n-[0-9a-f]{32}", minted), minted


def test_minted_call_ids_never_repeat() -> None:
    minted = {mint_call_id("cli") for _ in range(10_000)}
    assert len(minted) == 10_000


@pytest.mark.parametrize("folder", SERVER_SIDE)
def test_no_server_side_module_mints_random_ids_of_its_own(folder: str) -> None:
    for path in sorted((PACKAGE / folder).rglob("*.py")):
        tree = ast.parse(path.read_text("utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module is not None:
                names = {node.module.split(".")[0]}
            elif (
                isinstance(node, ast.Attribute)
                and node.attr == "urandom"
                and isinstance(node.value, ast.Name)
                and node.value.id == "os"
            ):
                names = {"os.urandom"}
            else:
                continue
            found = names & (RANDOM_SOURCES | {"os.urandom"})
            assert not found, f"{path.relative_to(PACKAGE)} uses {found}: use mint_call_id"
