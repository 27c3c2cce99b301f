"""`strictcall notes`: add and list notes, as the operator."""

from __future__ import annotations

from typing import TextIO

from strictcall.cli.store import EXIT_FAILED, EXIT_OK, _with_store, say_if_new
from strictcall.core.terminal import json_shown, shown
from strictcall.storage import shown_db


def run_notes_add(db: str, owner: str, text: str, *, out: TextIO, err: TextIO) -> int:
    """Add a note; its id is printed."""
    say_if_new(db, err)
    note = _with_store(db, err, lambda store: store.add_note(owner, text))
    if note is None:
        return EXIT_FAILED
    out.write(note.note_id + "\n")
    return EXIT_OK


def run_notes_list(db: str, owner: str, *, out: TextIO, err: TextIO) -> int:
    """List an owner's notes, oldest first: id, a tab, the text (as JSON, one line)."""
    notes = _with_store(db, err, lambda store: store.list_notes(owner))
    if notes is None:  # [] is an owner without notes, not a failure
        return EXIT_FAILED
    if not notes:
        err.write(f"strictcall: {owner} has no notes in {shown_db(db)}\n")
    for note in notes:
        out.write(f"{shown(note.note_id)}\t{json_shown(note.text)}\n")  # a model wrote it
    return EXIT_OK
