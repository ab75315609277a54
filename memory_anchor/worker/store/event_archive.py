"""The `event_archive` table: L2 events whose time to live ran out, kept whole and restorable."""

from __future__ import annotations

import json
from typing import Any


def archive(conn: Any, row: dict[str, Any], branch: str, at: float) -> None:
    """Keep an expired event's record (its visible version) in the archive."""
    conn.execute(
        """INSERT INTO event_archive(record_id, branch, project, agent_id, text, record, expired_at, archived_at)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?)""",
        (row["id"], branch, row["project"], row["agent_id"], row["text"],
         json.dumps(row, default=str, ensure_ascii=False), row["data"].get("expires_at"), at),
    )  # fmt: skip


def archived(conn: Any, project: str | None, limit: int) -> list[Any]:
    """Archived events not restored, newest first."""
    sql = "SELECT * FROM event_archive WHERE restored_at IS NULL"
    params: list[Any] = []
    if project is not None:
        sql += " AND project = ?"
        params.append(project)
    return conn.execute(sql + " ORDER BY id DESC LIMIT ?", [*params, limit]).fetchall()


def entry(conn: Any, archive_id: int) -> Any:
    return conn.execute("SELECT * FROM event_archive WHERE id = ?", (archive_id,)).fetchone()


def mark_restored(conn: Any, archive_id: int, at: float) -> None:
    conn.execute("UPDATE event_archive SET restored_at = ? WHERE id = ?", (at, archive_id))
