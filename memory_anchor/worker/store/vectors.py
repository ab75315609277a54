"""The `record_vectors` table of the team database: a record's embedding as float32 bytes beside its seq."""

from __future__ import annotations

from typing import Any, Iterable


def add_vectors(conn: Any, model: str, vectors: Iterable[tuple[int, bytes]]) -> None:
    """Store (seq, embedding bytes); a seq already stored keeps its vector (two workers may embed the same record)."""
    for seq, embedding in vectors:
        conn.execute(
            "INSERT INTO record_vectors(seq, model, embedding) VALUES (?, ?, ?) ON CONFLICT (seq) DO NOTHING",
            (seq, model, embedding),
        )


def vectors_of(conn: Any, seqs: list[int], model: str, columns: str) -> list[Any]:
    """The stored vectors of these seqs with the records' `columns` (r.*), those the reader may see."""
    return conn.execute(
        f"SELECT v.seq, v.embedding, {columns} FROM record_vectors v JOIN records r ON r.seq = v.seq"
        " WHERE v.seq = ANY(?) AND v.model = ?",
        (seqs, model),
    ).fetchall()


def vectors_after(conn: Any, after: int, model: str, columns: str, limit: int) -> list[Any]:
    """The next `limit` stored vectors after seq `after`, in seq order (keyset paging)."""
    return conn.execute(
        f"SELECT v.seq, v.embedding, {columns} FROM record_vectors v JOIN records r ON r.seq = v.seq"
        " WHERE v.seq > ? AND v.model = ? ORDER BY v.seq LIMIT ?",
        (after, model, limit),
    ).fetchall()


def count_vectors(conn: Any) -> int:
    return int(conn.execute("SELECT count(*) FROM record_vectors").fetchone()[0])
