"""Where the store's SQL differs between SQLite and PostgreSQL: the one seam.

The store writes SQL both engines take wherever it can (`RETURNING`,
`ON CONFLICT DO NOTHING`, `?` placeholders that the PostgreSQL connection
translates). What is left differs by engine and is chosen here, by the
connection's `dialect`: the SQLite connection class says "sqlite", the
PostgreSQL one "postgres". Nothing rewrites SQL after the fact.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

SQLITE = "sqlite"
POSTGRES = "postgres"


def dialect_of(conn: Any) -> str:
    """The engine behind a store connection (a bare sqlite3 connection is SQLite)."""
    return getattr(conn, "dialect", SQLITE)


def index_hint(dialect: str) -> str:
    """SQLite's unary `+`, which keeps its planner off an index; PostgreSQL plans by statistics
    and has no `+` for text."""
    return "+" if dialect == SQLITE else ""


def truth(dialect: str, value: bool) -> str:
    """A boolean literal: SQLite's conditions are integers, PostgreSQL's are booleans."""
    if dialect == SQLITE:
        return "1" if value else "0"
    return "true" if value else "false"


@contextmanager
def one_moment(conn: Any) -> Iterator[None]:
    """Every read on `conn` inside sees the store as it was at the first: what reads in several steps
    (a briefing's sections) reads one moment of memory, not a write that lands between two steps.
    Read-only: nothing to keep or undo at the end. Nothing is done when `conn` is inside a transaction
    already (a write's, whose reads see its own changes)."""
    if conn.in_transaction:
        yield
        return
    # SQLite's read transaction keeps the snapshot of its first read (WAL); PostgreSQL's default
    # isolation takes a new one at each statement, REPEATABLE READ keeps the first.
    conn.execute("BEGIN" if dialect_of(conn) == SQLITE else "BEGIN ISOLATION LEVEL REPEATABLE READ")
    try:
        yield
    finally:
        conn.execute("COMMIT")


@contextmanager
def one_step(conn: Any) -> Iterator[None]:
    """A step of a `one_moment` read whose failure must not spoil the steps after it: PostgreSQL
    refuses every statement of a transaction after an error until it is rolled back to a savepoint."""
    if not conn.in_transaction:
        yield
        return
    conn.execute("SAVEPOINT one_step")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK TO SAVEPOINT one_step")
        raise
    conn.execute("RELEASE SAVEPOINT one_step")


def table_exists(conn: Any, name: str) -> bool:
    """Whether the database behind `conn` has the table `name` (areas of the schema grow apart)."""
    if dialect_of(conn) == SQLITE:
        sql = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?"
    else:
        sql = "SELECT 1 WHERE to_regclass(?) IS NOT NULL"
    return conn.execute(sql, (name,)).fetchone() is not None


def _json_key(key: str) -> str:
    # Keys are the store's own names, written into the SQL: never a caller's text.
    if not key.isidentifier():
        raise ValueError(f"not a JSON key the store uses: {key!r}")
    return key


def json_text(dialect: str, column: str, key: str) -> str:
    """A top-level key of a JSON text column, as text (NULL when absent); for equality and IN."""
    key = _json_key(key)
    if dialect == SQLITE:
        return f"json_extract({column}, '$.{key}')"
    return f"({column}::jsonb ->> '{key}')"


def json_number(dialect: str, column: str, key: str) -> str:
    """A top-level key of a JSON text column as a number, NULL when absent or not a number.

    SQLite's json_extract gives a string for a string, which then sorts after every number;
    PostgreSQL would refuse to cast it, so a value that is not a JSON number counts as absent.
    """
    key = _json_key(key)
    if dialect == SQLITE:
        return f"(CASE WHEN json_type({column}, '$.{key}') IN ('integer', 'real') THEN json_extract({column}, '$.{key}') END)"
    return (
        f"(CASE WHEN jsonb_typeof({column}::jsonb -> '{key}') = 'number' "
        f"THEN ({column}::jsonb ->> '{key}')::double precision END)"
    )


def limit_param(dialect: str, limit: int) -> int | None:
    """A `LIMIT ?` value where a negative limit means none: SQLite reads that from -1 itself,
    PostgreSQL refuses a negative LIMIT and takes NULL for none."""
    if limit < 0 and dialect == POSTGRES:
        return None
    return limit


def metadata_in(dialect: str, alias: str, key: Any, values: list[Any]) -> tuple[str, list[Any]]:
    """A condition that a record's metadata key holds one of `values`, with its parameters."""
    if not values:
        return truth(dialect, False), []
    if dialect == POSTGRES:
        # As text: a superset of what search's exact check keeps (it compares values, then their text).
        return (f"({alias}.metadata::jsonb ->> ?) IN ({','.join('?' * len(values))})",
                [str(key), *(v if isinstance(v, str) else json.dumps(v) for v in values)])  # fmt: skip
    path = '$."' + str(key).replace('"', "") + '"'
    return f"json_extract({alias}.metadata, ?) IN ({','.join('?' * len(values))})", [path, *values]


def data_key_in(dialect: str, alias: str, keys: list[str], count: int) -> str:
    """A condition that any of these top-level keys of `data` is one of `count` parameters (given once per key)."""
    marks = ",".join("?" * count)
    return "(" + " OR ".join(f"{json_text(dialect, f'{alias}.data', key)} IN ({marks})" for key in keys) + ")"


def data_number_below(dialect: str, alias: str, key: str) -> str:
    """A condition that a number in `data` is below one parameter."""
    return f"{json_number(dialect, f'{alias}.data', key)} < ?"
