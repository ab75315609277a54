"""Durable embeddings in Chroma, in collections of at most SHARD_SEQS write sequence numbers.

Chroma keeps a collection's whole HNSW index in memory from the first write
until the client closes: +43 MB for 20k vectors, about +200 MB at 100k
(measured). Records are only ever appended (a change is a new version with a
new seq), so the store splits its vectors by seq into shards of 8,192: a write
touches the newest shard alone and holds ~20 MB whatever the total.

We never query Chroma: searches run on the in-memory index (vectors.py), and
Chroma is read back only at start-up and by `reindex`. Its HNSW graph is
therefore built cheaply (fewer links, a narrow construction search), which
made adds three times faster at the same memory.

The client is opened on demand and closed after `idle_release_seconds`
without writes, or as soon as writes move on to a new shard: with shards,
reopening costs one small index (about 0.1 s), so the memory is given back
quickly. `client_factory` returns any chromadb client: the default opens a
PersistentClient at `path`; `chromadb.HttpClient(...)` keeps the embeddings
on a Chroma server instead.
"""

from __future__ import annotations

import logging
import threading
from collections import defaultdict
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from memory_anchor.worker.index.heap import release_free_memory
from memory_anchor.worker.index.vector_item import META_KEYS, VectorItem

log = logging.getLogger(__name__)

PREFIX = "memory_anchor_records"
LEGACY_COLLECTION = PREFIX  # one collection for everything, before shards
SHARD_SEQS = 8192
IDLE_RELEASE_SECONDS = 2.0
HNSW = {"hnsw:space": "cosine", "hnsw:M": 8, "hnsw:construction_ef": 32}


def shard_of(seq: int) -> int:
    return int(seq) // SHARD_SEQS


def shard_name(shard: int) -> str:
    return f"{PREFIX}-{shard:06d}"


class ChromaStore:
    def __init__(self, path: Path | str | None = None, *, client_factory=None, idle_release_seconds: float = IDLE_RELEASE_SECONDS):
        if path is None and client_factory is None:
            raise ValueError("ChromaStore needs a path or a client_factory")
        self.path = Path(path) if path is not None else None
        self._client_factory = client_factory or self._persistent_client
        self._idle_release_seconds = idle_release_seconds
        self._lock = threading.RLock()
        self._client = None
        self._collections: dict[int, Any] = {}
        self._timer: threading.Timer | None = None
        self._writers = 0  # `writing()` blocks under way: no idle release meanwhile

    def _persistent_client(self):
        import chromadb
        from chromadb.config import Settings

        self.path.mkdir(parents=True, exist_ok=True)
        return chromadb.PersistentClient(
            path=str(self.path), settings=Settings(anonymized_telemetry=False, allow_reset=False)
        )

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
        if shard in self._collections or shard in self._shard_numbers():
            return self._shard(shard)
        return None

    def _shard_numbers(self) -> list[int]:
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
        for seqs, embeddings, metadatas in self._pages(lambda: legacy):
            self._upsert_rows(seqs, embeddings, metadatas)
            moved += len(seqs)
        # Deleted only after every row is in its shard: an interruption just repeats the move.
        client.delete_collection(LEGACY_COLLECTION)
        log.info("moved %d vectors from the single Chroma collection into shards of %d seqs", moved, SHARD_SEQS)

    def _touch(self) -> None:
        """Close the client after a quiet spell: an open collection holds its HNSW index in RAM."""
        if self._idle_release_seconds <= 0:
            return
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
            self._timer = threading.Timer(self._idle_release_seconds, self._release_when_idle)
            self._timer.daemon = True
            self._timer.start()

    def _release_when_idle(self) -> None:
        with self._lock:
            if self._writers:
                return  # writes on their way: `writing()` starts the idle count again when they are in
        self.release()

    @contextmanager
    def writing(self) -> Iterator[None]:
        """Writes are on their way (the indexer embedding a batch): the client stays open until
        they are in, then idles out as usual. An import's batches each took longer to embed
        than the idle release, so Chroma was closed and opened again (its shard's index
        reloaded) between every two: +60 % of Chroma's CPU (measured: 3,376 vectors in batches
        of 128, 2.6 s kept open, 4.2 s closed between batches)."""
        with self._lock:
            self._writers += 1
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
        try:
            yield
        finally:
            with self._lock:
                self._writers -= 1
            self._touch()

    def release(self) -> None:
        """Close the client (frees Chroma's in-memory indexes); the next call reopens it."""
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            if self._client is not None:
                try:
                    self._client.close()
                except Exception:  # closing is best effort; the files are consistent
                    log.debug("closing chroma client failed", exc_info=True)
            self._client = None
            self._collections.clear()
        release_free_memory()

    @contextmanager
    def while_closed(self) -> Iterator[None]:
        """Chroma closed, and kept closed until the block ends: for work on its files
        (memory_anchor/worker/index/scrub.py); calls meanwhile wait for it."""
        with self._lock:
            self.release()
            yield

    def fingerprint(self) -> str | None:
        """Size and modification time of Chroma's files, read without opening Chroma.

        Every change to a local Chroma goes through its SQLite file (and WAL),
        so an unchanged fingerprint means unchanged vectors. None for a Chroma
        without local files (a server): callers then compare counts.
        """
        if self.path is None or self._client_factory != self._persistent_client:
            return None
        parts = []
        for name in ("chroma.sqlite3", "chroma.sqlite3-wal"):
            try:
                stat = (self.path / name).stat()
            except FileNotFoundError:
                continue
            parts.append(f"{name}:{stat.st_size}:{stat.st_mtime_ns}")
        return ";".join(parts) or None

    def never_written(self) -> bool:
        """A local Chroma nothing was ever written to: it has no files yet. Reading it then needs
        neither a client, which would create its directory, nor chromadb's second of imports."""
        with self._lock:
            return (self._client is None and self._client_factory == self._persistent_client
                    and not (self.path / "chroma.sqlite3").exists())  # fmt: skip

    # --- reading and writing -------------------------------------------------

    def add(self, items: list[VectorItem]) -> None:
        if not items:
            return
        seqs = [int(it.seq) for it in items]
        with self._lock:
            self._release_shards_below(shard_of(min(seqs)))
            self._upsert_rows(
                seqs,
                np.stack([np.asarray(it.vector, dtype=np.float32) for it in items]),
                [chroma_meta(it) for it in items],
            )
            self._touch()

    def _release_shards_below(self, shard: int) -> None:
        """Writes have moved on to `shard`: close the client if it holds older shards open.

        Chroma frees a collection's index only when its client closes, and a
        steady stream of writes never leaves the client idle long enough to be
        released: without this, a long ingest kept every shard it had filled in
        memory (about 20 MB each, measured).
        """
        if any(open_shard < shard for open_shard in self._collections):
            self.release()

    def _upsert_rows(self, seqs: list[int], embeddings: np.ndarray, metadatas: list[dict]) -> None:
        for shard, rows in _rows_by_shard(seqs).items():
            self._shard(shard).upsert(
                ids=[str(seqs[r]) for r in rows], embeddings=embeddings[rows], metadatas=[metadatas[r] for r in rows]
            )

    def get(self, seqs: Iterable[int]) -> list[VectorItem]:
        """The stored vectors of these seqs (those that have one): how a worker following the
        shared log picks up what another worker embedded (memory_anchor/worker/index/follower.py)."""
        seqs = [int(s) for s in seqs]
        out: list[VectorItem] = []
        with self._lock:
            for shard, rows in _rows_by_shard(seqs).items():
                collection = self._existing_shard(shard)
                if collection is None:
                    continue
                batch = collection.get(ids=[str(seqs[r]) for r in rows], include=["embeddings", "metadatas"])
                embeddings = np.asarray(batch["embeddings"], dtype=np.float32)
                out.extend(
                    VectorItem(int(i), embeddings[n], dict(batch["metadatas"][n] or {})) for n, i in enumerate(batch["ids"])
                )
            self._touch()
        return out

    def delete(self, seqs: Iterable[int]) -> None:
        seqs = [int(s) for s in seqs]
        if not seqs:
            return
        with self._lock:
            for shard, rows in _rows_by_shard(seqs).items():
                collection = self._existing_shard(shard)
                if collection is not None:
                    collection.delete(ids=[str(seqs[r]) for r in rows])
            self._touch()

    def count(self) -> int:
        if self.never_written():
            return 0
        with self._lock:
            total = sum(self._shard(n).count() for n in self._shard_numbers())
            self._touch()
            return total

    def iterate(self, page: int = 5000) -> Iterator[list[VectorItem]]:
        """Every stored embedding, in pages, shard by shard (so in seq order of shards)."""
        if self.never_written():
            return
        with self._lock:
            shards = self._shard_numbers()
        for shard in shards:
            for seqs, embeddings, metadatas in self._pages(lambda shard=shard: self._existing_shard(shard), page):
                yield [VectorItem(seq, embeddings[n], dict(metadatas[n] or {})) for n, seq in enumerate(seqs)]
        self._touch()

    def _pages(self, collection, page: int = 5000) -> Iterator[tuple[list[int], np.ndarray, list[dict]]]:
        """(seqs, embeddings, metadatas) of a collection, a page at a time.

        `collection()` is asked again for every page: the client may have been
        closed and reopened between two pages. None ends the pages.
        """
        offset = 0
        while True:
            with self._lock:
                current = collection()
                if current is None:
                    return
                batch = current.get(include=["embeddings", "metadatas"], limit=page, offset=offset)
            ids = batch["ids"]
            if not ids:
                return
            yield [int(i) for i in ids], np.asarray(batch["embeddings"], dtype=np.float32), list(batch["metadatas"])
            offset += len(ids)
            if len(ids) < page:
                return

    def drop(self) -> None:
        """Delete every embedding."""
        with self._lock:
            client = self._open_client()
            for shard in self._shard_numbers():
                client.delete_collection(shard_name(shard))
            self._collections.clear()
            self._touch()


def _rows_by_shard(seqs: list[int]) -> dict[int, list[int]]:
    rows: dict[int, list[int]] = defaultdict(list)
    for row, seq in enumerate(seqs):
        rows[shard_of(seq)].append(row)
    return rows


def chroma_meta(item: VectorItem) -> dict[str, Any]:
    # Chroma metadata cannot hold None; absent means None.
    meta: dict[str, Any] = {"seq": int(item.seq)}
    for key in META_KEYS:
        value = item.meta.get(key)
        if value is not None and value != "":
            meta[key] = str(value)
    if item.meta.get("happened_at") is not None:
        meta["happened_at"] = float(item.meta["happened_at"])
    return meta
