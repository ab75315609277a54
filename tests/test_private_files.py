"""The data dir is its user's alone: 0700, its files 0600, on a new install and on an existing one.

A real worker on a machine whose umask lets others read (022, the usual default): what it writes
(the database, its WAL and SHM, the vector index, the briefing cache, the logs) is private. An
install an earlier version left readable (0644 files in 0755 folders) is made private at the
worker's next start, the plugin's own Python environment keeps what makes it run.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from memory_anchor.core import paths
from tests.conftest import start_worker, tool_use_event


def _loose(data_dir: Path) -> list[str]:
    """Every path under the data dir that a group or another user may use, with its mode."""
    found = []
    for path in [data_dir, *data_dir.rglob("*")]:
        if paths.ENVIRONMENT in path.relative_to(data_dir).parts[:1] or path.is_symlink():
            continue
        mode = stat.S_IMODE(path.lstat().st_mode)
        if mode & 0o077:
            found.append(f"{oct(mode)} {path.relative_to(data_dir)}")
    return found


def _use(worker) -> None:
    """Write everything a session writes: events, records, vectors, a briefing cached, the log."""
    for n in range(3):
        worker.post("/api/v1/events", tool_use_event("private", n, cwd=str(worker.data_dir.parent / "project")), expect=202)
    worker.post("/api/v1/memories", {"content": "The staging password rotates on Mondays", "infer": False, "user_id": "me"})
    worker.wait_idle()
    worker.get(f"/api/v1/context?project={worker.data_dir.parent / 'project'}")


def _expected_files(data_dir: Path) -> None:
    db = paths.database_path(data_dir)
    for path in (data_dir, db, Path(f"{db}-wal"), Path(f"{db}-shm"), paths.log_path(data_dir), data_dir / paths.LOGS,
                 paths.chroma_path(data_dir) / "chroma.sqlite3", data_dir / paths.CONTEXT_CACHE):
        assert path.exists(), path  # the check below would pass on files that are not there


def test_a_new_install_is_private_whatever_the_umask(tmp_path):
    (tmp_path / "project").mkdir()
    previous = os.umask(0o022)
    try:
        worker = start_worker(tmp_path / "data")
    finally:
        os.umask(previous)
    try:
        _use(worker)
        _expected_files(worker.data_dir)
        assert stat.S_IMODE(worker.data_dir.stat().st_mode) == 0o700
        assert stat.S_IMODE(paths.database_path(worker.data_dir).stat().st_mode) == 0o600
        assert _loose(worker.data_dir) == []
    finally:
        worker.stop()


def test_an_existing_install_is_made_private_at_the_next_start(tmp_path):
    (tmp_path / "project").mkdir()
    data_dir = tmp_path / "data"
    worker = start_worker(data_dir)
    try:
        _use(worker)
    finally:
        worker.stop()
    # as an earlier version left it: readable by everyone, folders open
    script = data_dir / paths.ENVIRONMENT / "bin" / "tool"
    script.parent.mkdir(parents=True)
    script.write_text("#!/bin/sh\necho ok\n")
    (data_dir / "chroma").mkdir(exist_ok=True)
    (data_dir / "chroma" / "index.bin").write_bytes(b"\0" * 16)
    for path in [data_dir, *data_dir.rglob("*")]:
        os.chmod(path, 0o755 if path.is_dir() or path == script else 0o644)
    assert _loose(data_dir)

    worker = start_worker(data_dir)
    try:
        _expected_files(data_dir)
        assert _loose(data_dir) == []
        assert stat.S_IMODE(data_dir.stat().st_mode) == 0o700
        assert stat.S_IMODE((data_dir / "chroma").stat().st_mode) == 0o700
        assert stat.S_IMODE(paths.database_path(data_dir).stat().st_mode) == 0o600
        assert stat.S_IMODE((data_dir / paths.LOGS).stat().st_mode) == 0o700
        assert stat.S_IMODE(paths.log_path(data_dir).stat().st_mode) == 0o600
        assert os.access(script, os.X_OK)  # the environment still runs
        _use(worker)
        assert _loose(data_dir) == []
    finally:
        worker.stop()
