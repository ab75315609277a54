"""`PostgresDatabase`: the store's `Database` contract on a PostgreSQL connection pool.

The store's code takes a connection and runs `conn.execute(sql, params)` with
`?` placeholders, reading rows by column name or index: `Connection` gives a
pooled psycopg connection that face, and `Row` reads like `sqlite3.Row`.

Writes: `transaction()` is one database transaction that first takes the
write-order lock (schema.WRITE_ORDER_LOCK), so seqs come out in commit order
across every worker on the database, and stamps `transaction_started_at` from
the database's clock once the lock is held: one clock for every worker, and
a later transaction never carries an earlier time, so `as_of` a timestamp
always falls between transactions. Reads: `reader()` is the calling thread's
connection (the writer's, inside a write), in autocommit, so a read never
holds a transaction open.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from functools import lru_cache
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool, PoolTimeout

from memory_anchor.worker.store.db import stored_params
from memory_anchor.worker.store.dialect import POSTGRES
from memory_anchor.worker.store.postgres.connect import (
    CONNECT_TIMEOUT_SECONDS,
    StorageError,
    StorageUnavailable,
    check_url,
    connect,
    unreachable,
)
from memory_anchor.worker.store.postgres.placeholders import to_psycopg
from memory_anchor.worker.store.postgres.schema import MIGRATIONS, WRITE_ORDER_LOCK, applied_migrations
from memory_anchor.worker.store.records import RecordError

# The records trigger's words when a later version asks for other privacy than the first's.
PRIVACY_FIXED = "privacy is fixed by its first version"

POOL_MAX_SIZE = 16


class Row(tuple):
    """A result row read by index, by column name, or as a dict, like `sqlite3.Row`."""

    __slots__ = ()
    _index: dict[str, int] = {}

    def __getitem__(self, key):  # type: ignore[override]
        if isinstance(key, str):
            return tuple.__getitem__(self, self._index[key])
        return tuple.__getitem__(self, key)

    def keys(self) -> list[str]:
        return list(self._index)


@lru_cache(maxsize=1024)
def _row_type(names: tuple[str, ...]) -> type[Row]:
    # One class per column list, so a row is a bare tuple plus a shared name index.
    index = {name: n for n, name in enumerate(names)}
    return type("Row", (Row,), {"__slots__": (), "_index": index})


def row_factory(cursor: psycopg.Cursor) -> Any:
    """psycopg's row factory for the store's rows (`Row`), whatever the connection's own is."""
    if cursor.description is None:
        return tuple
    return _row_type(tuple(column.name for column in cursor.description))


class Connection:
    """A psycopg connection that takes the store's SQL: `?` placeholders, `sqlite3.Row`-like rows."""

    dialect = POSTGRES

    def __init__(self, raw: psycopg.Connection):
        self.raw = raw
        self.transaction_started_at: float | None = None

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> psycopg.Cursor:
        cursor = self.raw.cursor(row_factory=row_factory)
        try:
            # Always with parameters (even none): psycopg then formats the query, so a doubled `%` is one `%`.
            return cursor.execute(to_psycopg(sql), tuple(_storable(value) for value in stored_params(sql, params) or ()))
        except psycopg.errors.CheckViolation as exc:
            # The team database fixes a record's privacy by its first version (postgres/schema.py):
            # asking to change it is the request's to correct, not an internal error.
            if PRIVACY_FIXED in str(exc):
                raise RecordError(
                    f"{exc.diag.message_primary}; write a new memory to share or hide it",
                    code="privacy_fixed", status=409,
                ) from exc  # fmt: skip
            raise
        except psycopg.Error as exc:
            _raise_if_unreachable(exc)
            raise

    @property
    def in_transaction(self) -> bool:
        return self.raw.info.transaction_status != psycopg.pq.TransactionStatus.IDLE


class PostgresDatabase:
    """The worker's handle on a team database, as one developer's role."""

    def __init__(self, url: str, *, max_size: int = POOL_MAX_SIZE):
        self.url = check_url(url)
        # One direct connection first: a wrong URL, a server that is down or a refused login is
        # told at once and plainly, where the pool would retry until its timeout and say only that.
        connect(self.url).close()
        self.pool = ConnectionPool(
            self.url,
            min_size=1,
            max_size=max_size,
            kwargs={
                "autocommit": True,
                "row_factory": row_factory,
                "connect_timeout": CONNECT_TIMEOUT_SECONDS,
                # No server-side prepared statements: psycopg prepares a query run 5 times, and
                # after 5 more PostgreSQL may plan it once for any parameters. A generic plan
                # cannot know that `project = ?` keeps 5% of the rows or that a search's terms
                # match thousands: keyword search went from 50 ms to 2.5 s at 20k records on
                # its 11th run (a nested loop over every row, docs/benchmarks.md). Unnamed
                # statements are planned for their values each time; planning costs ~0.5 ms.
                "prepare_threshold": None,
            },
            # A caller waits this long for a connection when the server went away, not the pool's 30 s.
            timeout=CONNECT_TIMEOUT_SECONDS,
            open=False,
        )
        try:
            self.pool.open(wait=True, timeout=CONNECT_TIMEOUT_SECONDS)
        except PoolTimeout as exc:
            self.pool.close()
            raise StorageError(f"PostgreSQL did not give a connection within {CONNECT_TIMEOUT_SECONDS} s") from exc
        self._local = threading.local()
        self._readers: list[psycopg.Connection] = []
        self._readers_lock = threading.Lock()
        self._check_schema()

    def _check_schema(self) -> None:
        with self.pool.connection() as raw:
            have = applied_migrations(raw)
        missing = [name for name, _ in MIGRATIONS if name not in have]
        if missing:
            raise StorageError(
                f"the database's schema lacks {', '.join(missing)}: "
                "the database owner runs `memory-anchor storage init URL` (it creates and upgrades it)"
            )

    @contextmanager
    def transaction(self) -> Iterator[Connection]:
        """A write transaction; commits on success, rolls back on error. Nested use joins the outer one."""
        current = getattr(self._local, "writer", None)
        if current is not None:
            yield current
            return
        try:
            with self.pool.connection() as raw:
                conn = Connection(raw)
                with raw.transaction():
                    conn.execute("SELECT pg_advisory_xact_lock(?)", (WRITE_ORDER_LOCK,))
                    conn.transaction_started_at = float(
                        conn.execute("SELECT extract(epoch FROM clock_timestamp())").fetchone()[0]
                    )
                    self._local.writer = conn
                    try:
                        yield conn
                    finally:
                        self._local.writer = None
                        conn.transaction_started_at = None
        except psycopg.Error as exc:  # the pool without a connection, or the COMMIT cut off
            _raise_if_unreachable(exc)
            raise

    def reader(self) -> Connection:
        """A read connection for the calling thread (the writer's, inside a write)."""
        writer = getattr(self._local, "writer", None)
        if writer is not None:
            return writer
        conn = getattr(self._local, "reader", None)
        if conn is not None and (conn.raw.broken or conn.raw.closed):
            # The server restarted or the network dropped since: hand it back (the pool discards it).
            self._forget_reader(conn)
            conn = None
        if conn is None:
            try:
                raw = self.pool.getconn()
            except psycopg.Error as exc:
                _raise_if_unreachable(exc)
                raise
            conn = Connection(raw)
            self._local.reader = conn
            with self._readers_lock:
                self._readers.append(raw)
        return conn

    def _forget_reader(self, conn: Connection) -> None:
        self._local.reader = None
        with self._readers_lock:
            if conn.raw in self._readers:
                self._readers.remove(conn.raw)
        try:
            self.pool.putconn(conn.raw)
        except psycopg.Error:
            pass

    def close(self) -> None:
        with self._readers_lock:
            for raw in self._readers:
                self.pool.putconn(raw)
            self._readers.clear()
        self.pool.close()


def _storable(value: Any) -> Any:
    """PostgreSQL's text cannot hold U+0000, which SQLite keeps and captured tool output carries
    (binary files, `\\0`-separated listings): it becomes U+FFFD, the replacement character, so the
    event is stored rather than quarantined, and a lookup by such a name finds nothing, as on SQLite."""
    return value.replace("\x00", "\ufffd") if isinstance(value, str) and "\x00" in value else value


def _raise_if_unreachable(exc: psycopg.Error) -> None:
    """A driver error that means the server is out of reach goes on as StorageUnavailable."""
    if unreachable(exc):
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise StorageUnavailable(f"PostgreSQL is unreachable: {reason}") from exc
