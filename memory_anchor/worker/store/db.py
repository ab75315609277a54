"""The SQLite database: connections, pragmas, transactions and migrations.

One writer: every write goes through `Database.transaction()`, which holds a
process-wide lock and a `BEGIN IMMEDIATE` transaction, so a write waits for a
lock instead of failing. Reads use a per-thread connection; WAL mode lets them
run beside the writer and see only committed data.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from memory_anchor.core.redact import redact_stored

from memory_anchor.worker.store.cjk import SQL_FUNCTION, index_words
from memory_anchor.worker.store.dialect import SQLITE

BUSY_TIMEOUT_MS = 30_000


class Connection(sqlite3.Connection):
    """A connection that knows when its current write transaction began, and the storage door.

    Records stamp every row a transaction writes with that one time, so a
    timestamp `as_of` always falls between transactions, never inside one.
    Every text an INSERT or UPDATE writes is redacted here (`stored_params`).
    """

    dialect = SQLITE
    transaction_started_at: float | None = None

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:  # type: ignore[override]
        return super().execute(sql, stored_params(sql, parameters))

    def executemany(self, sql: str, seq_of_parameters: Any, /) -> sqlite3.Cursor:  # type: ignore[override]
        return super().executemany(sql, [stored_params(sql, p) for p in seq_of_parameters])


_WRITES = ("INSERT", "UPDATE", "REPLACE", "UPSERT")


def stored_params(sql: str, params: Any) -> Any:
    """The parameters of a statement, with every text redacted when the statement writes.

    The one place secrets are kept out of storage: whatever a layer above writes (a record's
    text, data and metadata with their keys, a forget's reason, an actor, a branch's or a
    snapshot's description, a proposal, an inbox payload) passes here on its way to disk,
    on both engines (postgres/database.py calls this too). Reads are left alone."""
    if not params or not sql.lstrip()[:7].upper().startswith(_WRITES):
        return params
    if isinstance(params, Mapping):
        return {k: redact_stored(v) if isinstance(v, str) else v for k, v in params.items()}
    return [redact_stored(v) if isinstance(v, str) else v for v in params]


def connect(path: Path | str) -> Connection:
    conn = sqlite3.connect(
        str(path), timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False, factory=Connection
    )
    conn.row_factory = sqlite3.Row
    conn.execute("PRAGMA journal_mode=WAL")
    # NORMAL in WAL mode survives a process crash or SIGKILL (what we promise);
    # only an OS crash or power cut can lose the last commits.
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    # Bytes a DELETE or UPDATE frees are zeroed, not left in free pages and cells: a purged text
    # (store/purge.py), a deleted branch's rows or a dropped inbox event must not stay readable
    # in the file. Records are append-only, so it costs little (README: "Forgetting for good").
    conn.execute("PRAGMA secure_delete=ON")
    conn.execute("PRAGMA foreign_keys=ON")
    # The keyword index's triggers call it (migration 0005_cjk_keywords): every connection that writes needs it.
    conn.create_function(SQL_FUNCTION, 1, index_words, deterministic=True)
    return conn


class Database:
    """The worker's handle on memory.sqlite3."""

    def __init__(self, path: Path | str):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._write_lock = threading.RLock()
        self._writer = connect(self.path)
        self._local = threading.local()
        self._readers: list[sqlite3.Connection] = []
        self._readers_lock = threading.Lock()
        from memory_anchor.worker.store.migrations import apply_migrations

        with self.transaction() as conn:
            apply_migrations(conn)

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """An immediate write transaction; commits on success, rolls back on error."""
        with self._write_lock:
            conn = self._writer
            if conn.in_transaction:  # nested use joins the outer transaction
                yield conn
                return
            _begin_immediate(conn)
            conn.transaction_started_at = time.time()
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            else:
                conn.execute("COMMIT")
            finally:
                conn.transaction_started_at = None

    def checkpoint(self) -> None:
        """Copy the write-ahead log into the database and truncate it (after a purge: the pages
        that held the purged text must not linger in the -wal file)."""
        with self._write_lock:
            self._writer.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def reader(self) -> sqlite3.Connection:
        """A read connection for the calling thread (the writer's, inside a write)."""
        if self._writer.in_transaction and self._write_lock._is_owned():  # type: ignore[attr-defined]
            return self._writer
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = connect(self.path)
            conn.execute("PRAGMA query_only=ON")
            self._local.conn = conn
            with self._readers_lock:
                self._readers.append(conn)
        return conn

    def release_memory(self) -> None:
        """Hand back the page caches every connection filled (up to 2 MB each, a connection per
        thread): when the worker is idle after a burst. SQLite reads them back on demand."""
        with self._readers_lock:
            readers = list(self._readers)
        for conn in [*readers, self._writer]:
            try:
                conn.execute("PRAGMA shrink_memory")
            except sqlite3.Error:  # closed, or busy in another thread: nothing to hand back now
                pass

    def close(self) -> None:
        with self._readers_lock:
            for conn in self._readers:
                try:
                    conn.close()
                except sqlite3.Error:
                    pass
            self._readers.clear()
        with self._write_lock:
            self._writer.close()


def _begin_immediate(conn: sqlite3.Connection) -> None:
    # busy_timeout covers most waits; this loop covers the rare SQLITE_BUSY that
    # WAL checkpoints raise without waiting, so a write is never dropped.
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            conn.execute("BEGIN IMMEDIATE")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc):
                raise
            if time.monotonic() > deadline:
                raise
            time.sleep(0.01)


@contextmanager
def savepoint(conn, name: str = "step") -> Iterator[None]:
    """One step inside a transaction, undone alone when it raises (the exception goes on): a
    group commit keeps the steps that worked."""
    conn.execute(f"SAVEPOINT {name}")
    try:
        yield
    except BaseException:
        conn.execute(f"ROLLBACK TO {name}")
        raise
    finally:
        conn.execute(f"RELEASE {name}")


def current_role(conn) -> str:
    """The database role a team database connection works as (PostgreSQL's current_user)."""
    return conn.execute("SELECT current_user AS me").fetchone()["me"]
