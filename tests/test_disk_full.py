"""A full disk gets a clear error (507 storage_full), a log line that says so, and loses nothing.

The real test puts the data dir on a small tmpfs it mounts (root only; CI runs
as root) and fills it. Without root it is skipped with a message; the checks
below it still prove the classification on real SQLite and OS errors.
"""

from __future__ import annotations

import errno
import json
import os
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import start_worker, tool_use_event
from tests.test_hooks import hook_env, run_hook, spool_lines
from memory_anchor.worker.store.disk import RESERVE_BYTES, DiskGuard, is_storage_full

FS_SIZE = "96m"


@pytest.fixture
def small_fs(tmp_path: Path):
    """A tmpfs of FS_SIZE mounted for this test, unmounted after it."""
    if os.geteuid() != 0:
        pytest.skip("the disk-full test mounts a small tmpfs and needs root (CI runs as root)")
    mount_point = tmp_path / "fs"
    mount_point.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={FS_SIZE}", "tmpfs", str(mount_point)],
                          capture_output=True, text=True)  # fmt: skip
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], capture_output=True)


def fill(path: Path) -> None:
    """Write `path` until the filesystem has not one byte left."""
    with open(path, "ab", buffering=0) as handle:
        for chunk in (1 << 20, 1 << 12, 1):
            while True:
                try:
                    handle.write(b"\0" * chunk)
                except OSError as exc:
                    assert exc.errno == errno.ENOSPC
                    break


def test_a_full_disk_gives_507_storage_full_and_loses_nothing(small_fs: Path):
    data_dir = small_fs / "data"
    worker = start_worker(data_dir)
    try:
        acknowledged = []
        for n in range(5):
            status, body = worker.request("POST", "/api/v1/events", tool_use_event("before", n))
            assert status == 202, body
            acknowledged.append(body["id"])
        reserve = data_dir / "logs" / "disk-full.reserve"
        assert reserve.stat().st_size == RESERVE_BYTES

        fill(small_fs / "filler")
        answers = []
        for n in range(400):  # SQLite reuses free pages for a while; it runs out soon after
            event = tool_use_event("while-full", n, output=f"output {n} " + "x" * 30_000)
            status, body = worker.request("POST", "/api/v1/events", event)
            answers.append(status)
            if status == 202:
                acknowledged.append(body["id"])
            elif status == 507:
                assert body["error"]["code"] == "storage_full"
                assert "full" in body["error"]["message"]
                break
            else:
                raise AssertionError((status, body))
        assert answers[-1] == 507, answers[-5:]

        # The API's writes answer the same way once what the freed reserve made room for is used: an add
        # is acknowledged only when it is committed, so one that fitted is kept (checked below).
        added = []
        for n in range(50):
            status, body = worker.request("POST", "/api/v1/memories", {"content": f"m{n} " + "y" * 50_000, "infer": False})
            if status != 200:
                break
            added.extend(r["id"] for r in body["results"])
        assert (status, body["error"]["code"]) == (507, "storage_full"), (body, worker_log_tail(data_dir))
        # The log says what happened (the reserve the worker freed made room for the line).
        log_text = (data_dir / "logs" / "worker.log").read_text()
        assert "disk full" in log_text and "507 storage_full" in log_text
        assert not reserve.exists()
        # A hook whose event the worker refuses exits 0, prints nothing, and spools the event if
        # there is room (SQLite's own retries may have used what the reserve freed).
        hook_payload = tool_use_event("hook-while-full", 1)
        done = run_hook("PostToolUse", hook_payload, hook_env(data_dir))
        assert done.returncode == 0 and done.stdout == b""
        spooled = [line["payload"]["tool_use_id"] for line in spool_lines(data_dir)]

        (small_fs / "filler").unlink()  # space is back
        status, body = worker.request("POST", "/api/v1/events", tool_use_event("after", 1))
        assert status == 202, body
        acknowledged.append(body["id"])
        deadline = time.monotonic() + 60
        while "disk space is back" not in (data_dir / "logs" / "worker.log").read_text():
            assert time.monotonic() < deadline, "the worker never noticed that space was back"
            time.sleep(0.2)
        assert reserve.exists()
        worker.wait_idle()
    finally:
        worker.stop()

    # Every acknowledged event is in the inbox, and so is what the hook spooled.
    db = sqlite3.connect(data_dir / "memory.sqlite3")
    stored = {row[0] for row in db.execute("SELECT id FROM inbox")}
    memories = {row[0] for row in db.execute("SELECT id FROM records WHERE kind = 'memory'")}
    tool_uses = {row[0] for row in db.execute("SELECT json_extract(payload, '$.tool_use_id') FROM inbox")}
    db.close()
    assert set(acknowledged) <= stored
    assert set(added) <= memories  # every add acknowledged while the disk was full
    assert set(spooled) <= tool_uses  # spooled when there was room for it, then ingested


def test_disk_full_errors_are_recognised_in_any_wrapping(tmp_path: Path):
    """A real SQLITE_FULL (a page limit stands in for the disk), ENOSPC, and either one wrapped."""
    db = sqlite3.connect(tmp_path / "tiny.sqlite3")
    db.execute("CREATE TABLE t (x BLOB)")
    db.execute("PRAGMA max_page_count = 3")
    with pytest.raises(sqlite3.OperationalError) as full:
        for _ in range(10):
            db.execute("INSERT INTO t VALUES (zeroblob(4096))")
    db.close()
    assert is_storage_full(full.value)
    assert is_storage_full(OSError(errno.ENOSPC, "No space left on device"))
    try:
        try:
            raise OSError(errno.EDQUOT, "Disk quota exceeded")
        except OSError as exc:
            raise RuntimeError("chroma could not write") from exc
    except RuntimeError as wrapped:
        assert is_storage_full(wrapped)
    assert not is_storage_full(sqlite3.OperationalError("database is locked"))
    assert not is_storage_full(ValueError("bad input"))


def test_the_guard_frees_its_reserve_logs_once_and_notices_recovery(tmp_path: Path, caplog):
    guard = DiskGuard(tmp_path, tmp_path / "logs")
    guard.keep_reserve()
    assert guard.reserve.stat().st_size == RESERVE_BYTES
    with caplog.at_level("INFO", logger="memory_anchor.worker.store.disk"):
        guard.report(OSError(errno.ENOSPC, "No space left on device"), "POST /api/v1/events")
        guard.report(OSError(errno.ENOSPC, "No space left on device"), "POST /api/v1/events")
        assert not guard.reserve.exists()
        assert [r.levelname for r in caplog.records] == ["ERROR"]  # once, not once per request
        assert "disk full" in caplog.records[0].getMessage()
        assert guard.check_recovered()  # this tmp dir has room
    assert guard.reserve.exists() and guard.full_since is None
    assert "disk space is back" in json.dumps([r.getMessage() for r in caplog.records])


def worker_log_tail(data_dir: Path, lines: int = 40) -> str:
    """What the worker said last: the reason a write was not recognised as a full disk."""
    try:
        return "\n".join((data_dir / "logs" / "worker.log").read_text(errors="replace").splitlines()[-lines:])
    except OSError as exc:
        return f"(no worker log: {exc})"
