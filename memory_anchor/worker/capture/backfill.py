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


from memory_anchor.core.projects import is_clean_path
from memory_anchor.schemas.events import EventRefused, accepted_event
from memory_anchor.schemas.history import HistoryImported, HistoryImportRequest, RefusedEvent
from memory_anchor.schemas.settings import Settings
from memory_anchor.worker.capture.inbox import HISTORY, LOCAL_ROUTE, Arrival, Inbox
from memory_anchor.worker.capture.sanitize import sanitize_event


def accept_history(inbox: Inbox, settings: Settings, batch: HistoryImportRequest, indexes: list[int] | None = None,
                   refused: list[RefusedEvent] | None = None) -> HistoryImported:  # fmt: skip
    """Commit a batch of history events to the inbox in one transaction; what became of each.

    `indexes`: each event's place in the request (events refused at the door left out of
    `batch` and named in `refused`)."""
    outcome = HistoryImported(refused=list(refused or []))
    indexes = indexes if indexes is not None else list(range(len(batch.events)))
    checked: list[tuple[int, dict]] = []
    for index, event in zip(indexes, batch.events):
        try:
            payload = accepted_event(event.payload)
            _check_cwd(payload)
        except EventRefused as exc:
            outcome.refused.append(RefusedEvent(index=index, reason=str(exc)))
            continue
        checked.append((index, payload))
    sessions = sorted({p["session_id"] for _, p in checked if isinstance(p.get("session_id"), str)})
    live = inbox.captured_sessions(sessions)
    outcome.skipped_sessions = sorted(live)
    arrivals: list[Arrival] = []
    by_index = {index: event for index, event in zip(indexes, batch.events)}
    for index, payload in checked:
        event = by_index[index]
        if payload.get("session_id") in live:
            outcome.skipped_events += 1
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
    outcome.refused.sort(key=lambda r: r.index)
    return outcome


def _check_cwd(payload: dict) -> None:
    """An imported event's `cwd` names its project: it must be absolute and normalised. A hook's
    comes from Claude Code itself; a transcript's is whatever the file says, and a relative one
    would resolve against the worker's own directory, `/a/../../etc` would become project /etc."""
    cwd = payload.get("cwd")
    if cwd is None:
        return
    if not is_clean_path(cwd):
        raise EventRefused(f"{payload.get('hook_event_name')} event refused: cwd {cwd[:200]!r} is not an absolute, "
                           "normalised path")  # fmt: skip
