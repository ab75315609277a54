"""On team storage, each worker's in-memory vector index follows the shared log by seq.

On SQLite one worker writes and indexes everything (the `pending_vectors`
queue, indexer.py). On PostgreSQL several workers write to one `records`
table; every worker searches its own in-memory index (vectors.py) and must
see the others' records too. Seqs come out in commit order (the write-order
lock, postgres/schema.py), so "every record after the last seq I saw" misses
nothing:

    follower = LogFollower(db, vectors, embedder)   # vectors over DatabaseVectorStore or a Chroma server
    follower.flush([seq])     # after this worker wrote: embed its own new records now
    follower.catch_up()       # periodically: others' records, their vectors read, not re-embedded
    follower.catch_up(embed=False)   # at search time: only what is already embedded (cheap)

A new record's vector is read from the store when some worker already wrote
it. A record with no vector yet is embedded here at once when this worker's
role wrote it; another member's is left to their worker for `grace_seconds`
(it usually embeds it within a second) and embedded here after that (their
worker may be down). Two workers embedding the same record is harmless: the
store keeps the first vector, and the model is deterministic.

Deletions: rows leave only with a deleted branch. Each catch-up compares the
branches with the last it saw (name and creation time, so a branch deleted and
made again is still noticed) and forgets the vectors of those gone.

It offers the Indexer's `flush`, `drain` and `pending_count`, so the pipeline
and the API call it the same way.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable

from memory_anchor.worker.index.embeddings import Embedder
from memory_anchor.worker.index.indexer import NOT_EMBEDDED, embedding_texts, vector_meta
from memory_anchor.worker.index.vectors import VectorItem, Vectors
from memory_anchor.worker.store.branches import branch_births
from memory_anchor.worker.store.db import current_role
from memory_anchor.worker.store.records import MAIN, Records, max_seq, new_rows

log = logging.getLogger(__name__)

GRACE_SECONDS = 30.0
PAGE = 5000

class LogFollower:
    def __init__(self, db, vectors: Vectors, embedder: Embedder | None, *, grace_seconds: float = GRACE_SECONDS,
                 batch_size: int = 128, clock=time.time):  # fmt: skip
        self.db = db
        self.vectors = vectors
        self.embedder = embedder
        self.grace_seconds = grace_seconds
        self.batch_size = batch_size
        self.clock = clock
        self.last_seen = 0
        self.indexed = 0  # records embedded by this worker since start
        self._waiting: dict[int, float] = {}  # another member's record without a vector yet -> its created_at
        self._branches: dict[str, float] | None = None  # name -> created_at, as last seen
        self._me: str | None = None
        self._lock = threading.Lock()

    # --- the Indexer's interface ------------------------------------------------------

    def flush(self, seqs: Iterable[int]) -> int:
        """Make this worker's new records searchable now; returns how many were embedded."""
        return self.catch_up()

    def drain_once(self) -> int:
        """One batch at most (the pipeline calls it between hook events); 0 when nothing is due."""
        return self.catch_up(max_batches=1)

    def drain(self) -> int:
        return self.catch_up()

    def pending_count(self) -> int:
        """Records behind this worker's index: not yet read from the log, or waiting for a vector."""
        head = max_seq(self.db.reader())
        return max(head - self.last_seen, 0) + len(self._waiting)

    # --- following ----------------------------------------------------------------

    def catch_up(self, *, embed: bool = True, wait: bool = True, max_batches: int | None = None) -> int:
        """Read the log past `last_seen`: load the vectors stored for it, embed (when `embed`)
        what is this worker's to embed, forget deleted branches. Returns how many it embedded.

        `wait` False (a search): when another thread is catching up, return at once and
        search what the index holds rather than wait behind its embedding.
        """
        if not self._lock.acquire(blocking=wait):
            return 0
        try:
            return self._catch_up(embed, max_batches)
        finally:
            self._lock.release()

    def _catch_up(self, embed: bool, max_batches: int | None) -> int:
        self.vectors.load()
        conn = self.db.reader()
        self._forget_deleted_branches(conn)
        if self._me is None:
            self._me = current_role(conn)
        embedded = 0
        # The highest seq this worker can see, not the sequence's counter: a seq drawn by a transaction
        # still in flight is counted there, and reading past it would lose that record when it commits.
        # Writes draw seqs in commit order (WRITE_ORDER_LOCK), so nothing below a visible seq is to come.
        head = max_seq(conn)
        while True:
            rows = new_rows(conn, self.last_seen, NOT_EMBEDDED, PAGE)
            if not rows:
                # What lies between is of kinds without a vector: read, nothing to wait for.
                self.last_seen = max(self.last_seen, head)
                break
            missing = self._load([int(r["seq"]) for r in rows])
            for row in rows:
                if int(row["seq"]) in missing:
                    self._waiting[int(row["seq"])] = float(row["created_at"]) if row["author"] != self._me else 0.0
            self.last_seen = int(rows[-1]["seq"])
        if self._waiting:
            # Read again what others may have embedded meanwhile; embed what is ours or overdue.
            still = self._load(list(self._waiting))
            self._waiting = {seq: born for seq, born in self._waiting.items() if seq in still}
            if embed and self.embedder is not None:
                now = self.clock()
                due = sorted(seq for seq, born in self._waiting.items() if now - born >= self.grace_seconds)
                if max_batches is not None:
                    due = due[: max_batches * self.batch_size]
                for start in range(0, len(due), self.batch_size):
                    embedded += self._embed(conn, due[start : start + self.batch_size])
        return embedded

    def _load(self, seqs: list[int]) -> set[int]:
        """Put the stored vectors of `seqs` in the memory index; returns the seqs that have none."""
        wanted = [seq for seq in seqs if seq not in self.vectors.index]
        found = self.vectors.store.get(wanted) if wanted else []
        self.vectors.index.add(found)
        return set(wanted) - {item.seq for item in found}

    def _embed(self, conn, seqs: list[int]) -> int:
        records = Records.by_seqs(conn, seqs)
        wanted = [records[s] for s in seqs if s in records]  # a row gone meanwhile (its branch deleted)
        if wanted:
            vectors = self.embedder.embed(embedding_texts(wanted, self.embedder))
            self.vectors.add([VectorItem(r["seq"], vectors[n], vector_meta(r)) for n, r in enumerate(wanted)])
            self.indexed += len(wanted)
        for seq in seqs:
            self._waiting.pop(seq, None)
        return len(wanted)

    def _forget_deleted_branches(self, conn) -> None:
        current = branch_births(conn)
        if self._branches is not None:
            gone = [name for name, born in self._branches.items() if name != MAIN and current.get(name) != born]
            for name in gone:
                seqs = self.vectors.index.seqs_on_branch(name)
                self.vectors.index.remove(seqs)
                for seq in seqs:
                    self._waiting.pop(seq, None)
                log.info("forgot %d vectors of deleted branch %s", len(seqs), name)
        self._branches = current
