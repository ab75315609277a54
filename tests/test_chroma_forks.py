"""The tests' forked workers get their Chroma processes forked too, from a process that has
imported chromadb (tests/chroma_forks.py): each is still the Chroma process of its own
directory, behaves as one started with `python -m` does to the worker, and says how it ended."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from memory_anchor.core import paths
from memory_anchor.worker.index.chroma_child import ChromaChild, ChromaError
from memory_anchor.worker.index.chroma_store import ChromaStore
from memory_anchor.worker.index.vector_item import VectorItem
from tests import chroma_forks, worker_forks
from tests.conftest import ROOT, in_threads, start_worker, wait_for, worker_env

pytestmark = [pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="the forkers need Linux's /proc"),
              pytest.mark.chroma_plain]  # each test installs the forker it tests


def _items(seqs, dim: int = 384) -> list[VectorItem]:
    vectors = np.random.default_rng(7).standard_normal((len(seqs), dim)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return [VectorItem(seq, vectors[n], {"project": "p", "branch": "main", "happened_at": 2.0}) for n, seq in enumerate(seqs)]


def _parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _command_line(pid: int) -> list[str]:
    return [part.decode() for part in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0") if part]


@pytest.fixture
def forker():
    forker = chroma_forks.ChromaForker(worker_forks._forker_env(), worker_forks._ROOM)
    yield forker
    forker.close()
    assert not forker.directory.exists()


def test_a_forked_chroma_process_serves_its_directory_and_reports_its_end_as_popen_would(tmp_path, forker, monkeypatch):
    monkeypatch.setattr(ChromaChild, "_start", ChromaChild._start)  # put back after the test
    chroma_forks.install(forker.address)
    store = ChromaStore(tmp_path / "chroma", idle_release_seconds=0)
    store.add(_items(range(1, 41)))
    process = store.child._process
    assert isinstance(process, chroma_forks.ForkedChroma)
    assert _parent(process.pid) == forker._process.pid
    assert _command_line(process.pid)[1:] == ["-m", "memory_anchor.worker.index.chroma_child", str(tmp_path / "chroma")]
    assert store.count() == 40 and process.poll() is None
    store.release()  # stdin closed: the process closes Chroma and exits
    assert process.returncode == 0

    store.delete(range(1, 11))  # the next call forks another
    killed = store.child._process
    assert killed.pid != process.pid
    killed.send_signal(signal.SIGKILL)
    with pytest.raises(ChromaError, match=r"exited \(code -9\) during count"):
        store.count()
    assert store.count() == 30  # and another: what was written lasts
    store.release()


KILLED_WORKER = """
import sys, time
import numpy as np
from memory_anchor.worker.index.chroma_store import ChromaStore
from memory_anchor.worker.index.vector_item import VectorItem
from tests import chroma_forks

chroma_forks.install(sys.argv[2])
store = ChromaStore(sys.argv[1], idle_release_seconds=0)
store.add([VectorItem(1, np.ones(384, dtype=np.float32), {"happened_at": 1.0})])
print(store.child.pid, type(store.child._process).__name__, flush=True)
time.sleep(600)
"""


def test_a_killed_worker_leaves_no_forked_chroma_process_behind(tmp_path, forker):
    owner = subprocess.Popen([sys.executable, "-c", KILLED_WORKER, str(tmp_path / "chroma"), forker.address], cwd=ROOT,
                             stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        pid, kind = owner.stdout.readline().split()
        assert kind == "ForkedChroma" and _parent(int(pid)) == forker._process.pid
    finally:
        owner.kill()
        owner.wait()
    wait_for(lambda: not _alive(int(pid)), timeout=30, what="the orphaned Chroma process to exit")


def test_without_its_forker_a_worker_starts_chroma_with_python_m(tmp_path, forker, monkeypatch):
    monkeypatch.setattr(ChromaChild, "_start", ChromaChild._start)
    chroma_forks.install(str(tmp_path / "no-such-socket"))
    store = ChromaStore(tmp_path / "chroma", idle_release_seconds=0)
    store.add(_items(range(1, 3)))
    assert not isinstance(store.child._process, chroma_forks.ForkedChroma)
    assert store.count() == 2
    store.release()


def _chroma_processes(parent: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if _parent(int(entry.name)) == parent and b"chroma_child" in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except (OSError, IndexError, ValueError):
                continue
    return found


@pytest.mark.parametrize("forked", [True, False], ids=["forked", "TEST_CHROMA_FORKS=0"])
def test_a_forked_worker_writes_its_vectors_through_a_forked_chroma_process_unless_told_not_to(tmp_path, forked):
    data_dir = tmp_path / "data"
    extra = {"MEMORY_ANCHOR_CHROMA_IDLE_SECONDS": "60", "TEST_CHROMA_FORKS": "1" if forked else "0"}  # whatever the run's
    worker = start_worker(data_dir, env=worker_env(data_dir, **extra))
    try:
        assert isinstance(worker.process, worker_forks.ForkedWorker)
        worker.post("/api/v1/memories", {"content": "Releases are cut from the release branch", "infer": False,
                                         "user_id": "u"})  # fmt: skip
        worker.wait_idle()
        pid = json.loads((data_dir / "worker.json").read_text())["pid"]
        chroma_forker = chroma_forks.forker()._process.pid
        if forked:
            wait_for(lambda: _chroma_processes(chroma_forker), timeout=30, what="a forked Chroma process")
            assert not _chroma_processes(pid)
        else:
            wait_for(lambda: _chroma_processes(pid), timeout=30, what="the worker's own Chroma process")
            assert not _chroma_processes(chroma_forker)
    finally:
        assert worker.stop() == 0
    store = ChromaStore(paths.chroma_path(data_dir), idle_release_seconds=0)
    try:
        assert store.count() == 1
    finally:
        store.release()


def test_many_workers_at_once_each_get_their_own_chroma_process(tmp_path, forker, monkeypatch):
    monkeypatch.setattr(ChromaChild, "_start", ChromaChild._start)
    chroma_forks.install(forker.address)
    stores = [ChromaStore(tmp_path / f"chroma{n}", idle_release_seconds=0) for n in range(4)]
    in_threads(lambda n: stores[n].add(_items(range(1, 11 + n))), [(n,) for n in range(4)], timeout=60)
    assert len({store.child.pid for store in stores}) == 4
    assert [store.count() for store in stores] == [10, 11, 12, 13]
    for store in stores:
        store.release()
