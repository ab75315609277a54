"""Snapshots: a name for (branch, seq), usable anywhere a read takes `as_of`.

A snapshot copies nothing: the records table is append-only, so the rows a
view saw at `seq` are still there and `resolve_view(..., as_of=name)` sees them
again, superseded and deleted records included.
"""

from __future__ import annotations

import re
import sqlite3
import time
from typing import Any

from memory_anchor.worker.store.records import MAIN, NotFound, RecordError, Records, iso, validate_branch_name

_NUMERIC = re.compile(r"^\d+$")


def create_snapshot(
    conn: sqlite3.Connection,
    label: str | None = None,
    branch: str = MAIN,
    *,
    actor: str | None = None,
    description: str = "",
) -> dict[str, Any]:
    """Name the current state of `branch` (its view at the current global seq)."""
    branch = branch or MAIN
    if conn.execute("SELECT 1 FROM branches WHERE name = ?", (branch,)).fetchone() is None:
        raise NotFound(f"branch {branch!r} does not exist")
    seq = Records.head_seq(conn)
    label = label or f"snap-{branch.replace('/', '-')}-{seq}"
    validate_label(label)
    if conn.execute("SELECT 1 FROM snapshots WHERE name = ?", (label,)).fetchone():
        raise RecordError(f"snapshot {label!r} already exists", code="snapshot_exists", status=409)
    conn.execute(
        "INSERT INTO snapshots(name, branch, seq, created_at, created_by, description) VALUES (?, ?, ?, ?, ?, ?)",
        (label, branch, seq, time.time(), actor, description or ""),
    )
    return get_snapshot(conn, label)


def validate_label(label: str) -> str:
    try:
        validate_branch_name(label)
    except RecordError:
        raise RecordError(
            f"invalid snapshot label {label!r}: use 1-100 letters, digits, '.', '_', '-' or '/', "
            "starting with a letter or digit",
            code="invalid_snapshot",
        )
    if _NUMERIC.match(label):
        # as_of="42" means sequence number 42; a label must not shadow that.
        raise RecordError(f"snapshot label {label!r} cannot be all digits (as_of reads it as a seq)",
                          code="invalid_snapshot")  # fmt: skip
    return label


def get_snapshot(conn: sqlite3.Connection, label: str) -> dict[str, Any]:
    row = conn.execute("SELECT * FROM snapshots WHERE name = ?", (label,)).fetchone()
    if row is None:
        raise NotFound(f"snapshot {label!r} does not exist")
    return dict(row)


def list_snapshots(conn: sqlite3.Connection, branch: str | None = None) -> list[dict[str, Any]]:
    if branch:
        rows = conn.execute("SELECT * FROM snapshots WHERE branch = ? ORDER BY seq, name", (branch,))
    else:
        rows = conn.execute("SELECT * FROM snapshots ORDER BY seq, name")
    return [dict(r) for r in rows]


def delete_snapshot(conn: sqlite3.Connection, label: str) -> dict[str, Any]:
    snap = get_snapshot(conn, label)
    if conn.execute("DELETE FROM snapshots WHERE name = ?", (label,)).rowcount == 0:
        # Team storage: a snapshot is forgotten only by the member who took it (row-level security).
        raise RecordError(
            f"snapshot {label!r} was taken by {snap.get('author')}; only they can delete it",
            code="not_snapshot_author", status=403,
        )  # fmt: skip
    return snap


def snapshot_to_wire(snap: dict[str, Any]) -> dict[str, Any]:
    return {**snap, "created_at": iso(snap.get("created_at"))}
