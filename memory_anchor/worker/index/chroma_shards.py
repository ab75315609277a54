"""Embeddings in Chroma collections of at most SHARD_SEQS write sequence numbers, over one chromadb client.

Chroma keeps a collection's whole HNSW index in memory from the first write
until the client closes: +43 MB for 20k vectors, about +200 MB at 100k
(measured). Records are only ever appended (a change is a new version with a
new seq), so the vectors are split by seq into shards of 8,192: a write
touches the newest shard alone and holds ~20 MB whatever the total.

We never query Chroma: searches run on the in-memory index (vectors.py), and
Chroma is read back only at start-up and by `reindex`. Its HNSW graph is
therefore built cheaply (fewer links, a narrow construction search), which
made adds three times faster at the same memory.

`ChromaShards` is single-threaded and holds no timers: its owner
(chroma_store.py's `ChromaStore`) locks around it and closes it when idle. It
runs in the worker's process over a client the caller gives (a team's
`chromadb.HttpClient`), or, for the local `PersistentClient`, in a child
process of its own (chroma_child.py), so that chromadb's code and memory are
never the worker's. Rows cross as plain values (seqs, a float32 matrix,
metadata dicts), which is what the pipe to the child carries.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from memory_anchor.worker.index.heap import release_free_memory

log = logging.getLogger(__name__)

PREFIX = "memory_anchor_records"
LEGACY_COLLECTION = PREFIX  # one collection for everything, before shards
SHARD_SEQS = 8192
HNSW = {"hnsw:space": "cosine", "hnsw:M": 8, "hnsw:construction_ef": 32}

Rows = tuple[list[int], np.ndarray, list[dict]]  # seqs, embeddings (n x dim float32), Chroma metadatas


def shard_of(seq: int) -> int:
    return int(seq) // SHARD_SEQS


def shard_name(shard: int) -> str:
    return f"{PREFIX}-{shard:06d}"


def persistent_client(path: Path | str):
    """A factory of chromadb's embedded client on `path` (imports chromadb when called, not before)."""

    def open_client():
        import chromadb
        from chromadb.config import Settings

        Path(path).mkdir(parents=True, exist_ok=True)
        return chromadb.PersistentClient(path=str(path), settings=Settings(anonymized_telemetry=False, allow_reset=False))

    return open_client


class ChromaShards:
    """The shards over one client, opened on demand; `close()` frees Chroma's in-memory indexes."""

    def __init__(self, client_factory):
        self._client_factory = client_factory
        self._client = None
        self._collections: dict[int, Any] = {}

    @property
    def is_open(self) -> bool:
        return self._client is not None

    # --- opening and closing -------------------------------------------------

    def _open_client(self):
        if self._client is None:
            self._client = self._client_factory()
            self._move_legacy_collection()
        return self._client

    def _shard(self, shard: int):
        """The collection of one shard, created when missing."""
        collection = self._collections.get(shard)
        if collection is None:
            # embedding_function=None: we always pass embeddings ourselves, and
            # the default function would try to download a model.
            collection = self._open_client().get_or_create_collection(
                shard_name(shard), embedding_function=None, metadata=HNSW
            )
            self._collections[shard] = collection
        return collection

    def _existing_shard(self, shard: int):
        """The collection of one shard, or None when it does not exist (never creates one)."""
        if shard in self._collections or shard in self.shard_numbers():
            return self._shard(shard)
        return None

    def shard_numbers(self) -> list[int]:
        numbers = []
        for collection in self._open_client().list_collections():
            name = getattr(collection, "name", collection)
            if name.startswith(PREFIX + "-") and name[len(PREFIX) + 1 :].isdigit():
                numbers.append(int(name[len(PREFIX) + 1 :]))
        return sorted(numbers)

    def _move_legacy_collection(self) -> None:
        """Data written before shards sits in one collection: move it into shards, once."""
        client = self._client
        names = {getattr(c, "name", c) for c in client.list_collections()}
        if LEGACY_COLLECTION not in names:
            return
        legacy = client.get_collection(LEGACY_COLLECTION, embedding_function=None)
        moved = 0
        offset = 0
        while True:
            batch = legacy.get(include=["embeddings", "metadatas"], limit=5000, offset=offset)
            if not batch["ids"]:
                break
            self._upsert_rows([int(i) for i in batch["ids"]], np.asarray(batch["embeddings"], dtype=np.float32),
                              list(batch["metadatas"]))  # fmt: skip
            moved += len(batch["ids"])
            offset += len(batch["ids"])
        # Deleted only after every row is in its shard: an interruption just repeats the move.
        client.delete_collection(LEGACY_COLLECTION)
        log.info("moved %d vectors from the single Chroma collection into shards of %d seqs", moved, SHARD_SEQS)

    def close(self) -> None:
        """Close the client (frees Chroma's in-memory indexes); the next call reopens it."""
        if self._client is not None:
            try:
                self._client.close()
            except Exception:  # closing is best effort; the files are consistent
                log.debug("closing chroma client failed", exc_info=True)
        self._client = None
        self._collections.clear()
        release_free_memory()

    # --- reading and writing -------------------------------------------------

    def add(self, seqs: list[int], embeddings: np.ndarray, metadatas: list[dict]) -> None:
        """Upsert rows (an upsert: a seq written again gets its new vector)."""
        if not seqs:
            return
        self._release_shards_below(shard_of(min(seqs)))
        self._upsert_rows(seqs, np.asarray(embeddings, dtype=np.float32), metadatas)

    def _release_shards_below(self, shard: int) -> None:
        """Writes have moved on to `shard`: close the client if it holds older shards open.

        Chroma frees a collection's index only when its client closes, and a
        steady stream of writes never leaves the client idle long enough to be
        released: without this, a long ingest kept every shard it had filled in
        memory (about 20 MB each, measured).
        """
        if any(open_shard < shard for open_shard in self._collections):
            self.close()

    def _upsert_rows(self, seqs: list[int], embeddings: np.ndarray, metadatas: list[dict]) -> None:
        for shard, rows in _rows_by_shard(seqs).items():
            self._shard(shard).upsert(
                ids=[str(seqs[r]) for r in rows], embeddings=embeddings[rows], metadatas=[metadatas[r] for r in rows]
            )

    def get(self, seqs: list[int]) -> Rows:
        """The stored rows of these seqs (those that have one)."""
        out_seqs: list[int] = []
        out_embeddings: list[np.ndarray] = []
        out_metadatas: list[dict] = []
        for shard, rows in _rows_by_shard(seqs).items():
            collection = self._existing_shard(shard)
            if collection is None:
                continue
            batch = collection.get(ids=[str(seqs[r]) for r in rows], include=["embeddings", "metadatas"])
            if batch["ids"]:
                out_seqs.extend(int(i) for i in batch["ids"])
                out_embeddings.append(np.asarray(batch["embeddings"], dtype=np.float32))
                out_metadatas.extend(dict(m or {}) for m in batch["metadatas"])
        return out_seqs, _stacked(out_embeddings), out_metadatas

    def delete(self, seqs: list[int]) -> None:
        for shard, rows in _rows_by_shard(seqs).items():
            collection = self._existing_shard(shard)
            if collection is not None:
                collection.delete(ids=[str(seqs[r]) for r in rows])

    def count(self) -> int:
        return sum(self._shard(n).count() for n in self.shard_numbers())

    def page(self, shard: int, offset: int, limit: int) -> Rows | None:
        """Up to `limit` rows of one shard from `offset` on; None when the shard does not exist."""
        collection = self._existing_shard(shard)
        if collection is None:
            return None
        batch = collection.get(include=["embeddings", "metadatas"], limit=limit, offset=offset)
        seqs = [int(i) for i in batch["ids"]]
        embeddings = np.asarray(batch["embeddings"], dtype=np.float32) if seqs else _stacked([])
        return seqs, embeddings, [dict(m or {}) for m in batch["metadatas"]]

    def drop(self) -> None:
        """Delete every embedding."""
        client = self._open_client()
        for shard in self.shard_numbers():
            client.delete_collection(shard_name(shard))
        self._collections.clear()


def _rows_by_shard(seqs: list[int]) -> dict[int, list[int]]:
    rows: dict[int, list[int]] = defaultdict(list)
    for row, seq in enumerate(seqs):
        rows[shard_of(seq)].append(row)
    return rows


def _stacked(parts: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(parts) if parts else np.zeros((0, 0), dtype=np.float32)
