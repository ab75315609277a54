"""The `sessions` table and the branches chosen for sessions before they start (`session_branches`)."""

from __future__ import annotations

from typing import Any


def session_cwd(conn: Any, session_id: str | None) -> str | None:
    """The directory a session ran in, or None for an unknown session."""
    if not session_id or conn is None:
        return None
    row = conn.execute("SELECT cwd FROM sessions WHERE session_id = ?", (session_id,)).fetchone()
    return row["cwd"] if row else None
