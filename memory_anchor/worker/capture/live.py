"""Live updates for the timeline: who is waiting for new records, and what is new since a seq.

The pipeline calls `LiveFeed.changed()` (from its thread) after each event's
records are written; every open stream wakes, reads the records whose `seq` is
above the last one it sent, and sends them. A stream also looks once a second,
so writes that do not pass through the pipeline (the REST API, MCP) show up
too, a little later.
"""

from __future__ import annotations

import asyncio
from typing import Any

from memory_anchor.worker.capture.timeline import TIMELINE_KINDS
from memory_anchor.worker.store.records import MAIN, Records, max_seq, resolve_view

POLL_SECONDS = 1.0
BATCH = 100


class LiveFeed:
    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._changed: asyncio.Event | None = None
        self._wake_scheduled = False
        self.closing = False

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._changed = asyncio.Event()

    def changed(self, *_: Any) -> None:
        """Something was written (callable from any thread, and as a pipeline after-event hook).

        One wake-up waits on the loop at a time: the streams it wakes read every record written
        until then, so an import's thousands of events do not wake the event loop thousands of times.
        """
        if self._wake_scheduled or self._loop is None or self._loop.is_closed():
            return
        self._wake_scheduled = True
        self._loop.call_soon_threadsafe(self._wake)

    def close(self) -> None:
        self.closing = True
        self._wake()

    def _wake(self) -> None:
        self._wake_scheduled = False
        if self._changed is not None:
            self._changed.set()
            self._changed = asyncio.Event()

    async def wait(self, timeout: float = POLL_SECONDS) -> None:
        """Until the next change, or `timeout` seconds."""
        changed = self._changed
        if changed is None or self.closing:
            return
        try:
            await asyncio.wait_for(changed.wait(), timeout)
        except asyncio.TimeoutError:
            pass


def latest_seq(db) -> int:
    return max_seq(db.reader())


def records_after(
    db, after: int, *, project: str | None = None, session_id: str | None = None, branch: str = MAIN
) -> list[dict[str, Any]]:
    """Timeline records (live versions) written after seq `after`, oldest first."""
    conn = db.reader()
    filters = {"kind": TIMELINE_KINDS, "project": project or None, "session_id": session_id or None}
    page, _ = Records.query(
        conn, resolve_view(conn, branch, None), filters=filters, order="seq ASC", limit=BATCH,
        extra_where="r.seq > ?", extra_params=[after],
    )  # fmt: skip
    return page
