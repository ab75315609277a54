"""Reading what was captured: observations, prompts, sessions and the timeline."""

from __future__ import annotations

from typing import Any

from memory_anchor.worker.store.records import MAIN, NotFound, Records, resolve_view
from memory_anchor.worker.store.sessions import get_session, list_sessions

TIMELINE_KINDS = ["prompt", "transcript", "observation", "summary", "event", "fact", "memory", "relation"]


class Timeline:
    def __init__(self, db):
        self.db = db

    def records(
        self,
        kinds: list[str],
        *,
        project: str | None = None,
        session_id: str | None = None,
        branch: str = MAIN,
        as_of: Any = None,
        limit: int = 50,
        offset: int = 0,
        agent_id: str | None = None,
    ) -> tuple[list[dict[str, Any]], int]:
        """Live records of these kinds, newest first by when they happened: history imported today
        from last year sits below this week's work, not above it."""
        conn = self.db.reader()
        filters = {"kind": kinds, "project": project or None, "session_id": session_id or None, "agent_id": agent_id}
        return Records.query(conn, resolve_view(conn, branch, as_of), filters=filters, order="happened_at DESC",
                             limit=limit, offset=offset)  # fmt: skip

    def by_ids(self, ids: list[str], *, branch: str = MAIN, as_of: Any = None) -> list[dict[str, Any]]:
        """Full records for these ids, in the order asked; unknown ids are skipped."""
        conn = self.db.reader()
        view = resolve_view(conn, branch, as_of)
        found = [Records.get(conn, record_id, view) for record_id in ids]
        return [record for record in found if record is not None]

    def around(
        self,
        anchor_id: str,
        *,
        depth_before: int = 5,
        depth_after: int = 5,
        branch: str = MAIN,
        as_of: Any = None,
        kinds: list[str] | None = None,
    ) -> dict[str, Any]:
        """What happened just before and after a record, in its project, oldest first."""
        conn = self.db.reader()
        view = resolve_view(conn, branch, as_of)
        anchor = Records.get(conn, anchor_id, view)
        if anchor is None:
            raise NotFound(f"record {anchor_id} not found")
        filters = {"kind": kinds or TIMELINE_KINDS, "project": anchor["project"] or None}
        before, _ = Records.query(
            conn, view, filters=filters, limit=depth_before, extra_where="r.seq < ?", extra_params=[anchor["seq"]]
        )
        after, _ = Records.query(
            conn, view, filters=filters, order="seq ASC", limit=depth_after,
            extra_where="r.seq > ?", extra_params=[anchor["seq"]],
        )  # fmt: skip
        return {"anchor": anchor, "before": list(reversed(before)), "after": after}

    def sessions(self, *, project: str | None = None, limit: int = 50, offset: int = 0) -> tuple[list[dict], int]:
        return list_sessions(self.db.reader(), project=project, limit=limit, offset=offset)

    def session(self, session_id: str) -> dict[str, Any]:
        row = get_session(self.db.reader(), session_id)
        if row is None:
            raise NotFound(f"session {session_id} not found")
        return row
