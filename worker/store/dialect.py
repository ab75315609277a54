"""Where the store's SQL differs between SQLite and PostgreSQL: the one seam.

The store writes SQL both engines take wherever it can (`RETURNING`,
`ON CONFLICT DO NOTHING`, `?` placeholders that the PostgreSQL connection
translates). What is left differs by engine and is chosen here, by the
connection's `dialect`: the SQLite connection class says "sqlite", the
PostgreSQL one "postgres". Nothing rewrites SQL after the fact.
"""

from __future__ import annotations

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


def table_exists(conn: Any, name: str) -> bool:
    """Whether the database behind `conn` has the table `name` (areas of the schema grow apart)."""
    if dialect_of(conn) == SQLITE:
        sql = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?"
    else:
        sql = "SELECT 1 WHERE to_regclass(?) IS NOT NULL"
    return conn.execute(sql, (name,)).fetchone() is not None
