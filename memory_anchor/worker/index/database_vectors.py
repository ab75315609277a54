"""Durable embeddings in the team database itself: `record_vectors` (postgres/schema.py).

The same interface as `ChromaStore` (add, get, delete, count, iterate, ...), so
`Vectors` keeps its in-memory index in front of either:

    vectors = Vectors(store=DatabaseVectorStore(db))

A vector is float32 bytes beside its record's seq, readable exactly when its
record is (row-level security), and it goes with its record when a branch is
deleted (ON DELETE CASCADE). Nothing to run beside PostgreSQL, and a vector is
shared the moment its transaction commits; see docs/benchmarks.md for how it
compares with a Chroma server (`chroma_url`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from memory_anchor.worker.index.embeddings import DIMENSION, MODEL_ID
from memory_anchor.worker.index.vector_item import META_KEYS, VectorItem
from memory_anchor.worker.store.vectors import add_vectors, count_vectors, vectors_after, vectors_of


_META_COLUMNS = ", ".join(f"r.{key}" for key in META_KEYS) + ", r.happened_at"


def _item(row: Any, dim: int) -> VectorItem:
    meta = {key: row[key] for key in META_KEYS}
    meta["happened_at"] = row["happened_at"]
    return VectorItem(int(row["seq"]), np.frombuffer(bytes(row["embedding"]), dtype=np.float32, count=dim), meta)


class DatabaseVectorStore:
    def __init__(self, db, *, dim: int = DIMENSION, model: str = MODEL_ID):
        # Each vector names its model: another model's vectors are not comparable and are not read.
        self.db = db
        self.dim = dim
        self.model = model

    def add(self, items: list[VectorItem]) -> None:
        """Store vectors; a seq already stored keeps its vector (two workers may embed the same record)."""
        if not items:
            return
        with self.db.transaction() as conn:
            add_vectors(conn, self.model, ((int(item.seq), np.asarray(item.vector, dtype=np.float32).tobytes()) for item in items))

    def get(self, seqs: Iterable[int]) -> list[VectorItem]:
        """The stored vectors of these seqs (those that have one and the reader may see)."""
        seqs = [int(s) for s in seqs]
        out: list[VectorItem] = []
        conn = self.db.reader()
        for start in range(0, len(seqs), 1000):
            chunk = seqs[start : start + 1000]
            rows = vectors_of(conn, chunk, self.model, _META_COLUMNS)
            out.extend(_item(row, self.dim) for row in rows)
        return out

    def delete(self, seqs: Iterable[int]) -> None:
        """Nothing to do: a record's vector leaves with it (the branch's cascade), and members may
        not delete rows (records are append-only)."""

    def count(self) -> int:
        return count_vectors(self.db.reader())

    def iterate(self, page: int = 5000) -> Iterator[list[VectorItem]]:
        """Every stored vector the reader may see, in pages, in seq order (keyset paging)."""
        after = 0
        while True:
            rows = vectors_after(self.db.reader(), after, self.model, _META_COLUMNS, page)
            if not rows:
                return
            yield [_item(row, self.dim) for row in rows]
            after = int(rows[-1]["seq"])

    def fingerprint(self) -> str | None:
        """None: no snapshot file can be checked against a shared database; start-up reads the rows."""
        return None

    def never_written(self) -> bool:
        """False: whether the database holds vectors is known only by reading it (it needs no chromadb)."""
        return False

    def release(self) -> None:
        """Nothing held open between calls (the database's pool is the database's)."""

    def drop(self) -> None:
        raise NotImplementedError("vectors in the team database are not dropped by a member; re-embedding is a new model")
