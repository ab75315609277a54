"""The branch registry: create, list, archive, restore and delete branches.

A branch is a row in `branches` (name, parent, fork_seq): nothing is copied when
one is created. Reading it goes through `records.resolve_view`, which walks the
parents. Functions here take a connection; callers hold `db.transaction()` for
writes and `db.reader()` for reads, so a merge can create or mark branches
inside its own transaction.
"""

from __future__ import annotations

import json
import sqlite3
import time
from typing import Any

from memory_anchor.worker.store.records import (
    MAIN,
    NotFound,
    RecordError,
    Records,
    iso,
    resolve_as_of,
    resolve_view,
    validate_branch_name,
)

STATUSES = ("active", "merged", "archived")


def get_branch(conn: sqlite3.Connection, name: str) -> dict[str, Any]:
    row = conn.execute("SELECT * FROM branches WHERE name = ?", (name,)).fetchone()
    if row is None:
        raise NotFound(f"branch {name!r} does not exist")
    branch = dict(row)
    branch["metadata"] = json.loads(branch.get("metadata") or "{}")
    return branch


def branch_exists(conn: sqlite3.Connection, name: str) -> bool:
    return conn.execute("SELECT 1 FROM branches WHERE name = ?", (name,)).fetchone() is not None


def create_branch(
    conn: sqlite3.Connection,
    name: str,
    *,
    parent: str | None = None,
    from_snapshot: str | None = None,
    as_of: Any = None,
    description: str = "",
    actor: str | None = None,
    metadata: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Register `name` forked from `parent` (default main) at its head, at `as_of` or at a snapshot."""
    validate_branch_name(name)
    if branch_exists(conn, name):
        raise RecordError(f"branch {name!r} already exists", code="branch_exists", status=409)
    if from_snapshot:
        snap = conn.execute("SELECT branch, seq FROM snapshots WHERE name = ?", (from_snapshot,)).fetchone()
        if snap is None:
            raise NotFound(f"snapshot {from_snapshot!r} does not exist")
        if parent not in (None, "", snap["branch"]):
            raise RecordError(
                f"snapshot {from_snapshot!r} is on branch {snap['branch']!r}, not {parent!r}; omit parent"
            )
        parent, fork_seq = snap["branch"], int(snap["seq"])
    else:
        parent = parent or MAIN
        get_branch(conn, parent)  # a clear 404 for a missing parent
        head = Records.head_seq(conn)
        fork_seq = head if as_of in (None, "") else min(resolve_as_of(conn, as_of), head)
    conn.execute(
        """INSERT INTO branches(name, parent, fork_seq, status, description, created_at, created_by, metadata)
           VALUES (?, ?, ?, 'active', ?, ?, ?, ?)""",
        (name, parent, fork_seq, description or "", time.time(), actor,
         json.dumps(metadata or {}, ensure_ascii=False, default=str)),
    )  # fmt: skip
    return get_branch(conn, name)


def writable_branch(conn: sqlite3.Connection, name: str) -> str:
    """`name`, or if it is archived its nearest ancestor that is not (main never is).

    Captured hook events must never be lost, so a session whose branch was
    archived writes to the branch it came from until the branch is restored.
    """
    current = name
    while True:
        row = conn.execute("SELECT parent, status FROM branches WHERE name = ?", (current,)).fetchone()
        if row is None or row["status"] != "archived" or row["parent"] is None:
            return current
        current = row["parent"]


def ensure_branch(
    conn: sqlite3.Connection, name: str, *, parent: str = MAIN, actor: str | None = None, description: str = ""
) -> tuple[dict[str, Any], bool]:
    """The branch `name`, created from `parent` at its head if missing; (branch, created)."""
    if branch_exists(conn, name):
        return get_branch(conn, name), False
    return create_branch(conn, name, parent=parent, actor=actor, description=description), True


def list_branches(conn: sqlite3.Connection, status: str | None = None) -> list[dict[str, Any]]:
    """Every branch (or those with `status`), main first, with write and session counts."""
    if status is not None and status not in STATUSES:
        raise RecordError(f"status must be one of {', '.join(STATUSES)}")
    sql = "SELECT * FROM branches" + (" WHERE status = ?" if status else "")
    rows = [dict(r) for r in conn.execute(sql, (status,) if status else ())]
    # One pass over the (branch, seq) index rather than one count per branch.
    stats = {
        r["branch"]: (r["n"], r["head"])
        for r in conn.execute("SELECT branch, count(*) AS n, max(seq) AS head FROM records GROUP BY branch")
    }
    sessions = {
        r["branch"]: r["n"]
        for r in conn.execute("SELECT branch, count(*) AS n FROM session_branches GROUP BY branch")
    }
    parents = {r["name"]: r["parent"] for r in conn.execute("SELECT name, parent FROM branches")}
    out = []
    for row in rows:
        row["metadata"] = json.loads(row.get("metadata") or "{}")
        row["own_writes"], row["head_seq"] = stats.get(row["name"], (0, None))
        row["sessions"] = sessions.get(row["name"], 0)
        row["depth"] = _depth(parents, row["name"])
        out.append(row)
    out.sort(key=lambda b: (b["name"] != MAIN, b["created_at"], b["name"]))
    return out


def _depth(parents: dict[str, str | None], name: str) -> int:
    depth, seen = 0, set()
    while parents.get(name) is not None and name not in seen:
        seen.add(name)
        name = parents[name]  # type: ignore[assignment]
        depth += 1
    return depth


def set_status(conn: sqlite3.Connection, name: str, status: str) -> dict[str, Any]:
    """Archive, restore (active) or mark merged; main stays active."""
    if status not in STATUSES:
        raise RecordError(f"status must be one of {', '.join(STATUSES)}")
    get_branch(conn, name)
    if name == MAIN and status != "active":
        raise RecordError("main cannot be archived or merged away", code="protected_branch", status=409)
    now = time.time()
    if status == "archived":
        conn.execute("UPDATE branches SET status = 'archived', archived_at = ? WHERE name = ?", (now, name))
    elif status == "merged":
        conn.execute("UPDATE branches SET status = 'merged', merged_at = ? WHERE name = ?", (now, name))
    else:
        conn.execute("UPDATE branches SET status = 'active', archived_at = NULL WHERE name = ?", (name,))
    return get_branch(conn, name)


def delete_branch(conn: sqlite3.Connection, name: str) -> dict[str, Any]:
    """Remove a branch and the versions written on it.

    What was merged from it lives on as copies on the target, so it is kept.
    Refused for main and for a branch that other branches fork from (their
    views read its rows). Returns the seqs removed so the caller can drop
    their vectors.
    """
    branch = get_branch(conn, name)
    if name == MAIN:
        raise RecordError("main cannot be deleted", code="protected_branch", status=409)
    children = [r[0] for r in conn.execute("SELECT name FROM branches WHERE parent = ?", (name,))]
    if children:
        raise RecordError(
            f"branch {name!r} has child branches ({', '.join(sorted(children))}); delete or merge them first",
            code="branch_has_children",
            status=409,
        )
    seqs = [r[0] for r in conn.execute("SELECT seq FROM records WHERE branch = ?", (name,))]
    snapshots = conn.execute("SELECT count(*) FROM snapshots WHERE branch = ?", (name,)).fetchone()[0]
    Records.remove_branch_rows(conn, name)
    conn.execute("DELETE FROM snapshots WHERE branch = ?", (name,))
    conn.execute("DELETE FROM session_branches WHERE branch = ?", (name,))
    conn.execute("UPDATE sessions SET branch = ? WHERE branch = ?", (branch["parent"] or MAIN, name))
    if conn.execute("DELETE FROM branches WHERE name = ?", (name,)).rowcount == 0:
        # Team storage: row-level security lets only the branch's author delete it.
        raise RecordError(
            f"branch {name!r} was created by {branch.get('author')}; only they can delete it",
            code="not_branch_author", status=403,
        )  # fmt: skip
    return {"name": name, "deleted_versions": len(seqs), "deleted_snapshots": snapshots, "seqs": seqs}


def branch_to_wire(branch: dict[str, Any]) -> dict[str, Any]:
    out = dict(branch)
    for key in ("created_at", "merged_at", "archived_at"):
        out[key] = iso(out.get(key))
    return out


def view_for(conn: sqlite3.Connection, branch: str | None, as_of: Any = None):
    """The read view for an API caller: validates the name first for a clear message."""
    name = branch or MAIN
    validate_branch_name(name)
    return resolve_view(conn, name, as_of)


def describe_branch(conn: sqlite3.Connection, name: str, description: str) -> None:
    conn.execute("UPDATE branches SET description = ? WHERE name = ?", (description, name))


def active_branches(conn: sqlite3.Connection) -> list[str]:
    return [r["name"] for r in conn.execute("SELECT name FROM branches WHERE status = 'active'")]


def branch_births(conn: sqlite3.Connection) -> dict[str, float]:
    """{branch: when it was created}: a name that comes back with another time is another branch."""
    return {row["name"]: float(row["created_at"]) for row in conn.execute("SELECT name, created_at FROM branches")}
