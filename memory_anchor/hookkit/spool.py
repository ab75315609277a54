"""Keep an event the worker could not take, for the worker to ingest when it is up.

One JSON object per line in `<data dir>/spool.jsonl`:
`{"id", "received_at", "branch", "agent_id", "payload"}`; `id` is the event id the
hook also sent as `X-Memory-Anchor-Event-Id`, so an event that did reach the
worker before a timeout is stored once. Each line is written with a single
`write()` on an O_APPEND descriptor: concurrent hooks never interleave lines.

The spool is capped (`spool_max_mb`, 100 MB by default): a worker that stays
unreachable for weeks must not fill the disk, and the worker reads a spool
whole when it ingests it. Past the cap the oldest events go, the newest three
quarters of the cap are kept (so trimming is rare), and `spool.dropped` counts
what was lost for SessionStart to tell the user.
"""

from __future__ import annotations

import os
import time


def spool_entry(
    event_id: str, raw_payload: bytes, event_name: str, branch: str | None, agent_id: str | None
) -> bytes:
    """The spool line (with its newline) for one event as Claude Code sent it."""
    import json

    text = raw_payload.decode("utf-8", "replace")
    try:
        payload = json.loads(text)
        if not isinstance(payload, dict):
            raise ValueError("not an object")
    except ValueError:
        # Not what Claude Code normally sends: keep the text rather than lose it.
        payload = {"hook_event_name": event_name, "unparsed_payload": text}
    payload.setdefault("hook_event_name", event_name)
    entry = {
        "id": event_id,
        "received_at": time.time(),
        "branch": branch,
        "agent_id": agent_id,
        "payload": payload,
    }
    return (json.dumps(entry, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")


DEFAULT_CAP_MB = 100.0
CAP_ENV = "MEMORY_ANCHOR_SPOOL_MAX_MB"
KEEP_FRACTION = 0.75
DROPPED_MARKER = "spool.dropped"


def cap_bytes(data_dir: str) -> int:
    """The cap: `$MEMORY_ANCHOR_SPOOL_MAX_MB`, else settings.json's `spool_max_mb`, else 100 MB."""
    value = os.environ.get(CAP_ENV, "").strip()
    if not value:
        try:
            with open(os.path.join(data_dir, "settings.json"), encoding="utf-8") as handle:
                import json

                value = json.load(handle).get("spool_max_mb")
        except (OSError, ValueError, AttributeError):
            value = None
    try:
        megabytes = float(value) if value not in (None, "") else DEFAULT_CAP_MB
    except (TypeError, ValueError):
        megabytes = DEFAULT_CAP_MB
    return int(max(megabytes, 0.01) * 1024 * 1024)


def append(spool_file: str, line: bytes, cap: int | None = None) -> int:
    """Append one line atomically; past `cap` bytes trim to the newest events.

    Returns how many old events were dropped (0 nearly always); raises OSError
    (disk full, read-only) for the caller to log.
    """
    directory = os.path.dirname(spool_file)
    if directory:
        os.makedirs(directory, 0o700, exist_ok=True)
    lock_fd = _lock(spool_file, shared=True) if cap is not None else None
    try:
        fd = os.open(spool_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            written = os.write(fd, line)
            size = os.fstat(fd).st_size
        finally:
            os.close(fd)
    finally:
        if lock_fd is not None:
            os.close(lock_fd)
    if written != len(line):
        raise OSError(f"short write to {spool_file}: {written} of {len(line)} bytes")
    if cap is not None and size > cap:
        return trim(spool_file, int(cap * KEEP_FRACTION), cap)
    return 0


def trim(spool_file: str, keep_bytes: int, cap: int) -> int:
    """Drop the oldest events so that about `keep_bytes` of the newest remain; returns how many went.

    The file is taken away by rename (as the worker does when it ingests it), its
    tail written to a new file, and that file linked back into place; events that
    hooks spooled meanwhile are moved behind the kept ones, so order is kept.
    One hook trims at a time, while no other appends (flock: appenders share the lock).
    """
    try:
        lock_fd = _lock(spool_file, shared=False)
    except BlockingIOError:
        return 0  # another hook is appending or trimming: a later append trims
    try:
        try:
            if os.stat(spool_file).st_size <= cap:
                return 0  # trimmed (or ingested) since we looked
        except FileNotFoundError:
            return 0
        stem = f"{spool_file}.{os.getpid()}"
        claimed, kept = stem + ".trimming", stem + ".kept"
        os.replace(spool_file, claimed)
        dropped = _write_tail(claimed, kept, keep_bytes)
        while True:
            try:
                os.link(kept, spool_file)
                break
            except FileExistsError:  # hooks spooled meanwhile: their events go after the kept ones
                newer = stem + ".newer"
                os.replace(spool_file, newer)
                _append_file(newer, kept)
                os.remove(newer)
            except OSError:  # no hard links on this file system: append, order slightly off
                _append_file(kept, spool_file)
                break
        os.remove(kept)
        os.remove(claimed)
        _count_dropped(os.path.join(os.path.dirname(spool_file), DROPPED_MARKER), dropped, cap)
        return dropped
    finally:
        if lock_fd is not None:
            os.close(lock_fd)


def hold_alone(spool_file: str, wait_seconds: float = 2.0) -> int | None:
    """The spool lock held exclusively, for the worker's rename before it ingests: once it
    holds it, no hook is between opening `spool.jsonl` and finishing its write, so no event
    lands in a file already read. Appenders hold it for microseconds; after `wait_seconds`
    the rename goes ahead unlocked (None), as it does where there is no flock."""
    import time

    deadline = time.monotonic() + wait_seconds
    while True:
        try:
            return _lock(spool_file, shared=False)
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return None
            time.sleep(0.005)


def release(lock_fd: int | None) -> None:
    if lock_fd is not None:
        os.close(lock_fd)


def _lock(spool_file: str, shared: bool) -> int | None:
    """Appenders share `spool.jsonl.lock`, a trimmer holds it alone: no event is written into
    a file the trimmer has already read. None where there is no flock (Windows)."""
    try:
        import fcntl
    except ImportError:
        return None
    fd = os.open(spool_file + ".lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH if shared else fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _write_tail(source: str, target: str, keep_bytes: int) -> int:
    """Copy the whole lines in the last `keep_bytes` of source to target; returns the lines left out."""
    with open(source, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        start = max(0, size - keep_bytes)
        dropped = 0
        position = 0
        while position < start:  # count the dropped lines without holding them in memory
            chunk = handle.read(min(1 << 20, start - position))
            if not chunk:
                break
            dropped += chunk.count(b"\n")
            position += len(chunk)
        tail = handle.read()
    if start > 0 and not _ends_line(source, start):
        newline = tail.find(b"\n")  # the line cut in two is dropped whole
        tail = tail[newline + 1 :] if newline >= 0 else b""
        dropped += 1
    with open(target, "wb") as out:
        out.write(tail)
    return dropped


def _ends_line(path: str, offset: int) -> bool:
    """Whether the byte before `offset` is a newline (the tail then starts on a whole line)."""
    with open(path, "rb") as handle:
        handle.seek(offset - 1)
        return handle.read(1) == b"\n"


def _append_file(source: str, target: str) -> None:
    with open(source, "rb") as handle:
        data = handle.read()
    if data:
        fd = os.open(target, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)


def _count_dropped(marker: str, dropped: int, cap: int) -> None:
    """Add to the running count of dropped events that SessionStart reports."""
    total = dropped
    try:
        with open(marker, encoding="utf-8") as handle:
            total += int(handle.readline().split()[0])
    except (OSError, ValueError, IndexError):
        pass
    with open(marker, "w", encoding="utf-8") as handle:
        handle.write(f"{total} {megabytes(cap)} {time.time():.0f}\n")


def megabytes(size: int) -> str:
    return f"{size / (1024 * 1024):.3g}"
