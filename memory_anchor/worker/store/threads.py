"""A record's neighbours in its thread (its session, else its user), walked down the (thread, seq)
index: the two versions before and after each record, per backend, in one statement."""

from __future__ import annotations

from typing import Any, Iterable

from memory_anchor.worker.store.dialect import POSTGRES, SQLITE, dialect_of


def neighbour_walks(conn, walks: list[tuple[str, str, Any, int, str]]) -> Iterable[tuple[int, int]]:
    """(side, seq) of the nearest two rows each walk finds; a walk is (thread column, "<" or ">",
    thread, seq, kind) and its side is its index in `walks`."""
    return _NEIGHBOUR_WALKS[dialect_of(conn)](conn, walks)


_ORDER = {"<": "DESC", ">": "ASC"}
# With `(thread, seq) < (t, s)`, `thread >= t` keeps the walk in thread t (and `<=` with `>`).
_BOUND = {"<": ">=", ">": "<="}


def _sqlite_walks(conn, walks: list[tuple[str, str, Any, int, str]]) -> Iterable[tuple[int, int]]:
    """A UNION ALL of small index walks, one per side: SQLite plans each in microseconds."""
    parts, params = [], []
    for side, (column, op, value, seq, kind) in enumerate(walks):
        parts.append(
            f"SELECT {side} AS side, seq FROM (SELECT seq FROM records WHERE {column} = ? AND seq {op} ? "
            f"AND op = 'put' AND kind = ? ORDER BY seq {_ORDER[op]} LIMIT 2) AS near"
        )
        params += [value, seq, kind]
    for start in range(0, len(parts), 400):  # SQLite allows 500 terms in one compound SELECT
        sql = " UNION ALL ".join(parts[start : start + 400])
        yield from conn.execute(sql, params[start * 3 : (start + 400) * 3])


def _postgres_walks(conn, walks: list[tuple[str, str, Any, int, str]]) -> Iterable[tuple[int, int]]:
    """The walks as arrays, one lateral subquery per thread column and direction: PostgreSQL
    spent 9 ms planning the 60 subqueries of the UNION ALL form to run them in 2.5."""
    groups: dict[tuple[str, str], list[tuple[int, Any, int, str]]] = {}
    for side, (column, op, value, seq, kind) in enumerate(walks):
        groups.setdefault((column, op), []).append((side, value, seq, kind))
    parts, params = [], []
    for (column, op), members in groups.items():
        parts.append(
            "SELECT w.side, near.seq FROM unnest(?::int[], ?::text[], ?::bigint[], ?::text[]) AS w(side, thread, seq, kind)"
            # Bounds and order that only the (thread, seq) index gives, and no `=` on the thread:
            # with `thread = w.thread AND seq < w.seq` the planner, blind to how a thread's rows
            # spread, walked the whole log down its key to find them (390 ms at 20k records).
            f" CROSS JOIN LATERAL (SELECT seq FROM records WHERE ({column}, seq) {op} (w.thread, w.seq)"
            f" AND {column} {_BOUND[op]} w.thread AND op = 'put' AND kind = w.kind"
            f" ORDER BY {column} {_ORDER[op]}, seq {_ORDER[op]} LIMIT 2) AS near"
        )
        params += [list(values) for values in zip(*members)]
    if parts:
        yield from conn.execute(" UNION ALL ".join(parts), params)


_NEIGHBOUR_WALKS = {SQLITE: _sqlite_walks, POSTGRES: _postgres_walks}
