"""The quarantine: work that keeps failing is parked here so the rest flows on.

An inbox event whose processing raised QUARANTINE_AFTER times, or a record
version that could not be embedded that many times, gets a row here with its
last error, its attempts and when it was parked; the worker log says so once.
Nothing is deleted: `retry` puts it back in line, `drop` discards it (the user's
call, through `memory-anchor inbox retry|drop ID` or the viewer).

A try is counted before it is made, not only when it raises: the pipeline marks the
events it is about to process with its run (`Tries.begin`, one commit per batch), and a
run that starts finds the marks a dead run left (`Tries.interrupted`): a `kill -9`, a
crash or a hang the user ended mid-event counts as a failed try of each event it held.
Those events are then retried one at a time, so the one that stops the worker is the
only one that runs out of tries.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from typing import Any

from memory_anchor.worker.store.db import Database
from memory_anchor.worker.store.inbox import ERROR_CHARS
from memory_anchor.worker.store.records import NotFound

log = logging.getLogger(__name__)

# Failures (the same event, each try after a backoff) before it is parked.
QUARANTINE_AFTER = 3


INTERRUPTED = "the worker stopped while processing this event (killed, crashed or hung)"


def backoff(attempts: int) -> float:
    """Seconds before the next try of an event that failed `attempts` times."""
    return min(60.0, 2.0**attempts)


class Tries:
    """The durable count of tries of inbox events (see the module docstring)."""

    def __init__(self, db: Database, run_id: str):
        self.db = db
        self.run_id = run_id

    def begin(self, ids: list[int]) -> None:
        """Mark these events as being processed by this run, committed before processing begins."""
        if not ids:
            return
        with self.db.transaction() as conn:
            conn.execute(f"UPDATE inbox SET claimed_by = ? WHERE status = 'pending' AND id IN ({','.join('?' * len(ids))})",
                         (self.run_id, *ids))  # fmt: skip

    def release(self, ids: list[int]) -> None:
        """Unmark events this run left pending without trying them to the end (the store went away,
        the worker is stopping): not a failure of theirs."""
        if not ids:
            return
        with self.db.transaction() as conn:
            conn.executemany("UPDATE inbox SET claimed_by = NULL WHERE id = ? AND claimed_by = ?",
                             [(i, self.run_id) for i in ids])  # fmt: skip

    @staticmethod
    def failed(conn: sqlite3.Connection, event_id: int, attempts: int, error: str) -> None:
        """A try that raised: counted, and the next one after a backoff."""
        conn.execute(
            "UPDATE inbox SET attempts = ?, error = ?, next_attempt = ?, claimed_by = NULL WHERE id = ?",
            (attempts, error[:ERROR_CHARS], time.time() + backoff(attempts), event_id),
        )

    @staticmethod
    def deferred(conn: sqlite3.Connection, event_id: int, error: str, delay: float) -> None:
        """A try put off (Claude unavailable): not counted, the next one after `delay`."""
        conn.execute(
            "UPDATE inbox SET next_attempt = ?, error = ?, claimed_by = NULL WHERE id = ?",
            (time.time() + delay, error[:ERROR_CHARS], event_id),
        )

    def interrupted(self) -> tuple[int, int]:
        """Count a failed try for each pending event an earlier run began and never finished; park
        those out of tries. Returns (counted, quarantined)."""
        counted = parked = 0
        with self.db.transaction() as conn:
            rows = conn.execute(
                """SELECT id, event, session_id, attempts FROM inbox
                   WHERE status = 'pending' AND claimed_by IS NOT NULL AND claimed_by != ?""",
                (self.run_id,),
            ).fetchall()
            now = time.time()
            for row in rows:
                attempts = int(row["attempts"]) + 1
                counted += 1
                if attempts >= QUARANTINE_AFTER:
                    Quarantine.park_event(conn, row["id"], row["event"], row["session_id"], INTERRUPTED, attempts)
                    parked += 1
                else:
                    conn.execute(
                        "UPDATE inbox SET attempts = ?, error = ?, next_attempt = ?, claimed_by = NULL WHERE id = ?",
                        (attempts, INTERRUPTED, now + backoff(attempts), row["id"]),
                    )
        if counted:
            log.warning("%d event(s) were being processed when the worker last stopped: each counted as a failed try "
                        "(%d quarantined); they are retried one at a time", counted, parked)  # fmt: skip
        return counted, parked


class Quarantine:
    def __init__(self, db: Database):
        self.db = db

    @staticmethod
    def park_event(conn: sqlite3.Connection, inbox_id: int, event: str, session_id: str | None, error: str, attempts: int) -> None:
        conn.execute("UPDATE inbox SET status = 'quarantined', attempts = ?, error = ?, claimed_by = NULL WHERE id = ?",
                     (attempts, error[:ERROR_CHARS], inbox_id))  # fmt: skip
        conn.execute(
            """INSERT INTO quarantine(stage, inbox_id, event, session_id, error, attempts, quarantined_at)
               VALUES ('capture', ?, ?, ?, ?, ?, ?)""",
            (inbox_id, event, session_id, error[:ERROR_CHARS], attempts, time.time()),
        )
        log.error(
            "QUARANTINED inbox event %d (%s, session %s) after %d failed attempts: %s. Later events go on; "
            "see `memory-anchor inbox`, then `memory-anchor inbox retry|drop ID`.",
            inbox_id, event, session_id, attempts, error.splitlines()[0][:300] if error else "",
        )  # fmt: skip

    def park_record(self, seq: int, error: str, attempts: int) -> None:
        """A record version that could not be embedded: out of the indexing queue, into quarantine."""
        with self.db.transaction() as conn:
            row = conn.execute("SELECT kind, session_id FROM records WHERE seq = ?", (seq,)).fetchone()
            conn.execute("DELETE FROM pending_vectors WHERE seq = ?", (seq,))
            conn.execute(
                """INSERT OR REPLACE INTO quarantine(stage, record_seq, event, session_id, error, attempts, quarantined_at)
                   VALUES ('index', ?, ?, ?, ?, ?, ?)""",
                (seq, row[0] if row else None, row[1] if row else None, error[:ERROR_CHARS], attempts, time.time()),
            )
        log.error(
            "QUARANTINED record version %d (not embedded) after %d failed attempts: %s. Indexing goes on; "
            "see `memory-anchor inbox`.", seq, attempts, error.splitlines()[0][:300] if error else "",
        )  # fmt: skip

    def count(self) -> int:
        return int(self.db.reader().execute("SELECT count(*) FROM quarantine").fetchone()[0])

    def items(self, limit: int = 100) -> list[dict[str, Any]]:
        """The parked items, newest first, each with its error and a preview of what it was."""
        rows = self.db.reader().execute(
            """SELECT q.*, substr(i.payload, 1, 300) AS preview FROM quarantine q
               LEFT JOIN inbox i ON i.id = q.inbox_id ORDER BY q.id DESC LIMIT ?""",
            (limit,),
        ).fetchall()
        return [dict(row) for row in rows]

    def retry(self, item_id: int) -> dict[str, Any]:
        """Put a parked item back in line, with a fresh count of attempts."""
        with self.db.transaction() as conn:
            item = self._take(conn, item_id)
            if item["stage"] == "capture":
                conn.execute(
                    "UPDATE inbox SET status = 'pending', attempts = 0, next_attempt = 0, error = NULL, claimed_by = NULL "
                    "WHERE id = ?",
                    (item["inbox_id"],),
                )
            else:
                conn.execute("INSERT OR IGNORE INTO pending_vectors(seq) VALUES (?)", (item["record_seq"],))
        log.info("quarantined item %d (%s) put back in line", item_id, item["stage"])
        return {**item, "retried": True}

    def drop(self, item_id: int) -> dict[str, Any]:
        """Discard a parked item for good (a captured event is deleted from the inbox)."""
        with self.db.transaction() as conn:
            item = self._take(conn, item_id)
            if item["stage"] == "capture":
                conn.execute("DELETE FROM inbox WHERE id = ?", (item["inbox_id"],))
        log.info("quarantined item %d (%s) dropped", item_id, item["stage"])
        return {**item, "dropped": True}

    @staticmethod
    def _take(conn: sqlite3.Connection, item_id: int) -> dict[str, Any]:
        row = conn.execute("SELECT * FROM quarantine WHERE id = ?", (item_id,)).fetchone()
        if row is None:
            raise NotFound(f"no quarantined item {item_id}")
        conn.execute("DELETE FROM quarantine WHERE id = ?", (item_id,))
        return dict(row)
