"""L2 event_log: what happened, with when (required), where and who.

Events are records of kind `event` on the writer's branch, `happened_at` = when.
`data` holds where, who, source, ttl_days and expires_at. An event whose TTL has
run out is not lost: the archive job copies it into `event_archive` and writes a
version with status `archived`, hidden from search; `restore` brings it back.
Events belong to the agent that logged them; a search sees other agents' events
only when it asks (`all_agents`).
"""

from __future__ import annotations

from typing import Any

from memory_anchor.schemas.memory_model import EVENT_LOG, EventIn, EventSearch
from memory_anchor.worker.index.timewords import time_window
from memory_anchor.worker.memory.common import DAY, DEFAULT_AGENT, agent_actor, now, to_epoch
from memory_anchor.worker.memory.finder import Finder, boosted
from memory_anchor.worker.store import event_archive
from memory_anchor.worker.store.branches import active_branches
from memory_anchor.worker.store.db import Database
from memory_anchor.worker.store.dialect import data_number_below, dialect_of
from memory_anchor.worker.store.records import MAIN, NotFound, RecordError, Records, resolve_view


class EventLog:
    def __init__(self, db: Database, finder: Finder, redact=None):
        self.db = db
        self.finder = finder
        self._redact = redact or (lambda text: text)

    def log(self, event: EventIn, *, actor: str | None = None, conn=None, reason: str = "ADD") -> dict[str, Any]:
        when = to_epoch(event.when, "when")
        agent_id = event.agent_id or DEFAULT_AGENT
        data = {
            "where": event.where,
            "who": event.who,
            "source": event.source,
            "ttl_days": event.ttl_days,
            "expires_at": when + event.ttl_days * DAY if event.ttl_days else None,
            "tags": event.tags,
        }
        branch = event.branch or MAIN

        def write(c):
            resolve_view(c, branch)  # a clear 404 for an unknown branch
            return Records.put(
                c, "event", self._redact(event.content), branch=branch, actor=actor or agent_actor(agent_id),
                reason=reason, layer=EVENT_LOG, project=event.project, agent_id=agent_id,
                session_id=event.session_id, type="event", data=data, happened_at=when,
                title=(event.where or None),
            )  # fmt: skip

        if conn is not None:
            return write(conn)
        with self.db.transaction() as c:
            return write(c)

    def get(self, event_id: str, *, branch: str = MAIN, as_of: Any = None) -> dict[str, Any]:
        conn = self.db.reader()
        record = Records.get(conn, event_id, resolve_view(conn, branch, as_of))
        if record is None or record["kind"] != "event":
            raise NotFound(f"event {event_id} not found")
        return record

    def search(self, request: EventSearch) -> list[dict[str, Any]]:
        """Events in a time range, ranked by meaning when a query is given.

        A time phrase in the query ("today", "last week") narrows the range when
        no explicit start/end is given.
        """
        conn = self.db.reader()
        view = resolve_view(conn, request.branch or MAIN, request.as_of)
        start = to_epoch(request.start, "start") if request.start is not None else None
        end = to_epoch(request.end, "end") if request.end is not None else None
        query = request.query or ""
        window = time_window(query) if start is None and end is None and query else None
        if window is not None:
            start, end, query = window.start, window.end, window.rest
        filters: dict[str, Any] = {"kind": "event"}
        if request.project:
            filters["project"] = request.project
        if not request.all_agents:
            filters["agent_id"] = request.agent_id or DEFAULT_AGENT
        if query.strip():
            hits = self.finder.find(query, view, filters=filters, limit=request.limit, time_range=(start, end), conn=conn)
            # A query that matches nothing inside the range still returns the range.
            if not hits or all(h["match"] == "recent" for h in hits):
                hits = [{**h, "match": "time_range"} for h in self.finder.recent(
                    conn, view, filters=filters, limit=request.limit, time_range=(start, end))]  # fmt: skip
        else:
            hits = [{**h, "match": "time_range", "score": 0.0} for h in self.finder.recent(
                conn, view, filters=filters, limit=request.limit, time_range=(start, end))]  # fmt: skip
        for hit in hits:
            hit["score"] = boosted(float(hit.get("score") or 0.0), _epoch(hit.get("happened_at")), None)
        if query.strip():
            hits.sort(key=lambda h: -h["score"])
        return hits

    def recent(self, project: str, *, agent_id: str | None = None, limit: int = 10, branch: str = MAIN,
               all_agents: bool = True) -> list[dict[str, Any]]:  # fmt: skip
        conn = self.db.reader()
        filters: dict[str, Any] = {"kind": "event", "project": project}
        if not all_agents:
            filters["agent_id"] = agent_id or DEFAULT_AGENT
        return self.finder.recent(conn, resolve_view(conn, branch), filters=filters, limit=limit)

    # --- TTL and the archive -----------------------------------------------------------

    def archive_expired(self, at: float | None = None) -> int:
        """Archive every live event whose TTL has run out, on every branch."""
        at = at or now()
        count = 0
        with self.db.transaction() as conn:
            expired = data_number_below(dialect_of(conn), "r", "expires_at")
            branches = active_branches(conn)
            for branch in branches:
                view = resolve_view(conn, branch)
                rows, _ = Records.query(
                    conn, view, filters={"kind": "event", "branch": branch}, limit=100_000,
                    extra_where=expired, extra_params=[at],
                )  # fmt: skip
                for row in rows:
                    event_archive.archive(conn, row, branch, at)
                    Records.update(conn, row["id"], branch=branch, actor="system:event-archive",
                                   reason="ARCHIVE (ttl expired)", view=view, status="archived")  # fmt: skip
                    count += 1
        return count

    def archived(self, project: str | None = None, limit: int = 100) -> list[dict[str, Any]]:
        rows = event_archive.archived(self.db.reader(), project, limit)
        return [{k: row[k] for k in row.keys() if k != "record"} for row in rows]

    def restore(self, archive_id: int, *, actor: str = "system", ttl_days: int | None = None) -> dict[str, Any]:
        """Bring an archived event back; it keeps no TTL unless a new one is given."""
        with self.db.transaction() as conn:
            row = event_archive.entry(conn, archive_id)
            if row is None:
                raise NotFound(f"archived event {archive_id} not found")
            if row["restored_at"] is not None:
                raise RecordError(f"archived event {archive_id} was already restored", code="conflict", status=409)
            view = resolve_view(conn, row["branch"])
            current = Records.get(conn, row["record_id"], view)
            if current is None:
                raise NotFound(f"event {row['record_id']} no longer exists on {row['branch']}")
            at = now()
            data = {**current["data"], "ttl_days": ttl_days, "expires_at": at + ttl_days * DAY if ttl_days else None}
            record = Records.update(conn, row["record_id"], branch=row["branch"], actor=actor,
                                    reason="RESTORE (from archive)", view=view, status="active", data=data)  # fmt: skip
            event_archive.mark_restored(conn, archive_id, at)
            return record


def _epoch(value: Any) -> float | None:
    return value if isinstance(value, (int, float)) else None
