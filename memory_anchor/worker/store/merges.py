"""The `merges` table (each merge with what it did) and `merge_copies` (which version a merge copied from where)."""

from __future__ import annotations

import time
from typing import Any

BATCH = 500


def start_merge(conn: Any, merge_id: str, *, source: str, target: str, strategy: str, actor: str,
                source_head: Any, target_seq_before: int) -> None:  # fmt: skip
    conn.execute(
        "INSERT INTO merges(id, source, target, strategy, actor, merged_by, created_at, source_head,"
        " target_seq_before) VALUES (?, ?, ?, ?, ?, 'pending', ?, ?, ?)",
        (merge_id, source, target, strategy, actor, time.time(), source_head, target_seq_before),
    )


def finish_merge(conn: Any, merge_id: str, *, merged_by: str, target_seq_after: int, items_merged: str,
                 items_rejected: str, conflicts: str) -> None:  # fmt: skip
    conn.execute(
        "UPDATE merges SET merged_by = ?, target_seq_after = ?, items_merged = ?, items_rejected = ?,"
        " conflicts = ? WHERE id = ?",
        (merged_by, target_seq_after, items_merged, items_rejected, conflicts, merge_id),
    )


def record_copy(conn: Any, target_seq: int, origin_seq: int, merge_id: str) -> None:
    """A version a merge wrote on the target, and the version it copies."""
    conn.execute(
        "INSERT INTO merge_copies(target_seq, origin_seq, merge_id) VALUES (?, ?, ?)",
        (target_seq, origin_seq, merge_id),
    )


def origins(conn: Any, seqs: list[int]) -> dict[int, int]:
    """{seq a merge wrote: the seq it copied} for those of `seqs` that are copies."""
    out: dict[int, int] = {}
    for start in range(0, len(seqs), BATCH):
        chunk = seqs[start : start + BATCH]
        for row in conn.execute(
            f"SELECT target_seq, origin_seq FROM merge_copies WHERE target_seq IN ({','.join('?' * len(chunk))})",
            chunk,
        ):
            out[row[0]] = row[1]
    return out


def merges(conn: Any, branch: str | None, limit: int) -> list[dict[str, Any]]:
    """Merge rows, newest first; `branch` matches source or target."""
    if branch:
        rows = conn.execute(
            "SELECT * FROM merges WHERE source = ? OR target = ? ORDER BY created_at DESC LIMIT ?",
            (branch, branch, limit),
        )
    else:
        rows = conn.execute("SELECT * FROM merges ORDER BY created_at DESC LIMIT ?", (limit,))
    return [dict(r) for r in rows]


def merge(conn: Any, merge_id: str) -> dict[str, Any] | None:
    row = conn.execute("SELECT * FROM merges WHERE id = ?", (merge_id,)).fetchone()
    return dict(row) if row is not None else None
