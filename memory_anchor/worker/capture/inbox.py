"""The durable inbox: hook events are acknowledged only once committed here.

Each event has a dedup key (Claude Code's `tool_use_id`, else the id the hook
generated, else a hash of the payload), so a retried or re-spooled event is
stored once. The pipeline claims pending events in order and marks them done in
the same transaction that writes what they produced: processed exactly once.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sqlite3
import time
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Iterator

from memory_anchor.hookkit import spool as spool_lock
from memory_anchor.worker.store import inbox as store_inbox
from memory_anchor.worker.store.db import Database

log = logging.getLogger(__name__)

# Spooled events committed per transaction (the write lock is held that long).
SPOOL_BATCH = 500


@dataclass
class InboxEvent:
    id: int
    event: str
    session_id: str | None
    payload: dict[str, Any]
    attempts: int
    branch: str | None
    agent_id: str | None
    received_at: float
    origin: str | None = None  # None: a hook; "history": imported from Claude Code's transcripts
    route: str | None = None  # None: as the settings say; "local": distilled without Claude

    @property
    def local_only(self) -> bool:
        return self.route == LOCAL_ROUTE


# Arrival.origin of events read from Claude Code's transcripts, and the route that keeps Claude out.
HISTORY = "history"
LOCAL_ROUTE = "local"


def dedup_key(payload: dict[str, Any], event_id: str | None) -> str:
    tool_use_id = payload.get("tool_use_id")
    if isinstance(tool_use_id, str) and tool_use_id:
        return f"tool:{tool_use_id}"
    if event_id:
        return f"event:{event_id}"
    canonical = json.dumps(payload, sort_keys=True, ensure_ascii=False, default=str)
    return "hash:" + hashlib.sha256(canonical.encode("utf-8", "replace")).hexdigest()


@dataclass
class Arrival:
    """A hook event to commit, with what came with it besides the payload."""

    payload: dict[str, Any]
    event_id: str | None = None
    branch: str | None = None
    agent_id: str | None = None
    received_at: float | None = None  # when it happened, if not now (an imported event's original time)
    origin: str | None = None
    route: str | None = None


def spool_arrival(line: str) -> Arrival:
    """One spool line as an event to commit; ValueError/KeyError/TypeError says why it cannot be."""
    from memory_anchor.schemas.events import accepted_event

    entry = json.loads(line)
    if not isinstance(entry, dict):
        raise ValueError("spool line is not a JSON object")
    payload = entry["payload"]
    if not isinstance(payload, dict):
        raise ValueError("payload is not an object")
    payload = accepted_event(payload)  # EventRefused is a ValueError
    text = {key: entry.get(key) if isinstance(entry.get(key), str) else None for key in ("id", "branch", "agent_id")}
    received_at = entry.get("received_at")
    if (isinstance(received_at, bool) or not isinstance(received_at, (int, float))
            or not 0 < received_at < time.time() + 86400):  # NaN, inf and 1e308 too: a time no date can show
        received_at = None  # fmt: skip
    return Arrival(payload, text["id"], text["branch"], text["agent_id"], received_at)


class Inbox:
    def __init__(self, db: Database, clean: Callable[[dict[str, Any]], dict[str, Any]] | None = None):
        """`clean` is applied to spooled payloads (hooks spool them raw) before they are stored."""
        self.db = db
        self._clean = clean or (lambda payload: payload)
        self._in_hand: frozenset[int] = frozenset()  # events the pipeline is processing (see `in_hand`)

    def accept(
        self,
        payload: dict[str, Any],
        *,
        event_id: str | None = None,
        branch: str | None = None,
        agent_id: str | None = None,
        received_at: float | None = None,
    ) -> tuple[int, bool]:
        """Commit one event; returns (inbox id, duplicate?)."""
        return self.accept_many([Arrival(payload, event_id, branch, agent_id, received_at)])[0]

    def accept_many(self, arrivals: list[Arrival]) -> list[tuple[int, bool]]:
        """Commit these events in one transaction; (inbox id, duplicate?) for each, in order.

        Rows are inserted one by one, so an event repeated within the batch is a
        duplicate of its first copy, exactly as if they had come one at a time.
        """
        with self.db.transaction() as conn:
            return [self._insert(conn, arrival) for arrival in arrivals]

    @staticmethod
    def _insert(conn: sqlite3.Connection, arrival: Arrival) -> tuple[int, bool]:
        try:
            return Inbox._insert_row(conn, arrival)
        except UnicodeEncodeError:
            # Lone surrogates ("\ud800" in the JSON) cannot be stored as UTF-8; keep the rest of the event.
            from memory_anchor.schemas.events import scrub_surrogates

            return Inbox._insert_row(conn, replace(arrival, payload=scrub_surrogates(arrival.payload)))

    @staticmethod
    def _insert_row(conn: sqlite3.Connection, arrival: Arrival) -> tuple[int, bool]:
        payload = arrival.payload
        key = dedup_key(payload, arrival.event_id)
        session_id = payload.get("session_id")
        return store_inbox.insert_event(
            conn,
            key,
            (
                str(payload.get("hook_event_name", "")),
                session_id if isinstance(session_id, str) else None,
                json.dumps(payload, ensure_ascii=False, default=str),
                arrival.received_at or time.time(),
                arrival.branch,
                arrival.agent_id,
                arrival.origin,
                arrival.route,
            ),
        )

    def claim(self, limit: int = 64) -> list[InboxEvent]:
        """The oldest pending events that are due (retries wait for their backoff)."""
        rows = store_inbox.due_events(self.db.reader(), limit)
        return [
            InboxEvent(
                id=r["id"],
                event=r["event"],
                session_id=r["session_id"],
                payload=json.loads(r["payload"]),
                attempts=r["attempts"],
                branch=r["branch"],
                agent_id=r["agent_id"],
                received_at=r["received_at"],
                origin=r["origin"],
                route=r["route"],
            )
            for r in rows
        ]

    @staticmethod
    def mark_done(conn: sqlite3.Connection, event_id: int) -> None:
        store_inbox.mark_done(conn, event_id)

    def defer(self, event: InboxEvent, error: str, delay: float) -> None:
        """Leave the event pending and try again after `delay` (a failed Claude call)."""
        from memory_anchor.worker.store.quarantine import Tries

        with self.db.transaction() as conn:
            Tries.deferred(conn, event.id, error, delay)

    def fail(self, event: InboxEvent, error: str) -> bool:
        """Count a processing error: retry after a backoff, or park the event in quarantine
        after QUARANTINE_AFTER tries (kept, not lost). True when it was quarantined."""
        from memory_anchor.worker.store.quarantine import QUARANTINE_AFTER, Quarantine, Tries

        attempts = event.attempts + 1
        with self.db.transaction() as conn:
            if attempts >= QUARANTINE_AFTER:
                Quarantine.park_event(conn, event.id, event.event, event.session_id, error, attempts)
                return True
            Tries.failed(conn, event.id, attempts, error)
        return False

    def captured_sessions(self, session_ids: list[str]) -> set[str]:
        """Those of these sessions that a hook captured (any event not imported from history)."""
        return store_inbox.sessions_in(self.db.reader(), session_ids, hooks_only=True)

    def known_sessions(self, session_ids: list[str]) -> set[str]:
        """Those of these sessions memory has seen: captured live or imported."""
        return store_inbox.sessions_in(self.db.reader(), session_ids, hooks_only=False)

    def has_pending(self, session_id: str, received_before: float | None = None) -> bool:
        """Whether an event of this session (received before `received_before`, if given) waits to be processed."""
        return store_inbox.has_pending(self.db.reader(), session_id,
                                       float("inf") if received_before is None else received_before)  # fmt: skip

    @contextmanager
    def in_hand(self, event_ids: list[int]) -> Iterator[None]:
        """While the pipeline processes these events. An event is marked done with its records, and
        what follows from it (the facts extracted from a prompt) is written after that commit: until
        then it still counts as pending, so "nothing pending" means every event's work is written."""
        self._in_hand = frozenset(event_ids)
        try:
            yield
        finally:
            self._in_hand = frozenset()

    def counts(self) -> dict[str, int]:
        """Events by status; `quarantined` counts everything parked (events and unembeddable records).
        An event whose processing is under way counts as pending even once it is marked done."""
        conn = self.db.reader()
        found = store_inbox.counts(conn)
        in_hand = list(self._in_hand)
        finishing = store_inbox.done_among(conn, in_hand) if in_hand else 0
        if finishing:
            found["pending"] = found.get("pending", 0) + finishing
            found["done"] = found.get("done", 0) - finishing
        return found

    def ingest_spool(self, spool: Path) -> int:
        """Move events hooks spooled while the worker was away into the inbox.

        The file is renamed first so hooks that spool meanwhile start a new one;
        a line that is not valid JSON (a torn write) is kept aside, not dropped.
        """
        if not spool.exists():
            return 0
        claimed = spool.with_name(f"{spool.name}.{os.getpid()}.{int(time.time() * 1000)}.ingesting")
        lock_fd = spool_lock.hold_alone(str(spool))
        try:
            os.replace(spool, claimed)
        except FileNotFoundError:
            return 0
        finally:
            spool_lock.release(lock_fd)
        arrivals: list[Arrival] = []
        rejects: list[str] = []
        # Lines end with "\n" only: splitlines() would also cut at U+2028 or \x85 inside a JSON string,
        # and reading as text would cut at a stray "\r" (a torn line's garbage), rejecting it as two.
        for line in claimed.read_bytes().decode("utf-8", errors="replace").split("\n"):
            if not line.strip():
                continue
            try:
                arrival = spool_arrival(line)
            except (ValueError, KeyError, TypeError) as exc:
                rejects.append(json.dumps({"reason": str(exc), "line": line}, ensure_ascii=False))
            else:
                arrivals.append(replace(arrival, payload=self._clean(arrival.payload)))
        for start in range(0, len(arrivals), SPOOL_BATCH):
            self.accept_many(arrivals[start : start + SPOOL_BATCH])
        count = len(arrivals)
        if rejects:
            with open(spool.with_name("spool.rejected.jsonl"), "a", encoding="utf-8") as handle:
                handle.write("\n".join(rejects) + "\n")
            log.warning("kept %d unreadable or refused spool lines in spool.rejected.jsonl", len(rejects))
        claimed.unlink()
        return count

    def recover_claimed_spools(self, spool: Path) -> int:
        """Ingest spool files a previous worker renamed but died before finishing."""
        total = 0
        for leftover in sorted(spool.parent.glob(f"{spool.name}.*.ingesting")):
            target = spool.with_name(f"{spool.name}.recovered")
            os.replace(leftover, target)
            total += self.ingest_spool(target)
        return total
