"""The `approvals` table: what waits for a person's decision (identity changes, pending facts, agents' writes)."""

from __future__ import annotations

import json
from typing import Any


def add(conn: Any, *, kind: str, action: str, project: str, branch: str, agent_id: str | None, session_id: str | None,
        record_id: str | None, payload: dict[str, Any], reason: str | None, at: float) -> Any:  # fmt: skip
    """Queue a proposal; returns its row."""
    return conn.execute(
        """INSERT INTO approvals(kind, action, project, branch, agent_id, session_id, record_id, payload, reason, created_at)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING *""",
        (kind, action, project, branch, agent_id, session_id, record_id,
         json.dumps(payload, ensure_ascii=False, default=str), reason, at),
    ).fetchone()  # fmt: skip


def approvals(conn: Any, *, status: str | None, kind: str | None, limit: int) -> list[Any]:
    where, params = [], []
    if status:
        where.append("status = ?")
        params.append(status)
    if kind:
        where.append("kind = ?")
        params.append(kind)
    sql = "SELECT * FROM approvals" + (f" WHERE {' AND '.join(where)}" if where else "")
    return conn.execute(sql + " ORDER BY id LIMIT ?", [*params, limit]).fetchall()


def of_record(conn: Any, record_id: str) -> list[Any]:
    """The approvals about one record, oldest first."""
    return conn.execute("SELECT * FROM approvals WHERE record_id = ? ORDER BY id", (record_id,)).fetchall()


def count_pending(conn: Any, project: str | None) -> int:
    """Pending approvals; of a project, with those of no project."""
    if project is None:
        row = conn.execute("SELECT count(*) FROM approvals WHERE status = 'pending'").fetchone()
    else:
        row = conn.execute("SELECT count(*) FROM approvals WHERE status = 'pending' AND project IN (?, '')", (project,)).fetchone()
    return int(row[0])


def approval(conn: Any, approval_id: int) -> Any:
    return conn.execute("SELECT * FROM approvals WHERE id = ?", (approval_id,)).fetchone()


def decide(conn: Any, approval_id: int, *, status: str, at: float, by: str, note: str | None, result_id: str | None) -> None:
    conn.execute(
        "UPDATE approvals SET status = ?, decided_at = ?, decided_by = ?, decision_note = ?, result_id = ? WHERE id = ?",
        (status, at, by, note, result_id, approval_id),
    )


def decide_if_pending(conn: Any, approval_id: int, *, status: str, at: float, by: str, note: str | None,
                      result_id: str | None) -> None:  # fmt: skip
    """Decide an approval unless someone decided it already."""
    conn.execute(
        "UPDATE approvals SET status = ?, decided_at = ?, decided_by = ?, decision_note = ?, result_id = ? "
        "WHERE id = ? AND status = 'pending'",
        (status, at, by, note, result_id, approval_id),
    )


def decide_pending_fact(conn: Any, fact_id: str, *, status: str, at: float, by: str, note: str, result_id: str | None) -> None:
    """Decide the pending approval over a fact (a correction of the fact settles it)."""
    conn.execute(
        "UPDATE approvals SET status = ?, decided_at = ?, decided_by = ?, decision_note = ?, result_id = ?"
        " WHERE kind = 'fact' AND record_id = ? AND status = 'pending'",
        (status, at, by, note, result_id, fact_id),
    )
