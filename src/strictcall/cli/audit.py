"""`strictcall audit` and `strictcall stats`: the audit log read back, as it is or as it comes,
and the breakdown the operator page shows."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Final, TextIO

from strictcall.cli.store import EXIT_FAILED, EXIT_OK, _with_store
from strictcall.core.terminal import shown
from strictcall.storage import AuditRecord, Store, StoreUnavailable, open_store, shown_db

if TYPE_CHECKING:
    from strictcall.ops.audit_query import AuditQuery


def run_audit(
    db: str,
    limit: int,
    *,
    out: TextIO,
    err: TextIO,
    query: AuditQuery | None = None,
    as_json: bool = False,
) -> int:
    """Print the newest calls that match `query` (all by default) and their counts by
    outcome, stage and code; with `as_json`, the calls alone, one JSON object a line."""
    from strictcall.ops.audit_query import (
        AUDIT_HEADER,
        AuditQuery,
        audit_json,
        audit_line,
        find_calls,
    )

    asked = query if query is not None else AuditQuery()

    def read(
        store: Store,
    ) -> tuple[list[AuditRecord], list[tuple[str, str | None, str | None, int]]]:
        if asked.filters:
            return find_calls(store, asked, limit)
        return store.recent_calls(limit), store.call_counts()

    found = _with_store(db, err, read)
    if found is None:
        return EXIT_FAILED
    recent, counts = found
    if as_json:
        for r in recent:
            out.write(audit_json(r))
        return EXIT_OK
    out.write(f"recent calls (newest first, at most {limit}):\n")
    if recent:
        out.write(AUDIT_HEADER)
    for r in recent:
        out.write(audit_line(r))
    out.write("counts by outcome, stage and code:\n")
    if counts:
        out.write(f"  {'calls':>8}  {'outcome':7}  {'stage':8}  code\n")
    for outcome, stage, code, n in counts:
        out.write(f"  {n:>8}  {outcome:7}  {shown(stage):8}  {shown(code)}\n")
    return EXIT_OK


def run_audit_asked(
    db: str,
    limit: int,
    *,
    identity: str | None,
    tool: str | None,
    since: str | None,
    errors: bool,
    as_json: bool,
    follow: bool,
    out: TextIO,
    err: TextIO,
) -> int:
    """`strictcall audit`: the records an operator asked for (issue 29: who, which tool, since
    when, failures only), printed or (`follow`) followed; 2 for a `since` it cannot read."""
    from strictcall.ops.audit_query import AuditQuery
    from strictcall.ops.stats import parse_span

    moment = None
    if since is not None:
        try:
            moment = time.time() - parse_span(since)
        except ValueError as exc:
            err.write(f"strictcall audit: --since: {exc}\n")
            return 2
    query = AuditQuery(identity, tool, moment, errors)
    run = run_audit_follow if follow else run_audit
    return run(db, limit, out=out, err=err, query=query, as_json=as_json)


FOLLOW_POLL_S: Final = 0.25
FOLLOW_BATCH: Final = 1000


def run_audit_follow(
    db: str,
    limit: int,
    *,
    out: TextIO,
    err: TextIO,
    query: AuditQuery | None = None,
    as_json: bool = False,
) -> int:
    """Print the last `limit` calls, oldest first, then each new one as it is recorded, until
    Ctrl-C (exit 0) or the store fails (exit 1); only those that match `query`, as lines of
    columns or (`as_json`) one JSON object a line."""
    from strictcall.ops.audit_query import (
        AUDIT_HEADER,
        AuditQuery,
        audit_json,
        audit_line,
        find_calls,
    )

    asked = query if query is not None else AuditQuery()
    write = audit_json if as_json else audit_line
    if not as_json:  # a line of JSON names its fields; columns get their headers
        out.write(AUDIT_HEADER)
    try:
        store = open_store(db)
    except StoreUnavailable:
        err.write(f"strictcall: the store at {shown_db(db)} is unavailable\n")
        return EXIT_FAILED
    try:
        newest, _ = store.calls_after(None, 0)
        cursor = newest
        if asked.filters:  # the last `limit` that match, however far back
            for r in reversed(find_calls(store, asked, limit)[0]):
                out.write(write(r))
        else:  # the cursor counts records: start `limit` before the newest
            cursor = max(newest - limit, 0)
        while True:
            cursor, records = store.calls_after(cursor, FOLLOW_BATCH)
            for r in records:
                if asked.matches(r):
                    out.write(write(r))
            out.flush()
            if len(records) < FOLLOW_BATCH:
                time.sleep(FOLLOW_POLL_S)
    except KeyboardInterrupt:
        return EXIT_OK
    except StoreUnavailable:
        err.write(f"strictcall: the store at {shown_db(db)} became unavailable\n")
        return EXIT_FAILED
    finally:
        store.close()


def run_stats(db: str, since: str, *, as_json: bool, out: TextIO, err: TextIO) -> int:
    """Print the breakdown the operator page shows, over the last `since` (e.g. 1h)."""
    import json

    from strictcall.ops.audit_query import AUDIT_HEADER, audit_line
    from strictcall.ops.stats import breakdown, parse_span

    try:
        span = parse_span(since)
    except ValueError as exc:
        err.write(f"strictcall stats: --since {since!r}: {exc}\n")
        return 2
    stats = _with_store(db, err, lambda store: breakdown(store, span))
    if stats is None or not stats.store_ok:
        if stats is not None:
            err.write(f"strictcall: the store at {shown_db(db)} is unavailable\n")
        return EXIT_FAILED
    if as_json:
        out.write(json.dumps(stats.as_json(), ensure_ascii=True) + "\n")  # no raw control text
        return EXIT_OK
    rate = f"{100 * stats.failed / stats.calls:.1f} %" if stats.calls else "-"
    out.write(f"calls in the last {since}: {stats.calls}, failed {stats.failed} ({rate})\n")
    out.write("failures by stage and code:\n")
    for stage, code, n in stats.by_stage_code:
        out.write(f"  {n:>8}  {shown(stage):8}  {shown(code)}\n")
    out.write("calls by tool (calls, failed):\n")
    for tool, n, failed in stats.by_tool:
        out.write(f"  {n:>8}  {failed:>8}  {shown(tool)}\n")
    if stats.commands:  # the operator's own, apart from the agents' calls
        out.write("operator commands (runs, refused):\n")
        for command, n, refused in stats.commands:
            out.write(f"  {n:>8}  {refused:>8}  {shown(command)}\n")
    out.write("top failing (tool, code, reason, pointer):\n")
    for row in stats.top_failures:
        out.write(
            f"  {row.calls:>8}  {shown(row.tool):12}  {shown(row.code):22}"
            f"  {shown(row.reason):18}  {shown(row.pointer)}\n"
        )
    out.write("most recent refusals (newest first):\n")
    if stats.recent_refusals:
        out.write(AUDIT_HEADER)
    for r in stats.recent_refusals:
        out.write(audit_line(r))
    return EXIT_OK
