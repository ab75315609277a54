"""The `forgotten` table: what a person forgot or edited away, with who, when and why."""

from __future__ import annotations

from typing import Any


def add(conn: Any, *, project: str, kind: str, item_id: str, text: str, key: str, action: str, actor: str,
        reason: str | None, at: float, branch: str, seq: int) -> Any:  # fmt: skip
    """Keep `text` out of memory from now on, on `branch` as of `seq` (and on branches forked
    from it after); returns the row."""
    return conn.execute(
        """INSERT INTO forgotten(project, kind, item_id, text, key, action, actor, reason, created_at, branch, seq)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING *""",
        (project, kind, item_id, text, key, action, actor, reason, at, branch, seq),
    ).fetchone()


def seen(conn: Any, project: str, kind: str) -> tuple[Any, ...]:
    """(count, highest id, length of their texts) of a project's entries of a kind: they change when
    an entry is added or purged."""
    return tuple(conn.execute("SELECT count(*), max(id), sum(length(text)) FROM forgotten WHERE project = ? AND kind = ?",
                              (project, kind)).fetchone())  # fmt: skip


def entries(conn: Any, project: str, kind: str) -> list[Any]:
    """A project's entries of a kind, oldest first."""
    return conn.execute("SELECT * FROM forgotten WHERE project = ? AND kind = ? ORDER BY id", (project, kind)).fetchall()


def history(conn: Any, *, project: str | None, kind: str | None, item_id: str | None, limit: int) -> list[Any]:
    """Entries, newest first, filtered by whichever of project, kind and item are given."""
    where, params = [], []
    for column, value in (("project", project), ("kind", kind), ("item_id", item_id)):
        if value is not None:
            where.append(f"{column} = ?")
            params.append(value)
    sql = "SELECT * FROM forgotten" + (f" WHERE {' AND '.join(where)}" if where else "") + " ORDER BY id DESC LIMIT ?"
    return conn.execute(sql, [*params, limit]).fetchall()
