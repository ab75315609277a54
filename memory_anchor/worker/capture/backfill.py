"""Imported history through the door live capture uses.

Events read from Claude Code's transcripts (history.py) are checked against the
hook payloads' wire models and cleaned (truncated, redacted) exactly as a hook's
event is at `POST /api/v1/events`, then committed to the inbox with their
original time, marked as history, and (unless the user asked for Claude)
routed to local distillation. From there the pipeline treats them as any
captured event: excluded projects, the same records, the same summaries.

A session that a hook captured live is not imported again: its prompts would be
stored twice (a hook's event ids are its own), and it may still be running.
"""

from __future__ import annotations

from memory_anchor.schemas.events import EventRefused, accepted_event
from memory_anchor.schemas.history import HistoryImported, HistoryImportRequest, RefusedEvent
from memory_anchor.schemas.settings import Settings
from memory_anchor.worker.capture.inbox import HISTORY, LOCAL_ROUTE, Arrival, Inbox
from memory_anchor.worker.capture.sanitize import sanitize_event


def accept_history(inbox: Inbox, settings: Settings, batch: HistoryImportRequest) -> HistoryImported:
    """Commit a batch of history events to the inbox in one transaction; what became of each."""
    outcome = HistoryImported()
    sessions = sorted({e.payload["session_id"] for e in batch.events if isinstance(e.payload.get("session_id"), str)})
    live = inbox.captured_sessions(sessions)
    outcome.skipped_sessions = sorted(live)
    arrivals: list[Arrival] = []
    for index, event in enumerate(batch.events):
        if event.payload.get("session_id") in live:
            outcome.skipped_events += 1
            continue
        try:
            payload = accepted_event(event.payload)
        except EventRefused as exc:
            outcome.refused.append(RefusedEvent(index=index, reason=str(exc)))
            continue
        arrivals.append(
            Arrival(
                sanitize_event(payload, settings), event_id=event.event_id, received_at=event.at, origin=HISTORY,
                route=None if batch.claude else LOCAL_ROUTE,
            )
        )  # fmt: skip
    for _, duplicate in inbox.accept_many(arrivals):
        if duplicate:
            outcome.duplicates += 1
        else:
            outcome.accepted += 1
    return outcome
