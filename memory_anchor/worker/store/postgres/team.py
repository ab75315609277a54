"""`TeamDatabase`: the team database as the worker holds it, which may be away.

A worker starts whether or not PostgreSQL answers: hooks must keep getting
their 202 (capture is local), so the team database is opened on first use and
opened again after it was lost. While it is away every use raises
`StorageUnavailable` at once, with the reason, rather than each caller waiting
out a connect timeout; one new attempt is made per RETRY_SECONDS.

It has the `Database` contract (`transaction()`, `reader()`, `close()`), so
the store's code and the services use it as they use a `PostgresDatabase`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from memory_anchor.worker.store.postgres.connect import StorageError, StorageUnavailable, check_url, without_password
from memory_anchor.worker.store.postgres.database import Connection, PostgresDatabase

log = logging.getLogger(__name__)

RETRY_SECONDS = 1.0
WAIT_FOR_CONNECT_SECONDS = 1.0


class TeamDatabase:
    def __init__(self, url: str, *, retry_seconds: float = RETRY_SECONDS):
        self.url = check_url(url)  # a malformed URL is a setting to fix, not an outage: it raises now
        self.retry_seconds = retry_seconds
        self._db: PostgresDatabase | None = None
        self._lock = threading.Lock()
        self._next_try = 0.0
        self.down_reason: str | None = None

    @property
    def shown_url(self) -> str:
        """The URL without its password."""
        return without_password(self.url)

    def _open(self) -> PostgresDatabase:
        db = self._db
        if db is not None:
            return db
        # One thread connects; the others wait for it a little (a healthy connect takes milliseconds)
        # but not for a server that does not answer, which holds a connect for its whole timeout:
        # the API's few threads also commit hook events.
        if not self._lock.acquire(timeout=WAIT_FOR_CONNECT_SECONDS):
            raise StorageUnavailable(self.down_reason or "connecting to the team database")
        try:
            if self._db is not None:
                return self._db
            if time.monotonic() < self._next_try:
                raise StorageUnavailable(self.down_reason or "the team database is unreachable")
            try:
                self._db = PostgresDatabase(self.url)
            except StorageError as exc:
                self._went_down(str(exc))
                raise StorageUnavailable(str(exc)) from exc
            if self.down_reason is not None:
                log.warning("the team database at %s is reachable again", self.shown_url)
            self.down_reason = None
            return self._db
        finally:
            self._lock.release()

    def _went_down(self, reason: str) -> None:
        """Called with the lock held."""
        if self.down_reason is None:  # one line per outage, not one per attempt
            log.warning("the team database at %s is unreachable: %s; capture goes on locally", self.shown_url, reason)
        self.down_reason = reason
        self._next_try = time.monotonic() + self.retry_seconds

    def _lost(self, db: PostgresDatabase, exc: StorageUnavailable) -> None:
        """A database that was open stopped answering: drop its pool; the next use opens a new one."""
        with self._lock:
            if self._db is db:
                self._db = None
                self._went_down(str(exc))
            else:
                db = None  # another thread already replaced it
        if db is not None:
            try:
                db.close()
            except Exception:  # closing a pool whose server is gone may complain; it is gone either way
                log.debug("closing the lost pool failed", exc_info=True)

    @contextmanager
    def transaction(self) -> Iterator[Connection]:
        db = self._open()
        try:
            with db.transaction() as conn:
                yield conn
        except StorageUnavailable as exc:
            self._lost(db, exc)
            raise

    def reader(self) -> Connection:
        return self._open().reader()

    def unreachable_reason(self) -> str | None:
        """None when the team database answers now, else why not (asks the server: for status pages)."""
        try:
            db = self._open()
        except StorageUnavailable as exc:
            return str(exc)
        try:
            db.reader().execute("SELECT 1").fetchone()
        except StorageUnavailable as exc:
            self._lost(db, exc)
            return str(exc)
        return None

    def close(self) -> None:
        with self._lock:
            db, self._db = self._db, None
        if db is not None:
            db.close()
