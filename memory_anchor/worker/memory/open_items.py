"""Open items: the next steps a session left undone at its end, open until later work does them.

A session's next steps come from its summary (what Claude's last message says
is left: memory_anchor/worker/memory/outcomes.py; never the agent's passing plan or its todo
list). The summary is rewritten at every Stop, so a session's own items are
replaced each time and what stays is what its last message left. A later
session's outcome (what it says was done) closes the items it covers, with the
session and the sentence that closed them. A later session that leaves the same
step again reaffirms it: the earlier item is closed as restated and the step
opens again under the later session, so its age counts from the reaffirmation.
An item nobody reaffirms ages out of the briefing (`fresh`), but stays here.
"""

from __future__ import annotations

from typing import Any, Iterable

from memory_anchor.worker.memory.common import DAY, now, text_similarity
from memory_anchor.worker.memory.cues import covers
from memory_anchor.worker.memory.forgotten import Forgotten
from memory_anchor.worker.store import open_items as store_steps
from memory_anchor.worker.store.db import Database

SAME_ITEM = 0.7
# A next step nobody reaffirmed in this long of the project's own work leaves the briefing.
MAX_AGE_DAYS = 21


class OpenItems:
    def __init__(self, db: Database, forgotten: Forgotten | None = None):
        self.db = db
        self.forgotten = forgotten or Forgotten(db)

    def record_outcome(self, conn, *, project: str, branch: str, session_id: str, next_steps: list[str],
                       done: list[str], at: float | None = None) -> dict[str, int]:  # fmt: skip
        """Close what `done` completes, then make `next_steps` the session's own open items."""
        at = at or now()
        # This session's earlier Stop may have reaffirmed other sessions' steps; its last word decides again.
        store_steps.reopen_restated_by(conn, session_id)
        closed = 0
        others = store_steps.open_steps(conn, project, not_of_session=session_id)
        for row in others:
            because = next((d for d in done if covers(d, row["text"])), None)
            if because is not None:
                store_steps.close_step(conn, row["id"], at=at, by=session_id, because=because)
                closed += 1
        still_open = [r for r in others if not any(covers(d, r["text"]) for d in done)]
        store_steps.withdraw_open_of(conn, session_id)
        opened = 0
        for text in dict.fromkeys(t.strip() for t in next_steps if t and t.strip()):
            if self.forgotten.find(conn, project, "next_step", text, branch=branch):
                continue  # a person forgot it (or edited its wording away): restating it does not reopen it
            for earlier in still_open:
                if text_similarity(text, earlier["text"]) >= SAME_ITEM or covers(earlier["text"], text, at_least=0.8):
                    store_steps.close_step(conn, earlier["id"], at=at, by=session_id, because=f"restated: {text}", if_open=True)
            store_steps.open_step(conn, project=project, branch=branch, session_id=session_id, text=text, at=at)
            opened += 1
        return {"opened": opened, "closed": closed}

    def fresh(self, project: str, *, reference: float | None = None, limit: int = 5, conn=None,
              done: Iterable[int] = ()) -> list[dict[str, Any]]:  # fmt: skip
        """The open items still worth briefing, freshest first: opened (or reaffirmed) within
        MAX_AGE_DAYS of the project's latest work (`reference`; history imported from long ago ages
        against its own last session, not against today). `done`: ids to leave out as closed."""
        done = set(done)
        items = [item for item in self.open(project, limit=200 + len(done), conn=conn) if item["id"] not in done]
        if not items:
            return []
        reference = reference or max(item["opened_at"] for item in items)
        return [item for item in items if item["opened_at"] >= reference - MAX_AGE_DAYS * DAY][:limit]

    def open(self, project: str, *, limit: int = 20, conn=None) -> list[dict[str, Any]]:
        conn = conn or self.db.reader()
        return store_steps.open_steps(conn, project, limit=limit)

    def closed(self, project: str, *, limit: int = 20, conn=None) -> list[dict[str, Any]]:
        conn = conn or self.db.reader()
        return store_steps.closed_steps(conn, project, limit)
