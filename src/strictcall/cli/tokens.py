"""`strictcall tokens`: the API tokens callers send (create, list, revoke) and operators' tokens,
each change kept in the audit log."""

from __future__ import annotations

import time
from typing import TextIO

from strictcall.cli.store import EXIT_FAILED, EXIT_OK, _with_store, say_if_new, store_named
from strictcall.core.terminal import shown
from strictcall.errors import FORBIDDEN_OR_MISSING, ErrorKind
from strictcall.storage import (
    TOKEN_ID_LENGTH,
    Store,
    TokenInfo,
    hash_token,
    shown_db,
    token_cache_s,
)


def run_tokens_create(db: str, identity: str, *, out: TextIO, err: TextIO) -> int:
    """Create an API token in the store it names; the token is printed alone on the last line."""
    say_if_new(db, err)
    token = _with_store(db, err, lambda store: store.create_token(identity))
    if token is None:
        return EXIT_FAILED
    token_id = hash_token(token)[:TOKEN_ID_LENGTH]
    whose = shown(identity)
    out.write(
        f"token for {whose} in {store_named(db)} (id {token_id}; shown once, stored only as a"
        f" hash):\n{token}\n"
    )
    return EXIT_OK


def run_tokens_list(db: str, *, out: TextIO, err: TextIO) -> int:
    """List the stored tokens (id, identity, role, created; never a token), audited."""

    def listed(store: Store) -> list[TokenInfo]:
        tokens = store.list_tokens()
        _audit_command(store, "tokens list", None, None)
        return tokens

    tokens = _with_store(db, err, listed)
    if tokens is None:  # [] is a store without tokens, not a failure
        return EXIT_FAILED
    if not tokens:
        err.write(f"strictcall: no tokens in {shown_db(db)}\n")
        return EXIT_OK
    out.write(f"{'id':{TOKEN_ID_LENGTH}}  {'role':8}  {'created':20}  identity\n")
    for t in tokens:
        created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t.created_at))
        out.write(f"{t.token_id}  {t.role:8}  {created:20}  {shown(t.identity)}\n")
    return EXIT_OK


def run_tokens_revoke(
    db: str, token_id: str | None, identity: str | None, *, out: TextIO, err: TextIO
) -> int:
    """Revoke the token `token_id`, or every token of `identity`, audited; exit 1 when none
    matched. Servers sharing the store refuse them within the token cache's time."""

    if token_id is not None and token_id.startswith("sc_"):  # the token itself: its id
        token_id = hash_token(token_id)[:TOKEN_ID_LENGTH]

    def revoked(store: Store) -> list[TokenInfo]:
        gone = store.revoke_tokens(token_id, identity)
        whose = identity if identity is not None else (gone[0].identity if gone else None)
        _audit_command(store, "tokens revoke", whose, None if gone else FORBIDDEN_OR_MISSING)
        return gone

    gone = _with_store(db, err, revoked)
    if gone is None:
        return EXIT_FAILED
    if not gone:
        # the id given is not repeated: it may be a token mistyped
        what = (
            "that id (as tokens list shows)"
            if identity is None
            else f"the identity {shown(identity)}"
        )
        err.write(f"strictcall tokens revoke: no token has {what} in {shown_db(db)}\n")
        return EXIT_FAILED
    within = token_cache_s()
    for t in gone:
        out.write(f"revoked {t.token_id} ({t.role} token of {shown(t.identity)})\n")
    them = "it" if len(gone) == 1 else "them"
    out.write(f"servers using {shown_db(db)} refuse {them} within {within:g} s\n")
    return EXIT_OK


def _audit_command(
    store: Store, command: str, identity: str | None, refused: ErrorKind | None
) -> None:
    """An operator's command on tokens, kept in the audit log like a call: `command` as the
    tool, `identity` whose tokens, `refused` when it matched nothing."""
    from strictcall.core.record import command_record

    error = None if refused is None else {"code": refused.code, "stage": refused.stage}
    store.record_call(command_record(command, identity, error))


def run_operator_token(db: str, name: str, *, out: TextIO, err: TextIO) -> int:
    """Create an operator's token (the page, /metrics) in the store it names; printed alone on
    the last line."""
    say_if_new(db, err)
    token = _with_store(db, err, lambda store: store.create_operator_token(name))
    if token is None:
        return EXIT_FAILED
    out.write(
        f"operator token for {shown(name)} in {store_named(db)} (shown once, stored only as a"
        f" hash):\n{token}\n"
    )
    return EXIT_OK
