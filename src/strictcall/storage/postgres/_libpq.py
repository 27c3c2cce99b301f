"""The one home of psycopg's private part that the loop's sessions lean on:
`psycopg.errors.error_from_result`, which makes of a failed libpq result the exception psycopg
itself would raise (its class from the SQLSTATE). tests/test_dependencies.py pins it, so that a
psycopg release that moves or changes it fails there, with the place to look, not here at run
time."""

from __future__ import annotations

from psycopg import Error, pq
from psycopg import errors as pg_errors


def error_of(result: pq.abc.PGresult, encoding: str) -> Error:
    """The psycopg exception for a failed result, as psycopg raises it for its own calls."""
    return pg_errors.error_from_result(result, encoding=encoding)
