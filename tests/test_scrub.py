"""Data dirs written before the freed-bytes fix: the first worker start clears what they leaked, once.

A leaky data dir is made the way older workers made one (tests/test_secrets_at_rest.py shows the
leak and the fix): a process whose malloc hands out freed blocks as they are holds a secret in
freed memory and writes to Chroma, until the secret's bytes are in an index file. Then a real
worker starts on it (memory_anchor/worker/index/scrub.py).
"""

from __future__ import annotations

import json
import platform
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from memory_anchor.core import paths
from tests.conftest import ROOT, start_worker, wait_for, worker_env
from tests.test_secrets_at_rest import LEAVE_FREED, ROUNDS_TO_LEAK, leaks
from memory_anchor.worker.index.chroma_store import ChromaStore
from memory_anchor.worker.index.scrub import MARKER, ChromaScrub, _Header, scrub_chroma_dir
from memory_anchor.worker.index.vector_item import VectorItem
from memory_anchor.core.lifecycle import acquire_lock

pytestmark = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="the leak is glibc's malloc reusing blocks")

SECRET = "sk-ant-api03-scrubTest7Qw9xLr2Vb8Nz4Kp1Hd6Fj3Gm5Ts0Ye"

MEMORIES = {
    "The deploy script lives in ops/deploy.sh and needs the staging kubeconfig": "where is the deploy script?",
    "Integration tests run against PostgreSQL 16 in a throwaway cluster": "which database do integration tests use?",
    "The team prefers squash merges with a conventional commit title": "how do we merge pull requests?",
    "Releases are cut every second Tuesday from the main branch": "when do releases happen?",
    "The billing service retries webhooks three times with exponential backoff": "how are webhooks retried?",
    "Frontend strings are translated through the i18n catalogue in web/locales": "where are translations kept?",
}

# As a worker before the fix: no clear_reused_memory, so freed blocks come back with their bytes.
# Rewrites the vectors Chroma already holds (the same values: search must not change), each time
# after freeing blocks full of the secret, until an index file holds it.
OLD_WORKER_WRITES = LEAVE_FREED + """
import sys
from pathlib import Path
from memory_anchor.worker.index import heap
from memory_anchor.worker.index.chroma_shards import persistent_client
from memory_anchor.worker.index.chroma_store import ChromaStore

heap.configure_malloc()
root, secret, attempts = Path(sys.argv[1]), sys.argv[2].encode(), int(sys.argv[3])

store = ChromaStore(client_factory=persistent_client(root))  # in this process, as older workers ran it
items = [item for page in store.iterate() for item in page]
for attempt in range(attempts):
    leave_freed(secret)
    store.add(items)
    store.release()
    if any(secret in p.read_bytes() for p in root.rglob("*.bin")):
        print(attempt + 1)
        break
"""


def search_all(worker) -> dict[str, list[tuple[str, float]]]:
    return {
        query: [(hit["memory"], hit["score"]) for hit in worker.post("/api/v1/memories/search",
                {"query": query, "filters": {"user_id": "scrub"}, "top_k": 3})["results"]]
        for query in MEMORIES.values()
    }  # fmt: skip


def vectors_loaded(worker) -> bool:
    """The warm-up loads the vectors right after its scrub (Services.warm_up)."""
    return bool(worker.get("/api/v1/status")["vectors_loaded"])


def scrub_log_lines(data_dir: Path, since: int = 0) -> list[str]:
    """What the scrub said in the worker log (from byte `since` on)."""
    with open(paths.log_path(data_dir), "rb") as handle:
        handle.seek(since)
        entries = [json.loads(line) for line in handle.read().decode().splitlines() if line.strip()]
    return [entry["message"] for entry in entries if entry["logger"] == "memory_anchor.worker.index.scrub"]


def make_leaky_data_dir(data_dir: Path) -> dict[str, list[tuple[str, float]]]:
    """A data dir as an older worker left it, and what searches answered on it before it leaked."""
    worker = start_worker(data_dir, env=worker_env(data_dir))
    try:
        for content in MEMORIES:
            worker.post("/api/v1/memories", {"content": content, "infer": False, "user_id": "scrub"})
        worker.wait_idle(timeout=180)
        before = search_all(worker)
    finally:
        worker.stop()
    chroma_dir = paths.chroma_path(data_dir)
    written = subprocess.run([sys.executable, "-c", OLD_WORKER_WRITES, str(chroma_dir), SECRET, str(ROUNDS_TO_LEAK)],
                             cwd=ROOT, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert written.returncode == 0, written.stderr
    # Older versions wrote no marker: without one, a data dir is taken to be theirs.
    (data_dir / MARKER).unlink()
    return before


def test_a_leaky_data_dir_is_scrubbed_at_the_first_start_and_only_then(tmp_path: Path):
    data_dir = tmp_path / "data"
    before = make_leaky_data_dir(data_dir)
    leaked = leaks(data_dir, [SECRET])
    # The old leak, for real: in the index's capacity files, both written whole from malloc's blocks;
    # which one a freed block lands in is malloc's choice (either, or both).
    assert leaked and all(f.endswith(("data_level0.bin", "length.bin")) for f in leaked[SECRET]), leaked

    worker = start_worker(data_dir, env=worker_env(data_dir))
    try:
        wait_for(lambda: vectors_loaded(worker), timeout=120, what="warm-up")
        assert leaks(data_dir, [SECRET]) == {}
        _same(search_all(worker), before)
    finally:
        worker.stop()
    assert leaks(data_dir, [SECRET]) == {}
    marker = json.loads((data_dir / MARKER).read_text())
    assert marker["cleared_bytes"] > 0 and marker["skipped"] == []
    assert any("bytes of freed memory cleared" in line for line in scrub_log_lines(data_dir))

    # A second start does nothing: the marker stays as it was, and the log says no scrub.
    log_size = paths.log_path(data_dir).stat().st_size
    index_files = {p: p.read_bytes() for p in paths.chroma_path(data_dir).rglob("*.bin")}
    worker = start_worker(data_dir, env=worker_env(data_dir))
    try:
        wait_for(lambda: vectors_loaded(worker), timeout=120, what="warm-up")
        _same(search_all(worker), before)
    finally:
        worker.stop()
    assert json.loads((data_dir / MARKER).read_text()) == marker
    assert scrub_log_lines(data_dir, since=log_size) == []
    assert {p: p.read_bytes() for p in index_files} == index_files


def _same(after: dict, before: dict) -> None:
    """Every query finds what it found before the scrub, in the same order with the same scores.

    Scores come rounded to 4 places, and a restart reads the vectors back from Chroma, which
    returns them normalised for cosine (a few units in float32's last place off the embedder's):
    the last digit may differ by one.
    """
    assert {q: [m for m, _ in hits] for q, hits in after.items()} == {q: [m for m, _ in hits] for q, hits in before.items()}
    for query, hits in after.items():
        assert [s for _, s in hits] == pytest.approx([s for _, s in before[query]], abs=1.01e-4), query
    assert all(before[query] and before[query][0][0] == memory for memory, query in MEMORIES.items())


@pytest.fixture(scope="module")
def leaky_chroma(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """A Chroma dir an older worker left holding the secret (copy it before using it), and its vectors.

    Opening Chroma rewrites a small index's files from memory (as the old worker did): the
    vectors are read from a copy, so that the dir itself stays as the old worker left it.
    """
    root = tmp_path_factory.mktemp("leaky")
    chroma_dir = root / "chroma"
    store = ChromaStore(chroma_dir)
    rng = np.random.default_rng(7)
    store.add([VectorItem(seq, rng.standard_normal(384).astype(np.float32), {"kind": "fact", "happened_at": 1.0})
               for seq in range(1, 9)])  # fmt: skip
    store.release()
    written = subprocess.run([sys.executable, "-c", OLD_WORKER_WRITES, str(chroma_dir), SECRET, str(ROUNDS_TO_LEAK)],
                             cwd=ROOT, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert written.returncode == 0, written.stderr
    assert SECRET in leaks(chroma_dir, [SECRET])
    shutil.copytree(chroma_dir, root / "read")
    return chroma_dir, stored_vectors(root / "read")


# Read as the worker reads them. Opening Chroma rewrites a small index's files from memory, so
# the reader clears reused memory as the worker does: a plain process would write its own heap.
READ_VECTORS = """
import json, sys
from memory_anchor.worker.index import heap
from memory_anchor.worker.index.chroma_store import ChromaStore

heap.configure_malloc()
heap.clear_reused_memory()
store = ChromaStore(sys.argv[1])
print(json.dumps({item.seq: item.vector.tobytes().hex() for page in store.iterate() for item in page}))
store.release()
"""


def stored_vectors(chroma_dir: Path) -> dict[str, str]:
    """{seq: the float32 bytes of its vector, in hex} as Chroma gives them back."""
    read = subprocess.run([sys.executable, "-c", READ_VECTORS, str(chroma_dir)], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert read.returncode == 0, read.stderr
    return json.loads(read.stdout)


def test_storage_scrub_clears_a_data_dir_now_and_says_what_it_did(leaky_chroma, tmp_path: Path):
    data_dir = tmp_path / "data"
    shutil.copytree(leaky_chroma[0], paths.chroma_path(data_dir))
    vectors = leaky_chroma[1]
    cli = [sys.executable, "-m", "memory_anchor.cli.main", "--data-dir", str(data_dir), "storage", "scrub"]

    # Not under a running worker: its Chroma would write its copy of the old bytes back.
    lock = acquire_lock(data_dir)
    try:
        refused = subprocess.run(cli, cwd=ROOT, capture_output=True, text=True, timeout=120)
    finally:
        lock.close()
    assert refused.returncode == 1 and "memory-anchor worker stop" in refused.stderr
    assert SECRET in leaks(data_dir, [SECRET])

    done = subprocess.run(cli, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "bytes of freed memory cleared" in done.stdout and "data_level0.bin" in done.stdout
    assert leaks(data_dir, [SECRET]) == {}
    assert stored_vectors(paths.chroma_path(data_dir)) == vectors
    assert not ChromaScrub(data_dir, paths.chroma_path(data_dir)).needed()

    again = subprocess.run(cli, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0 and "nothing to clear" in again.stdout


def test_a_scrub_cut_short_is_finished_by_the_next(leaky_chroma, tmp_path: Path):
    """What a kill mid-scrub leaves: some files zeroed, no marker. Zeroing again is harmless."""
    data_dir = tmp_path / "data"
    chroma_dir = paths.chroma_path(data_dir)
    shutil.copytree(leaky_chroma[0], chroma_dir)
    vectors = leaky_chroma[1]
    for path in chroma_dir.glob("*/length.bin"):  # the scrub's second file of each segment, done first
        header = _Header.read(path.parent / "header.bin")
        path.write_bytes(path.read_bytes()[: header.used * 4] + bytes(path.stat().st_size - header.used * 4))
    scrub = ChromaScrub(data_dir, chroma_dir)
    assert scrub.needed()
    report = scrub.run()
    assert report.cleared_bytes > 0 and all(f.endswith("data_level0.bin") for f in report.files)
    assert leaks(chroma_dir, [SECRET]) == {}
    assert stored_vectors(chroma_dir) == vectors
    assert not scrub.needed()


def test_zeroed_unused_slots_leave_chromas_own_index_whole(tmp_path: Path):
    """An index with used and unused slots (hnswlib writes the capacity, 100, when it persists 30
    vectors): after the scrub Chroma reopens it, finds every vector by its own HNSW search, reads
    them back unchanged, and grows it."""
    import chromadb
    from chromadb.config import Settings

    def collection():
        client = chromadb.PersistentClient(path=str(tmp_path), settings=Settings(anonymized_telemetry=False))
        return client, client.get_or_create_collection(
            "scrubbed", embedding_function=None,
            metadata={"hnsw:space": "cosine", "hnsw:sync_threshold": 10, "hnsw:batch_size": 10},
        )  # fmt: skip

    rng = np.random.default_rng(3)
    first, more = rng.standard_normal((30, 384)).astype(np.float32), rng.standard_normal((90, 384)).astype(np.float32)
    client, stored = collection()
    stored.add(ids=[str(n) for n in range(30)], embeddings=first)
    before = stored.get(include=["embeddings"])
    client.close()
    header = _Header.read(next(tmp_path.glob("*/header.bin")))
    assert (header.used, header.max_elements) == (30, 100)  # the case this test is about

    report = scrub_chroma_dir(tmp_path)
    assert report.segments == 1 and report.skipped == []
    level0 = next(tmp_path.glob("*/data_level0.bin")).read_bytes()
    assert level0[30 * header.slot_size :].count(0) == len(level0) - 30 * header.slot_size

    client, stored = collection()
    after = stored.get(include=["embeddings"])
    assert after["ids"] == before["ids"] and np.array_equal(after["embeddings"], before["embeddings"])
    nearest = stored.query(query_embeddings=first, n_results=1)["ids"]
    assert [hit[0] for hit in nearest] == [str(n) for n in range(30)]
    stored.add(ids=[str(n) for n in range(30, 120)], embeddings=more)
    client.close()
    client, stored = collection()
    assert stored.count() == 120
    assert stored.query(query_embeddings=more[-1:], n_results=1)["ids"] == [["119"]]
    client.close()


def test_index_files_in_an_unknown_format_are_left_alone(leaky_chroma, tmp_path: Path):
    chroma_dir = tmp_path / "chroma"
    shutil.copytree(leaky_chroma[0], chroma_dir)
    header_path = next(chroma_dir.glob("*/header.bin"))
    header_path.write_bytes((2).to_bytes(4, "little") + header_path.read_bytes()[4:])  # a later PERSISTENCE_VERSION
    before = {p: p.read_bytes() for p in chroma_dir.rglob("*.bin")}
    report = scrub_chroma_dir(chroma_dir)
    assert report.skipped == [header_path.parent.name] and report.cleared_bytes == 0
    assert {p: p.read_bytes() for p in before} == before
