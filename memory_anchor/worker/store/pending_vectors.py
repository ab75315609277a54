"""The `pending_vectors` queue (one machine): versions written and not yet embedded, filled by the records' trigger."""

from __future__ import annotations

from typing import Any


def pending_count(conn: Any) -> int:
    return int(conn.execute("SELECT count(*) FROM pending_vectors").fetchone()[0])


def oldest_pending(conn: Any, limit: int) -> list[int]:
    return [row[0] for row in conn.execute("SELECT seq FROM pending_vectors ORDER BY seq LIMIT ?", (limit,))]


def still_pending(conn: Any, seqs: list[int]) -> list[int]:
    """Those of `seqs` still queued."""
    return [r[0] for r in conn.execute(f"SELECT seq FROM pending_vectors WHERE seq IN ({','.join('?' * len(seqs))})", seqs)]


def done(conn: Any, seqs: list[int]) -> None:
    conn.execute(f"DELETE FROM pending_vectors WHERE seq IN ({','.join('?' * len(seqs))})", seqs)


def queue_every_version(conn: Any) -> None:
    """Queue every stored version with text (a rebuild of the vectors)."""
    conn.execute(
        "INSERT OR IGNORE INTO pending_vectors(seq) "
        "SELECT seq FROM records WHERE op = 'put' AND text != ''"
    )
