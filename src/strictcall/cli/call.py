"""`strictcall call --db`: one call to any notes tool, through the full gateway."""

from __future__ import annotations

from typing import Any, TextIO

from strictcall.cli.store import _open_store
from strictcall.storage import StoreUnavailable, unavailable_because


def run_call(db: str, raw: str | bytes, identity: str, call_id: str, *, err: TextIO) -> Answer:
    """One call to any notes tool on the store at `db`, through the full gateway (every check,
    every detail of the catalogue), audited as the server audits it (the same record, made by
    `strictcall.core.record.record_of` from the gateway's outcome); None (and a message) when
    the store cannot be opened."""
    from strictcall.core.record import record_of
    from strictcall.services.notes import notes_gateway

    store = _open_store(db, err)
    if store is None:
        return None
    try:
        with notes_gateway(store) as gateway:
            outcome = gateway.settle_text(raw, identity, call_id)
        try:
            store.record_call(record_of(outcome, identity))
        except StoreUnavailable as exc:
            err.write(f"strictcall: the call was not audited: {unavailable_because(db, exc)}\n")
        return outcome.answer
    finally:
        store.close()


Answer = dict[str, Any] | None
