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
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from worker.store.db import Database

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 8
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
    received_at: float | None = None


class Inbox:
    def __init__(self, db: Database, clean: Callable[[dict[str, Any]], dict[str, Any]] | None = None):
        """`clean` is applied to spooled payloads (hooks spool them raw) before they are stored."""
        self.db = db
        self._clean = clean or (lambda payload: payload)

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
        payload = arrival.payload
        key = dedup_key(payload, arrival.event_id)
        session_id = payload.get("session_id")
        cursor = conn.execute(
            """INSERT INTO inbox(dedup_key, event, session_id, payload, received_at, branch, agent_id)
               VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(dedup_key) DO NOTHING""",
            (
                key,
                str(payload.get("hook_event_name", "")),
                session_id if isinstance(session_id, str) else None,
                json.dumps(payload, ensure_ascii=False, default=str),
                arrival.received_at or time.time(),
                arrival.branch,
                arrival.agent_id,
            ),
        )
        if cursor.rowcount == 1:
            return int(cursor.lastrowid), False
        row = conn.execute("SELECT id FROM inbox WHERE dedup_key = ?", (key,)).fetchone()
        return int(row[0]), True

    def claim(self, limit: int = 64) -> list[InboxEvent]:
        """The oldest pending events that are due (retries wait for their backoff)."""
        rows = self.db.reader().execute(
            """SELECT * FROM inbox WHERE status = 'pending' AND next_attempt <= ?
               ORDER BY id LIMIT ?""",
            (time.time(), limit),
        ).fetchall()
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
            )
            for r in rows
        ]

    @staticmethod
    def mark_done(conn: sqlite3.Connection, event_id: int) -> None:
        conn.execute(
            "UPDATE inbox SET status = 'done', processed_at = ?, error = NULL WHERE id = ?",
            (time.time(), event_id),
        )

    def defer(self, event: InboxEvent, error: str, delay: float) -> None:
        """Leave the event pending and try again after `delay` (a failed Claude call)."""
        with self.db.transaction() as conn:
            conn.execute(
                "UPDATE inbox SET next_attempt = ?, error = ? WHERE id = ?",
                (time.time() + delay, error[:2000], event.id),
            )

    def fail(self, event: InboxEvent, error: str) -> None:
        """Count a processing error; after MAX_ATTEMPTS the event is parked as failed (kept, not lost)."""
        attempts = event.attempts + 1
        status = "failed" if attempts >= MAX_ATTEMPTS else "pending"
        with self.db.transaction() as conn:
            conn.execute(
                "UPDATE inbox SET attempts = ?, status = ?, error = ?, next_attempt = ? WHERE id = ?",
                (attempts, status, error[:2000], time.time() + min(60.0, 2.0**attempts), event.id),
            )

    def has_pending(self, session_id: str) -> bool:
        row = self.db.reader().execute(
            "SELECT 1 FROM inbox WHERE session_id = ? AND status = 'pending' LIMIT 1", (session_id,)
        ).fetchone()
        return row is not None

    def counts(self) -> dict[str, int]:
        rows = self.db.reader().execute("SELECT status, count(*) FROM inbox GROUP BY status").fetchall()
        return {r[0]: r[1] for r in rows}

    def ingest_spool(self, spool: Path) -> int:
        """Move events hooks spooled while the worker was away into the inbox.

        The file is renamed first so hooks that spool meanwhile start a new one;
        a line that is not valid JSON (a torn write) is kept aside, not dropped.
        """
        if not spool.exists():
            return 0
        claimed = spool.with_name(f"{spool.name}.{os.getpid()}.{int(time.time() * 1000)}.ingesting")
        try:
            os.replace(spool, claimed)
        except FileNotFoundError:
            return 0
        arrivals: list[Arrival] = []
        rejects: list[str] = []
        for line in claimed.read_text(encoding="utf-8", errors="replace").splitlines():
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
                payload = entry["payload"]
                if not isinstance(payload, dict):
                    raise ValueError("payload is not an object")
            except (ValueError, KeyError, TypeError):
                rejects.append(line)
                continue
            arrivals.append(
                Arrival(
                    self._clean(payload), entry.get("id"), entry.get("branch"), entry.get("agent_id"),
                    entry.get("received_at"),
                )  # fmt: skip
            )
        for start in range(0, len(arrivals), SPOOL_BATCH):
            self.accept_many(arrivals[start : start + SPOOL_BATCH])
        count = len(arrivals)
        if rejects:
            with open(spool.with_name("spool.rejected.jsonl"), "a", encoding="utf-8") as handle:
                handle.write("\n".join(rejects) + "\n")
            log.warning("kept %d unreadable spool lines in spool.rejected.jsonl", len(rejects))
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
