"""The local Chroma runs in a child process (memory_anchor/worker/index/chroma_child.py).

The worker never imports chromadb: the child is started when vectors are written, deleted or
read back, and exits when idle, so what Chroma held goes back to the system. A write returns once
the child has stored it; a child that dies makes the call raise, and the next call starts another.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from memory_anchor.core import paths
from memory_anchor.worker.index.chroma_child import ChromaError, _chain, _rebuilt
from memory_anchor.worker.index.chroma_store import ChromaStore
from memory_anchor.worker.index.vector_item import VectorItem
from memory_anchor.worker.store.disk import is_storage_full
from tests.conftest import ROOT, start_worker, wait_for, worker_env

# How a worker starts its Chroma process is what is tested here: `python -m`, not forked (tests/chroma_forks.py).
pytestmark = pytest.mark.chroma_plain

DIM = 384


def _items(seqs, rng: np.random.Generator, dim: int = DIM) -> list[VectorItem]:
    vectors = rng.standard_normal((len(seqs), dim)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return [VectorItem(seq, vectors[n], {"project": "p", "branch": "main", "happened_at": 2.0}) for n, seq in enumerate(seqs)]


def _stored(store: ChromaStore) -> dict[int, np.ndarray]:
    return {item.seq: item.vector for page in store.iterate(page=50) for item in page}


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_writes_and_deletes_go_through_a_child_that_exits_when_idle_and_they_last(tmp_path):
    rng = np.random.default_rng(5)
    chroma_dir = tmp_path / "chroma"
    store = ChromaStore(chroma_dir, idle_release_seconds=0.3, child_idle_seconds=3)
    items = _items(range(1, 41), rng)
    store.add(items)
    child = store.child.pid
    assert child != os.getpid() and _alive(child)
    assert "memory_anchor.worker.index.chroma_child" in Path(f"/proc/{child}/cmdline").read_bytes().decode()
    store.delete([3, 4, 5])
    assert store.child.pid == child  # one child for calls that come together

    wait_for(lambda: not store.child.running, timeout=30, what="the idle child to stop")
    assert not _alive(child)  # exited and reaped, not left a zombie

    reopened = ChromaStore(chroma_dir, idle_release_seconds=0)
    stored = _stored(reopened)
    assert sorted(stored) == [seq for seq in range(1, 41) if seq not in (3, 4, 5)]
    for item in items:
        if item.seq in stored:
            assert np.allclose(stored[item.seq], item.vector, atol=1e-6)
    assert reopened.get([1, 3, 99]) and [it.seq for it in reopened.get([1, 3, 99])] == [1]
    reopened.release()
    assert not reopened.child.running


def test_a_child_killed_mid_write_makes_the_write_raise_and_the_next_write_starts_another(tmp_path):
    rng = np.random.default_rng(6)
    store = ChromaStore(tmp_path / "chroma", idle_release_seconds=0)
    store.add(_items([1], rng))
    child = store.child.pid
    # Seconds of Chroma's work, so the kill lands while it writes; within the batch Chroma takes in
    # one add (5,461 here: a larger one is refused at once, and the refusal could beat the kill).
    big = _items(range(2, 5002), rng)
    failed: list[BaseException] = []

    def write() -> None:
        try:
            store.add(big)
        except ChromaError as exc:
            failed.append(exc)

    before = _cpu_seconds(child)
    writer = threading.Thread(target=write)
    writer.start()
    wait_for(lambda: _cpu_seconds(child) > before + 0.2, timeout=60, what="the child to be at work on the write")
    os.kill(child, signal.SIGKILL)
    writer.join(60)
    assert not writer.is_alive()
    assert failed and "exited (code -9) during add" in str(failed[0])
    assert not store.child.running and not _alive(child)

    later = _items([9000, 9001], rng)
    store.add(later)
    assert store.child.pid not in (None, child)
    assert {1, 9000, 9001} <= set(_stored(store))
    store.release()


def test_chroma_errors_come_back_as_errors_and_the_child_serves_on(tmp_path):
    rng = np.random.default_rng(7)
    store = ChromaStore(tmp_path / "chroma", idle_release_seconds=0)
    store.add(_items([1, 2], rng))
    child = store.child.pid
    with pytest.raises(ChromaError, match="(?i)dimension"):
        store.add(_items([3], rng, dim=8))  # the shard's vectors are 384-d
    assert store.child.pid == child and sorted(_stored(store)) == [1, 2]
    store.release()


def test_a_full_disk_in_the_child_is_still_a_full_disk_in_the_worker():
    """The worker tells a full disk by the exception and what it was raised from (store/disk.py);
    the child sends that chain back as plain values."""
    try:
        try:
            raise OSError(errno.ENOSPC, "No space left on device")
        except OSError as full:
            raise RuntimeError("hnsw segment could not persist") from full
    except RuntimeError as wrapped:
        rebuilt = _rebuilt(_chain(wrapped))
    assert isinstance(rebuilt, ChromaError) and "hnsw segment could not persist" in str(rebuilt)
    assert is_storage_full(rebuilt)
    assert not is_storage_full(_rebuilt(_chain(ValueError("bad input"))))


KILLED_WORKER = """
import sys, time
import numpy as np
from memory_anchor.worker.index.chroma_store import ChromaStore
from memory_anchor.worker.index.vector_item import VectorItem

store = ChromaStore(sys.argv[1], idle_release_seconds=0)
store.add([VectorItem(1, np.ones(384, dtype=np.float32), {"happened_at": 1.0})])
print(store.child.pid, flush=True)
time.sleep(600)
"""


def test_a_killed_worker_leaves_no_chroma_process_behind(tmp_path):
    owner = subprocess.Popen([sys.executable, "-c", KILLED_WORKER, str(tmp_path / "chroma")], cwd=ROOT,
                             stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        child = int(owner.stdout.readline())
        assert _alive(child)
    finally:
        owner.kill()
        owner.wait()
    wait_for(lambda: not _alive(child), timeout=30, what="the orphaned Chroma process to exit")


def _waits_for_a_lock(pid: int) -> bool:
    """Whether `pid` is blocked on a file lock (a "->" line of /proc/locks is a waiter)."""
    return any(line.split("->", 1)[1].split()[3] == str(pid) for line in Path("/proc/locks").read_text().splitlines()
               if "->" in line)  # fmt: skip


def test_a_second_process_on_the_same_chroma_waits_for_the_first_to_exit(tmp_path):
    """A killed worker's child ends its call before it exits; a new worker's child must not open
    the same directory meanwhile (two clients would each write their copy of an index)."""
    rng = np.random.default_rng(8)
    first = ChromaStore(tmp_path / "chroma", idle_release_seconds=0)
    first.add(_items([1], rng))
    second = ChromaStore(tmp_path / "chroma", idle_release_seconds=0)
    writer = threading.Thread(target=second.add, args=(_items([2], rng),))
    writer.start()
    wait_for(lambda: second.child.pid is not None and _waits_for_a_lock(second.child.pid), timeout=60,
             what="the second Chroma process to wait for the directory")  # fmt: skip
    assert writer.is_alive()
    first.release()
    writer.join(60)
    assert not writer.is_alive() and sorted(_stored(second)) == [1, 2]
    second.release()


def _chroma_children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            cmdline = (entry / "cmdline").read_bytes()
        except (OSError, IndexError, ValueError):
            continue
        if parent == pid and b"chroma_child" in cmdline:
            found.append(int(entry.name))
    return found


def _chromadb_mapped(pid: int) -> bool:
    return "chromadb_rust_bindings" in Path(f"/proc/{pid}/maps").read_text()


def test_a_worker_writes_through_the_child_never_imports_chromadb_and_its_vectors_last(tmp_path):
    data_dir = tmp_path / "data"
    # TEST_CHROMA_FORKS=0: the worker starts its Chroma process itself, as on a user's machine
    # (tests/chroma_forks.py), so the process is the worker's child.
    env = worker_env(data_dir, MEMORY_ANCHOR_CHROMA_IDLE_SECONDS="2", TEST_CHROMA_FORKS="0")
    kept = {"The staging database is refreshed from production every Sunday night": "when is staging refreshed?",
            "Feature flags are read from the flags service, never from env vars": "where do feature flags come from?"}  # fmt: skip
    scratch = ["A scratch idea: cache the build graph between CI jobs", "A scratch idea: split the monorepo"]
    worker = start_worker(data_dir, env=env)
    try:
        worker.post("/api/v1/branches", {"name": "scratch"}, expect=201)
        for content in kept:
            worker.post("/api/v1/memories", {"content": content, "infer": False, "user_id": "rss"})
        for content in scratch:
            worker.post("/api/v1/memories", {"content": content, "infer": False, "user_id": "rss", "branch": "scratch"})
        worker.wait_idle()
        pid = json.loads((data_dir / "worker.json").read_text())["pid"]
        wait_for(lambda: not _chroma_children(pid), timeout=60, what="the idle Chroma process to exit")
        assert not _chromadb_mapped(pid)
        for content, query in kept.items():  # searches never needed Chroma
            hits = worker.post("/api/v1/memories/search", {"query": query, "mode": "vector", "top_k": 1,
                                                           "filters": {"user_id": "rss"}})["results"]  # fmt: skip
            assert hits and hits[0]["memory"] == content

        status, archived = worker.request("PATCH", "/api/v1/branches/scratch", {"status": "archived"})
        assert status == 200, archived
        status, deleted = worker.request("DELETE", "/api/v1/branches/scratch")  # deletes the branch's vectors
        assert status == 200, deleted
        assert not _chromadb_mapped(pid)
    finally:
        assert worker.stop() == 0
    assert not _chroma_children(pid)

    store = ChromaStore(paths.chroma_path(data_dir), idle_release_seconds=0)
    stored = [item for page in store.iterate() for item in page]
    store.release()
    assert len(stored) == len(kept) and {item.meta.get("branch") for item in stored} == {"main"}

    # Read back from Chroma, not from the snapshot: through a child again.
    paths.vector_snapshot_path(data_dir).unlink()
    worker = start_worker(data_dir, env=env)
    try:
        wait_for(lambda: worker.get("/api/v1/status")["vectors_loaded"], timeout=120, what="the vectors to load")
        for content, query in kept.items():
            hits = worker.post("/api/v1/memories/search", {"query": query, "mode": "vector", "top_k": 1,
                                                           "filters": {"user_id": "rss"}})["results"]  # fmt: skip
            assert hits and hits[0]["memory"] == content
        assert not _chromadb_mapped(json.loads((data_dir / "worker.json").read_text())["pid"])
    finally:
        assert worker.stop() == 0
