"""Erasing a forgotten wording for good: its text out of every version that holds it, out of the
keyword indexes, and out of the forgotten list (which keeps only a hash, to go on blocking it).

Records are append-only everywhere else; a purge is the one place a stored text is rewritten.
On SQLite it is made gone from the file, not only from the rows: `secure_delete` (store/db.py)
zeroes the bytes an UPDATE or DELETE frees, the FTS5 indexes are merged ('optimize') so no old
segment keeps its words, and the write-ahead log is truncated after the commit (`Database.checkpoint`).
A team database (PostgreSQL) grants its members no UPDATE on records or on the forgotten list:
there a purge is refused, and the database's owner erases rows with their own tools.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from memory_anchor.worker.store.dialect import SQLITE, dialect_of
from memory_anchor.worker.store.records import RecordError, content_hash

PURGED = "[purged]"
HASHED_KEY = "sha256:"
# How many purges this process began: what was computed from a stored version (the pipeline keeps
# the observation drafts it read) holds as long as this number stays the same, as a purge is the
# one write that changes a stored version.
_purges = 0


def purges() -> int:
    return _purges


def hashed_key(key: str) -> str:
    """What the forgotten list keeps of a purged wording's key: enough to know it again, not to read it."""
    return HASHED_KEY + hashlib.sha256(key.encode("utf-8", "replace")).hexdigest()


def ensure_purgeable(conn) -> None:
    if dialect_of(conn) != SQLITE:
        raise RecordError("a purge rewrites stored rows, which members of a team database may not do; ask the "
                          "database's owner to erase it", code="purge_unsupported", status=409)  # fmt: skip


def purge_record_text(conn, record_id: str, text: str) -> list[int]:
    """Every version of `record_id` that holds `text` (as its text, or anywhere in its data: an
    edit's `previous_text`, a quote) says PURGED there instead, its title and key cleared when its
    text goes; out of both keyword indexes and the vector queue. Returns the seqs whose text was
    rewritten (their vectors are the caller's to delete)."""
    global _purges
    ensure_purgeable(conn)
    _purges += 1  # before any row changes (even if this purge rolls back: a memory kept is only recomputed)
    rows = conn.execute(
        "SELECT seq, text, data, fts_words(text) AS fts_text, fts_words(coalesce(title, '')) AS fts_title"
        " FROM records WHERE id = ? AND op = 'put'",
        (record_id,),
    ).fetchall()
    purged = []
    for row in rows:
        data = json.loads(row["data"]) if row["data"] else {}
        cleaned = _without(data, text)
        says_it = bool(row["text"]) and text in row["text"]
        if not says_it and cleaned == data:
            continue
        seq = row["seq"]
        if says_it:
            # records_fts reads its content through a view of records: the old words must be removed
            # with the values they were indexed under, before the row changes.
            conn.execute("INSERT INTO records_fts(records_fts, rowid, text, title) VALUES ('delete', ?, ?, ?)",
                         (seq, row["fts_text"], row["fts_title"]))  # fmt: skip
            conn.execute("DELETE FROM records_thread_fts WHERE rowid = ?", (seq,))
            for key in ("quote", "subject"):
                cleaned.pop(key, None)
            conn.execute("UPDATE records SET text = ?, title = NULL, fact_key = NULL, content_hash = ? WHERE seq = ?",
                         (PURGED, content_hash(PURGED), seq))  # fmt: skip
            conn.execute("DELETE FROM pending_vectors WHERE seq = ?", (seq,))
            purged.append(seq)
        conn.execute("UPDATE records SET data = ? WHERE seq = ?", (json.dumps(cleaned, ensure_ascii=False), seq))
    _purge_thread_context(conn, text)
    return purged


def _without(value: Any, text: str) -> Any:
    """`value` with every string that holds `text` replaced by PURGED (a copy)."""
    if isinstance(value, str):
        return PURGED if text in value else value
    if isinstance(value, dict):
        return {k: _without(v, text) for k, v in value.items()}
    if isinstance(value, list):
        return [_without(v, text) for v in value]
    return value


def _purge_thread_context(conn, text: str) -> None:
    """A record's neighbours keep its first 200 characters as context: take them out there too."""
    quoted = conn.execute("SELECT fts_words(substr(?, 1, 200))", (text,)).fetchone()[0]
    if quoted:
        conn.execute("UPDATE records_thread_fts SET context = trim(replace(context, ?, '')) WHERE instr(context, ?) > 0",
                     (quoted, quoted))  # fmt: skip


def purge_step_text(conn, project: str, text: str) -> int:
    """Open items of `project` that say `text` (or were closed as its restatement) say PURGED instead."""
    ensure_purgeable(conn)
    changed = conn.execute("UPDATE open_items SET text = ? WHERE project = ? AND text = ?", (PURGED, project, text)).rowcount
    conn.execute("UPDATE open_items SET closed_because = ? WHERE project = ? AND instr(closed_because, ?) > 0",
                 (f"restated: {PURGED}", project, text))  # fmt: skip
    return changed


def purge_forgotten_row(conn, forgotten_id: int, key: str) -> dict[str, Any]:
    """The forgotten entry without its text: its key becomes a hash, which still blocks the same wording."""
    ensure_purgeable(conn)
    conn.execute("UPDATE forgotten SET text = '', key = ? WHERE id = ?", (hashed_key(key), forgotten_id))
    return dict(conn.execute("SELECT * FROM forgotten WHERE id = ?", (forgotten_id,)).fetchone())


def forgotten_row(conn, forgotten_id: int) -> dict[str, Any] | None:
    row = conn.execute("SELECT * FROM forgotten WHERE id = ?", (forgotten_id,)).fetchone()
    return dict(row) if row is not None else None


def compact_indexes(conn) -> None:
    """Merge the FTS5 indexes' segments: a deleted entry's words leave the file, not only the index's view."""
    ensure_purgeable(conn)
    conn.execute("INSERT INTO records_fts(records_fts) VALUES ('optimize')")
    conn.execute("INSERT INTO records_thread_fts(records_thread_fts) VALUES ('optimize')")
