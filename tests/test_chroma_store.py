"""The Chroma store: vectors split by seq into small collections, data from before shards moved in.

The local store runs Chroma in a child process (tests/test_chroma_child.py); the shard logic is
the same code there and in a worker given a client (a team's HttpClient): the tests that look
inside it run it in this process over a PersistentClient.
"""

from __future__ import annotations

import numpy as np
import pytest

from memory_anchor.worker.index.chroma_shards import ChromaShards, persistent_client
from memory_anchor.worker.index.chroma_store import LEGACY_COLLECTION, SHARD_SEQS, ChromaStore, shard_name
from memory_anchor.worker.index.vector_item import VectorItem

DIM = 384


def _item(seq: int, rng: np.random.Generator) -> VectorItem:
    vector = rng.standard_normal(DIM).astype(np.float32)
    return VectorItem(seq, vector / np.linalg.norm(vector), {"project": "p", "user_id": "u", "happened_at": 5.0})


def _stored(store: ChromaStore) -> dict[int, VectorItem]:
    return {item.seq: item for page in store.iterate(page=7) for item in page}


def test_vectors_land_in_the_shard_of_their_seq(tmp_path):
    rng = np.random.default_rng(1)
    seqs = [1, 2, SHARD_SEQS - 1, SHARD_SEQS, 3 * SHARD_SEQS + 5]
    items = [_item(s, rng) for s in seqs]
    store = ChromaStore(tmp_path / "chroma", idle_release_seconds=0)
    store.add(items)
    store.release()  # the files are read as a fresh client sees them

    client = persistent_client(tmp_path / "chroma")()
    names = sorted(c.name for c in client.list_collections())
    assert names == [shard_name(0), shard_name(1), shard_name(3)]
    assert client.get_collection(shard_name(0)).count() == 3
    client.close()

    assert store.count() == 5
    stored = _stored(store)
    assert sorted(stored) == seqs
    for item in items:
        assert np.allclose(stored[item.seq].vector, item.vector, atol=1e-6)
        assert stored[item.seq].meta["project"] == "p" and stored[item.seq].meta["happened_at"] == 5.0

    store.delete([2, SHARD_SEQS, 10 * SHARD_SEQS])  # the last one was never stored: no error, no new shard
    assert sorted(_stored(store)) == [1, SHARD_SEQS - 1, 3 * SHARD_SEQS + 5]
    assert store.child.shard_numbers() == [0, 1, 3]

    store.release()  # a fresh client sees the same
    assert store.count() == 3
    store.drop()
    assert store.count() == 0 and list(store.iterate()) == []


def test_a_write_opens_only_the_newest_shard(tmp_path, monkeypatch):
    rng = np.random.default_rng(2)
    store = ChromaStore(client_factory=persistent_client(tmp_path / "chroma"), idle_release_seconds=0)
    store.add([_item(s, rng) for s in (1, SHARD_SEQS + 1, 2 * SHARD_SEQS + 1)])
    store.release()

    opened = []
    shards: ChromaShards = store._shards
    real = shards._shard
    monkeypatch.setattr(shards, "_shard", lambda shard: opened.append(shard) or real(shard))
    store.add([_item(2 * SHARD_SEQS + 2, rng)])
    assert opened == [2]


def test_a_steady_stream_of_writes_does_not_keep_filled_shards_open(tmp_path):
    """Chroma frees a shard's index only when its client closes; writes moving on to a new
    shard close it, even when they come too often for the idle release to fire."""
    rng = np.random.default_rng(3)
    store = ChromaStore(client_factory=persistent_client(tmp_path / "chroma"), idle_release_seconds=0)
    shards: ChromaShards = store._shards
    store.add([_item(s, rng) for s in (1, 2)])
    store.add([_item(SHARD_SEQS - 1, rng), _item(SHARD_SEQS, rng)])  # a batch across the boundary
    assert sorted(shards._collections) == [0, 1]
    store.add([_item(SHARD_SEQS + 5, rng)])
    assert sorted(shards._collections) == [1]
    store.add([_item(3 * SHARD_SEQS, rng)])
    assert sorted(shards._collections) == [3]
    assert sorted(_stored(store)) == [1, 2, SHARD_SEQS - 1, SHARD_SEQS, SHARD_SEQS + 5, 3 * SHARD_SEQS]


def test_the_single_collection_of_earlier_versions_is_moved_into_shards(tmp_path):
    import chromadb
    from chromadb.config import Settings

    rng = np.random.default_rng(3)
    old = [_item(s, rng) for s in (3, 4, SHARD_SEQS + 9)]
    client = chromadb.PersistentClient(path=str(tmp_path / "chroma"), settings=Settings(anonymized_telemetry=False))
    legacy = client.get_or_create_collection(LEGACY_COLLECTION, embedding_function=None, metadata={"hnsw:space": "cosine"})
    legacy.add(
        ids=[str(it.seq) for it in old],
        embeddings=np.stack([it.vector for it in old]),
        metadatas=[{"seq": it.seq, "project": "p"} for it in old],
    )
    client.close()

    store = ChromaStore(tmp_path / "chroma", idle_release_seconds=0)
    assert store.count() == 3
    stored = _stored(store)
    assert sorted(stored) == [3, 4, SHARD_SEQS + 9]
    assert np.allclose(stored[4].vector, old[1].vector, atol=1e-6)
    store.release()
    client = persistent_client(tmp_path / "chroma")()
    assert LEGACY_COLLECTION not in {c.name for c in client.list_collections()}
    client.close()


def test_a_store_needs_somewhere_to_keep_vectors():
    with pytest.raises(ValueError, match="path or a client_factory"):
        ChromaStore()


NEW_DATA_DIR_LOADS = """
import sys
from pathlib import Path
from memory_anchor.worker.index.vectors import Vectors

path = Path(sys.argv[1])
vectors = Vectors(path)
assert vectors.load() == 0 and vectors.store.count() == 0 and len(vectors) == 0
print("chromadb" in sys.modules, path.exists())
"""


def test_a_store_never_written_reads_as_empty_without_opening_chroma(tmp_path):
    """A worker on a new data dir loads its vectors at start: with nothing written there is nothing
    to read, and neither chromadb's imports (a second of CPU, in a child process) nor a client
    (which makes the directory) is paid for it. The first write opens Chroma as usual."""
    import subprocess
    import sys

    from tests.conftest import ROOT

    chroma_dir = tmp_path / "chroma"
    loaded = subprocess.run([sys.executable, "-c", NEW_DATA_DIR_LOADS, str(chroma_dir)], cwd=ROOT,
                            capture_output=True, text=True, timeout=120)  # fmt: skip
    assert loaded.returncode == 0, loaded.stderr
    assert loaded.stdout.split() == ["False", "False"]

    store = ChromaStore(chroma_dir, idle_release_seconds=0)
    assert store.never_written()
    item = _item(3, np.random.default_rng(3))
    store.add([item])
    assert not store.never_written()
    store.release()
    reopened = ChromaStore(chroma_dir, idle_release_seconds=0)
    assert not reopened.never_written() and reopened.count() == 1
    assert list(_stored(reopened)) == [3]
