"""The `conflicts` table: two statements of the same fact that disagree, open until a person resolves them."""

from __future__ import annotations

import time
from typing import Any


def open_conflict(conn: Any, *, project: str, branch: str, existing_id: str, candidate_id: str, fact_key: str | None,
                  reason: str, agent_id: str | None, at: float | None = None) -> int:  # fmt: skip
    """A new open conflict; returns its id."""
    return conn.execute(
        """INSERT INTO conflicts(status, project, branch, existing_id, candidate_id, fact_key, reason, agent_id, created_at)
           VALUES ('open', ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id""",
        (project, branch, existing_id, candidate_id, fact_key, reason, agent_id, time.time() if at is None else at),
    ).fetchone()[0]


def conflicts(conn: Any, *, status: str | None, project: str | None, limit: int) -> list[dict[str, Any]]:
    where, params = [], []
    if status:
        where.append("status = ?")
        params.append(status)
    if project is not None:
        where.append("project = ?")
        params.append(project)
    sql = "SELECT * FROM conflicts" + (f" WHERE {' AND '.join(where)}" if where else "") + " ORDER BY id LIMIT ?"
    return [dict(r) for r in conn.execute(sql, [*params, limit]).fetchall()]


def count_open(conn: Any, project: str | None) -> int:
    sql, params = "SELECT count(*) FROM conflicts WHERE status = 'open'", []
    if project is not None:
        sql += " AND project = ?"
        params.append(project)
    return int(conn.execute(sql, params).fetchone()[0])


def conflict(conn: Any, conflict_id: int) -> dict[str, Any] | None:
    row = conn.execute("SELECT * FROM conflicts WHERE id = ?", (conflict_id,)).fetchone()
    return dict(row) if row is not None else None


def resolve(conn: Any, conflict_id: int, *, at: float, actor: str, resolution: str, note: str | None) -> None:
    conn.execute(
        "UPDATE conflicts SET status='resolved', resolved_at=?, resolved_by=?, resolution=?, note=? WHERE id=?",
        (at, actor, resolution, note, conflict_id),
    )


def is_open_over(conn: Any, fact_id: str) -> bool:
    """Whether an open conflict names this fact, on either side."""
    return conn.execute(
        "SELECT 1 FROM conflicts WHERE status = 'open' AND (existing_id = ? OR candidate_id = ?)", (fact_id, fact_id)
    ).fetchone() is not None


def resolve_over(conn: Any, fact_id: str, *, at: float, actor: str, resolution: str, note: str) -> None:
    """Resolve the open conflicts over a fact (a correction of the fact settles them)."""
    conn.execute(
        "UPDATE conflicts SET status = 'resolved', resolved_at = ?, resolved_by = ?, resolution = ?, note = ?"
        " WHERE status = 'open' AND (existing_id = ? OR candidate_id = ?)",
        (at, actor, resolution, note, fact_id, fact_id),
    )
