"""The `inbox` table: hook events committed before their 202, claimed by the pipeline in order."""

from __future__ import annotations

import time
from typing import Any

# An error kept with an event is cut to this many characters.
ERROR_CHARS = 2000


def insert_event(conn: Any, key: str, values: tuple[Any, ...]) -> tuple[int, bool]:
    """Insert an event under its dedup key; (inbox id, duplicate?): a key already there keeps its row.
    `values`: (event, session_id, payload JSON, received_at, branch, agent_id, origin, route)."""
    cursor = conn.execute(
        """INSERT INTO inbox(dedup_key, event, session_id, payload, received_at, branch, agent_id, origin, route)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(dedup_key) DO NOTHING""",
        (key, *values),
    )
    if cursor.rowcount == 1:
        return int(cursor.lastrowid), False
    row = conn.execute("SELECT id FROM inbox WHERE dedup_key = ?", (key,)).fetchone()
    return int(row[0]), True


def due_events(conn: Any, limit: int) -> list[Any]:
    """The oldest pending rows whose next attempt is due."""
    return conn.execute(
        """SELECT * FROM inbox WHERE status = 'pending' AND next_attempt <= ?
           ORDER BY id LIMIT ?""",
        (time.time(), limit),
    ).fetchall()


def mark_done(conn: Any, event_id: int) -> None:
    conn.execute(
        "UPDATE inbox SET status = 'done', processed_at = ?, error = NULL WHERE id = ?",
        (time.time(), event_id),
    )


def sessions_in(conn: Any, session_ids: list[str], *, hooks_only: bool) -> set[str]:
    """Those of these sessions the inbox holds an event of (`hooks_only`: one not imported from history)."""
    condition = " AND origin IS NULL" if hooks_only else ""
    found: set[str] = set()
    for start in range(0, len(session_ids), 500):
        chunk = session_ids[start : start + 500]
        rows = conn.execute(
            f"SELECT DISTINCT session_id FROM inbox WHERE session_id IN ({','.join('?' * len(chunk))}){condition}",
            chunk,
        )
        found.update(r[0] for r in rows)
    return found


def has_pending(conn: Any, session_id: str, received_before: float) -> bool:
    row = conn.execute(
        "SELECT 1 FROM inbox WHERE session_id = ? AND status = 'pending' AND received_at < ? LIMIT 1",
        (session_id, received_before),
    ).fetchone()
    return row is not None


def counts(conn: Any) -> dict[str, int]:
    """Events by status; `quarantined` counts everything parked (events and unembeddable records)."""
    found = {r[0]: r[1] for r in conn.execute("SELECT status, count(*) FROM inbox GROUP BY status")}
    found["quarantined"] = int(conn.execute("SELECT count(*) FROM quarantine").fetchone()[0])
    return found


def done_among(conn: Any, event_ids: list[int]) -> int:
    """How many of these events are marked done."""
    if not event_ids:
        return 0
    marks = ",".join("?" * len(event_ids))
    return int(conn.execute(f"SELECT count(*) FROM inbox WHERE status = 'done' AND id IN ({marks})", event_ids).fetchone()[0])
