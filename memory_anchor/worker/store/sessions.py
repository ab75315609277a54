"""The `sessions` table and the branches chosen for sessions before they start (`session_branches`)."""

from __future__ import annotations

import time
from typing import Any


def session_cwd(conn: Any, session_id: str | None) -> str | None:
    """The directory a session ran in, or None for an unknown session."""
    if not session_id or conn is None:
        return None
    row = conn.execute("SELECT cwd FROM sessions WHERE session_id = ?", (session_id,)).fetchone()
    return row["cwd"] if row else None


def get_session(conn: Any, session_id: str) -> dict[str, Any] | None:
    row = conn.execute("SELECT * FROM sessions WHERE session_id = ?", (session_id,)).fetchone()
    return dict(row) if row is not None else None


def list_sessions(conn: Any, *, project: str | None, limit: int, offset: int) -> tuple[list[dict[str, Any]], int]:
    """A page of sessions, the latest started first, and how many there are."""
    where, params = ("WHERE project = ?", [project]) if project else ("", [])
    total = conn.execute(f"SELECT count(*) FROM sessions {where}", params).fetchone()[0]
    rows = conn.execute(
        f"SELECT * FROM sessions {where} ORDER BY started_at DESC LIMIT ? OFFSET ?", [*params, limit, offset]
    ).fetchall()
    return [dict(r) for r in rows], int(total)


def session_branch(conn: Any, session_id: str) -> str | None:
    """The branch a known session writes to."""
    row = conn.execute("SELECT branch FROM sessions WHERE session_id = ?", (session_id,)).fetchone()
    return row["branch"] if row else None


def chosen_branch(conn: Any, session_id: str) -> str | None:
    """The branch chosen for a session before its first event was processed (a fork, a switch)."""
    row = conn.execute("SELECT branch FROM session_branches WHERE session_id = ?", (session_id,)).fetchone()
    return row["branch"] if row else None


def start_session(conn: Any, session_id: str, *, project: str, cwd: str | None, branch: str, agent_id: str | None,
                  transcript_path: str | None, source: str | None, at: float) -> None:  # fmt: skip
    conn.execute(
        """INSERT INTO sessions(session_id, project, cwd, branch, agent_id, transcript_path, source,
                                started_at, last_seen_at)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)""",
        (session_id, project, cwd, branch, agent_id, transcript_path, source, at, at),
    )


# The counters an event adds one to.
COUNTERS = {"UserPromptSubmit": "prompt_count", "PostToolUse": "tool_count"}


def seen_session(conn: Any, session_id: str, event: str, at: float) -> None:
    """A session's event at `at`: its last-seen time and its counter of that event's kind."""
    counter = COUNTERS.get(event)
    bump = f", {counter} = {counter} + 1" if counter else ""
    # The later of the two: imported events may come in a little out of order (PostgreSQL has no max(a, b)).
    conn.execute(f"""UPDATE sessions SET last_seen_at = CASE WHEN last_seen_at > ? THEN last_seen_at ELSE ? END{bump}
                     WHERE session_id = ?""", (at, at, session_id))  # fmt: skip


def end_session(conn: Any, session_id: str, *, at: float, reason: str | None) -> None:
    conn.execute(
        "UPDATE sessions SET status = 'ended', ended_at = ?, end_reason = ? WHERE session_id = ?",
        (at, reason, session_id),
    )


def branch_choice(conn: Any, session_id: str) -> dict[str, Any] | None:
    """The `session_branches` row of a session: its branch, who chose it, the session it forked from."""
    row = conn.execute("SELECT * FROM session_branches WHERE session_id = ?", (session_id,)).fetchone()
    return dict(row) if row else None


def choose_branch(conn: Any, session_id: str, branch: str, chosen_by: str, *, parent_session: str | None = None) -> None:
    conn.execute(
        """INSERT INTO session_branches(session_id, branch, chosen_by, parent_session, updated_at)
           VALUES (?, ?, ?, ?, ?)
           ON CONFLICT(session_id) DO UPDATE SET branch = excluded.branch, chosen_by = excluded.chosen_by,
               parent_session = coalesce(excluded.parent_session, session_branches.parent_session),
               updated_at = excluded.updated_at""",
        (session_id, branch, chosen_by, parent_session, time.time()),
    )


def move_session(conn: Any, session_id: str, branch: str) -> None:
    """A known session writes to `branch` from now on."""
    conn.execute("UPDATE sessions SET branch = ? WHERE session_id = ? AND branch != ?", (branch, session_id, branch))


def last_cwd(conn: Any, project: str) -> str | None:
    """The directory of the project's latest session that had one."""
    row = conn.execute("SELECT cwd FROM sessions WHERE project = ? AND cwd IS NOT NULL ORDER BY last_seen_at DESC LIMIT 1",
                       (project,)).fetchone()  # fmt: skip
    return row["cwd"] if row else None
