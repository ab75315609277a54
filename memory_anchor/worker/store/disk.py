"""A full disk: recognising it, saying so in the log, and keeping room to say it.

SQLite reports a full disk as SQLITE_FULL ("database or disk is full"), files
as OSError ENOSPC (or EDQUOT past a quota); Chroma and others wrap either. Any
of them anywhere in an exception's chain makes `is_storage_full` true, and the
API answers 507 `storage_full` instead of a 500: nothing already stored is
lost, and writes succeed again as soon as there is space.

A log line written when the disk is full would fail like everything else, so
the worker keeps a small reserve file beside its log. `DiskGuard.report` first
deletes it, then logs the one line the user needs (and at most one a minute);
the freed room also lets hooks spool the events the worker refused. Once space
is back, `check_recovered` says so and puts the reserve back.
"""

from __future__ import annotations

import errno
import logging
import os
import shutil
import sqlite3
import threading
import time
from pathlib import Path

log = logging.getLogger(__name__)

SQLITE_FULL = 13
FULL_MESSAGES = ("database or disk is full", "no space left on device", "disk quota exceeded")
RESERVE_BYTES = 256 * 1024
RESERVE_NAME = "disk-full.reserve"
LOG_EVERY_SECONDS = 60.0


def is_storage_full(exc: BaseException | None) -> bool:
    """Whether `exc`, or any exception it was raised from, means the disk is full."""
    seen = 0
    while exc is not None and seen < 16:
        if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        if isinstance(exc, sqlite3.Error) and getattr(exc, "sqlite_errorcode", None) == SQLITE_FULL:
            return True
        if any(text in str(exc).lower() for text in FULL_MESSAGES):
            return True
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return False


class DiskGuard:
    """Watches the data dir's disk: one log line when it fills, one when space is back."""

    def __init__(self, data_dir: Path, reserve_dir: Path):
        self.data_dir = Path(data_dir)
        self.reserve = Path(reserve_dir) / RESERVE_NAME
        self.full_since: float | None = None
        self._last_logged = 0.0
        self._lock = threading.Lock()

    def keep_reserve(self) -> None:
        """Make sure the reserve file exists (quietly skipped when there is no room for it)."""
        if self.reserve.exists() and self.reserve.stat().st_size >= RESERVE_BYTES:
            return
        try:
            self.reserve.parent.mkdir(parents=True, exist_ok=True)
            with open(self.reserve, "wb") as handle:
                handle.write(b"\0" * RESERVE_BYTES)
                handle.flush()
                os.fsync(handle.fileno())
        except OSError:
            self.reserve.unlink(missing_ok=True)

    def report(self, exc: BaseException, where: str) -> None:
        """A write failed for lack of space: free the reserve and say so (once a minute at most)."""
        with self._lock:
            now = time.time()
            first = self.full_since is None
            if first:
                self.full_since = now
                self.reserve.unlink(missing_ok=True)
            if not first and now - self._last_logged < LOG_EVERY_SECONDS:
                return
            self._last_logged = now
        log.error(
            "disk full: no space left for the data in %s (%s free); %s failed: %s. "
            "Requests get 507 storage_full and hooks spool their events until space is freed; "
            "nothing already stored is lost",
            self.data_dir, _human(self.free_bytes()), where, exc,
        )  # fmt: skip

    def explains(self, exc: BaseException) -> bool:
        """Whether a failure is the full disk's doing: the error says so, or next to no room is
        left. The second matters because libraries do not always say it: Chroma, failing to open
        on a full disk, ends in an AttributeError from its own clean-up."""
        return is_storage_full(exc) or self.free_bytes() < 4 * RESERVE_BYTES

    def check_recovered(self) -> bool:
        """After a full disk: True (and a log line, and the reserve back) once there is room again."""
        if self.full_since is None or self.free_bytes() < 4 * RESERVE_BYTES:
            return False
        with self._lock:
            if self.full_since is None:
                return False
            lasted = time.time() - self.full_since
            self.full_since = None
        self.keep_reserve()
        log.warning("disk space is back (%s free) after %.0f s full; writes go on", _human(self.free_bytes()), lasted)
        return True

    def free_bytes(self) -> int:
        try:
            return shutil.disk_usage(self.data_dir).free
        except OSError:
            return 0


def _human(size: int) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "bytes" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size} bytes"
