"""Open items: the next steps a session left, open until a later session does them.

A session's next steps come from its summary (Claude's last message, its todo
list). The summary is rewritten at every Stop, so a session's own items are
replaced each time; an item that an earlier session already left open is not
opened twice. A later session's outcome (what it says was done) closes the
items it covers, with the session and the sentence that closed them.
"""

from __future__ import annotations

from typing import Any

from worker.memory.common import now, text_similarity
from worker.memory.cues import covers
from worker.memory.forgotten import Forgotten
from worker.store.db import Database

SAME_ITEM = 0.7


class OpenItems:
    def __init__(self, db: Database, forgotten: Forgotten | None = None):
        self.db = db
        self.forgotten = forgotten or Forgotten(db)

    def record_outcome(self, conn, *, project: str, branch: str, session_id: str, next_steps: list[str],
                       done: list[str], at: float | None = None) -> dict[str, int]:  # fmt: skip
        """Close what `done` completes, then make `next_steps` the session's own open items."""
        at = at or now()
        closed = 0
        others = conn.execute(
            "SELECT id, text FROM open_items WHERE project = ? AND closed_at IS NULL AND session_id != ?",
            (project, session_id),
        ).fetchall()
        for row in others:
            because = next((d for d in done if covers(d, row["text"])), None)
            if because is not None:
                conn.execute("UPDATE open_items SET closed_at = ?, closed_by = ?, closed_because = ? WHERE id = ?",
                             (at, session_id, because, row["id"]))  # fmt: skip
                closed += 1
        still_open = [r["text"] for r in others if not any(covers(d, r["text"]) for d in done)]
        conn.execute("DELETE FROM open_items WHERE session_id = ? AND closed_at IS NULL", (session_id,))
        opened = 0
        for text in dict.fromkeys(t.strip() for t in next_steps if t and t.strip()):
            if any(text_similarity(text, other) >= SAME_ITEM or covers(other, text, at_least=0.8) for other in still_open):
                continue
            if self.forgotten.find(conn, project, "next_step", text):
                continue  # a person forgot it (or edited its wording away): restating it does not reopen it
            conn.execute(
                "INSERT INTO open_items(project, branch, session_id, text, opened_at) VALUES (?, ?, ?, ?, ?)",
                (project, branch, session_id, text, at),
            )
            opened += 1
        return {"opened": opened, "closed": closed}

    def open(self, project: str, *, limit: int = 20, conn=None) -> list[dict[str, Any]]:
        conn = conn or self.db.reader()
        rows = conn.execute(
            "SELECT * FROM open_items WHERE project = ? AND closed_at IS NULL ORDER BY opened_at DESC, id LIMIT ?",
            (project, limit),
        ).fetchall()
        return [dict(r) for r in rows]

    def closed(self, project: str, *, limit: int = 20, conn=None) -> list[dict[str, Any]]:
        conn = conn or self.db.reader()
        rows = conn.execute(
            "SELECT * FROM open_items WHERE project = ? AND closed_at IS NOT NULL ORDER BY closed_at DESC LIMIT ?",
            (project, limit),
        ).fetchall()
        return [dict(r) for r in rows]
