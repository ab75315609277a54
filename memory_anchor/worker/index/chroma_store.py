"""Durable embeddings in Chroma, in shards of write sequence numbers (chroma_shards.py).

Where Chroma runs:
- The local store (a `path`): in a child process (chroma_child.py), started
  with the first call that needs it. The worker never imports chromadb, so
  its code (29 MB) and what a client keeps after thousands of writes (24 MB)
  go back to the system when the child exits. Starting one costs about a
  second of CPU (chromadb's imports), paid by the thread that writes (the
  indexer's), not by searches, which never read Chroma (vectors.py).
- A `client_factory` (a team's `chromadb.HttpClient(...)`): in the worker's
  process, over that client.

Idle spells. After `idle_release_seconds` without a call the client is closed:
an open collection holds its HNSW index in memory, and with shards reopening
one costs about 0.1 s. The child itself exits after `child_idle_seconds`
without a call: a live session writes every few seconds, and a child per
write would cost a second of CPU each.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from memory_anchor.worker.index.chroma_child import ChromaChild, ChromaError
from memory_anchor.worker.index.chroma_shards import LEGACY_COLLECTION, SHARD_SEQS, ChromaShards, shard_name
from memory_anchor.worker.index.heap import release_free_memory
from memory_anchor.worker.index.vector_item import META_KEYS, VectorItem

__all__ = ["LEGACY_COLLECTION", "SHARD_SEQS", "ChromaError", "ChromaStore", "chroma_meta", "shard_name"]

log = logging.getLogger(__name__)

IDLE_RELEASE_SECONDS = 2.0
CHILD_IDLE_SECONDS = 30.0


class ChromaStore:
    def __init__(self, path: Path | str | None = None, *, client_factory=None,
                 idle_release_seconds: float = IDLE_RELEASE_SECONDS,
                 child_idle_seconds: float = CHILD_IDLE_SECONDS):  # fmt: skip
        if path is None and client_factory is None:
            raise ValueError("ChromaStore needs a path or a client_factory")
        self.path = Path(path) if path is not None else None
        self._local = client_factory is None
        self._shards: ChromaChild | ChromaShards = ChromaChild(self.path) if self._local else ChromaShards(client_factory)
        self._idle_release_seconds = idle_release_seconds
        self._child_idle_seconds = child_idle_seconds
        self._lock = threading.RLock()
        self._timer: threading.Timer | None = None
        self._generation = 0  # a timer acts only if no call came after it was set
        self._writers = 0  # `writing()` blocks under way: no idle release meanwhile

    @property
    def child(self) -> ChromaChild | None:
        """The handle on the child process Chroma runs in (None when it runs in this process)."""
        return self._shards if self._local else None

    # --- idle spells ---------------------------------------------------------

    def _touch(self) -> None:
        """A call was made: the idle count starts again."""
        if self._idle_release_seconds <= 0:
            return
        with self._lock:
            self._schedule(self._idle_release_seconds, self._close_when_idle)

    def _schedule(self, delay: float, action) -> None:
        self._cancel_timer()
        self._timer = threading.Timer(delay, action, args=(self._generation,))
        self._timer.daemon = True
        self._timer.name = "ma-chroma-idle"
        self._timer.start()

    def _cancel_timer(self) -> None:
        self._generation += 1
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _close_when_idle(self, generation: int) -> None:
        with self._lock:
            if generation != self._generation or self._writers:
                return  # a call came meanwhile; or writes are on their way and `writing()` counts again after them
            if not self._local or self._child_idle_seconds <= self._idle_release_seconds:
                self.release()
                return
            try:
                self._shards.close()
            except ChromaError:
                log.debug("closing Chroma's client in its process failed", exc_info=True)
                self.release()
                return
            self._schedule(self._child_idle_seconds - self._idle_release_seconds, self._stop_when_idle)

    def _stop_when_idle(self, generation: int) -> None:
        with self._lock:
            if generation == self._generation and not self._writers:
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
            self._cancel_timer()
        try:
            yield
        finally:
            with self._lock:
                self._writers -= 1
            self._touch()

    def release(self) -> None:
        """Close Chroma: the child exits (or the in-process client closes); the next call opens it again."""
        with self._lock:
            self._cancel_timer()
            if self._local:
                self._shards.stop()
            else:
                self._shards.close()
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
        if not self._local:
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
        neither a client, which would create its directory, nor a child process."""
        with self._lock:
            return self._local and not self._shards.running and not (self.path / "chroma.sqlite3").exists()

    # --- reading and writing -------------------------------------------------

    def add(self, items: list[VectorItem]) -> None:
        """Upsert; returns once Chroma has the vectors (in the child: once it has answered)."""
        if not items:
            return
        seqs = [int(it.seq) for it in items]
        embeddings = np.stack([np.asarray(it.vector, dtype=np.float32) for it in items])
        metadatas = [chroma_meta(it) for it in items]
        with self._lock:
            self._shards.add(seqs, embeddings, metadatas)
            self._touch()

    def get(self, seqs: Iterable[int]) -> list[VectorItem]:
        """The stored vectors of these seqs (those that have one)."""
        seqs = [int(s) for s in seqs]
        if not seqs:
            return []
        with self._lock:
            found, embeddings, metadatas = self._shards.get(seqs)
            self._touch()
        return [VectorItem(seq, embeddings[n], metadatas[n]) for n, seq in enumerate(found)]

    def delete(self, seqs: Iterable[int]) -> None:
        seqs = [int(s) for s in seqs]
        if not seqs:
            return
        with self._lock:
            self._shards.delete(seqs)
            self._touch()

    def count(self) -> int:
        if self.never_written():
            return 0
        with self._lock:
            total = self._shards.count()
            self._touch()
            return total

    def iterate(self, page: int = 5000) -> Iterator[list[VectorItem]]:
        """Every stored embedding, in pages, shard by shard (so in seq order of shards).

        The lock is held for one page at a time: Chroma may be closed and opened
        again between two pages."""
        if self.never_written():
            return
        with self._lock:
            shards = self._shards.shard_numbers()
            self._touch()
        for shard in shards:
            offset = 0
            while True:
                with self._lock:
                    rows = self._shards.page(shard, offset, page)
                    self._touch()
                if rows is None or not rows[0]:
                    break
                seqs, embeddings, metadatas = rows
                yield [VectorItem(seq, embeddings[n], metadatas[n]) for n, seq in enumerate(seqs)]
                offset += len(seqs)
                if len(seqs) < page:
                    break

    def drop(self) -> None:
        """Delete every embedding."""
        with self._lock:
            self._shards.drop()
            self._touch()


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
