"""The `open_items` table: next steps, open until a session, a commit or a person closes them."""

from __future__ import annotations

from typing import Any


def open_step(conn: Any, *, project: str, branch: str, session_id: str, text: str, at: float) -> int:
    """A new open step; returns its number."""
    return conn.execute(
        "INSERT INTO open_items(project, branch, session_id, text, opened_at) VALUES (?, ?, ?, ?, ?) RETURNING id",
        (project, branch, session_id, text, at),
    ).fetchone()[0]


def close_step(conn: Any, step_id: int, *, at: float, by: str, because: str, if_open: bool = False) -> None:
    """Close a step (`if_open`: only one still open)."""
    conn.execute("UPDATE open_items SET closed_at = ?, closed_by = ?, closed_because = ? WHERE id = ?"
                 + (" AND closed_at IS NULL" if if_open else ""), (at, by, because, step_id))  # fmt: skip


def reopen_restated_by(conn: Any, session_id: str) -> None:
    """Reopen the steps this session closed as restated in its own words."""
    conn.execute("UPDATE open_items SET closed_at = NULL, closed_by = NULL, closed_because = NULL "
                 "WHERE closed_by = ? AND closed_because LIKE 'restated: %'", (session_id,))  # fmt: skip


def withdraw_open_of(conn: Any, session_id: str) -> None:
    """Delete a session's own open steps (it states its steps again)."""
    conn.execute("DELETE FROM open_items WHERE session_id = ? AND closed_at IS NULL", (session_id,))


def open_steps(conn: Any, project: str, *, not_of_session: str | None = None, limit: int | None = None) -> list[dict[str, Any]]:
    """A project's open steps (`not_of_session`: those other sessions opened); with a `limit`, the newest first."""
    sql, params = "SELECT * FROM open_items WHERE project = ? AND closed_at IS NULL", [project]
    if not_of_session is not None:
        sql += " AND session_id != ?"
        params.append(not_of_session)
    if limit is not None:
        sql += " ORDER BY opened_at DESC, id LIMIT ?"
        params.append(limit)
    return [dict(r) for r in conn.execute(sql, params).fetchall()]


def closed_steps(conn: Any, project: str, limit: int) -> list[dict[str, Any]]:
    rows = conn.execute(
        "SELECT * FROM open_items WHERE project = ? AND closed_at IS NOT NULL ORDER BY closed_at DESC LIMIT ?",
        (project, limit),
    ).fetchall()
    return [dict(r) for r in rows]


def steps(conn: Any, project: str | None, *, closed: bool, limit: int) -> list[Any]:
    """Open steps, newest first, or closed ones, last closed first; of one project or all."""
    where, params = ["closed_at IS NOT NULL" if closed else "closed_at IS NULL"], []
    if project is not None:
        where.append("project = ?")
        params.append(project)
    order = "closed_at DESC, id DESC" if closed else "opened_at DESC, id"
    return conn.execute(
        f"SELECT * FROM open_items WHERE {' AND '.join(where)} ORDER BY {order} LIMIT ?", [*params, limit]
    ).fetchall()


def step(conn: Any, number: int) -> Any:
    return conn.execute("SELECT * FROM open_items WHERE id = ?", (number,)).fetchone()


def closed_by_prefix(conn: Any, project: str, prefix: str, limit: int) -> list[Any]:
    """(id, text, closed_at, closed_by) of the project's steps closed by a closer whose name starts with
    `prefix`, last closed first."""
    return conn.execute("SELECT id, text, closed_at, closed_by FROM open_items WHERE project = ? AND closed_by LIKE ? "
                        "ORDER BY closed_at DESC LIMIT ?", (project, prefix + "%", limit)).fetchall()  # fmt: skip


def reopen_step(conn: Any, step_id: int, *, closed_by: str) -> None:
    """Open a step again, if `closed_by` is still what closed it (a reverted commit)."""
    conn.execute("UPDATE open_items SET closed_at = NULL, closed_by = NULL, closed_because = NULL "
                 "WHERE id = ? AND closed_by = ?", (step_id, closed_by))  # fmt: skip


def projects_with_open_steps(conn: Any) -> list[str]:
    return [r["project"] for r in conn.execute("SELECT DISTINCT project FROM open_items WHERE closed_at IS NULL").fetchall()]
