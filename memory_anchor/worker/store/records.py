"""Versioned, branch-aware records: the one table every memory lives in.

A record is a logical `id` with one or more versions. Each version is a row with
its own `seq` from the global sequence; nothing is edited in place. A `View`
says which rows a reader may see: the rows of a branch and of its ancestors up
to each fork point, optionally cut off at an `as_of` sequence number. Within a
view, the visible version of an id is its row with the highest seq; if that row
is a tombstone (`op = 'delete'`) the record is invisible.
"""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Iterable

from memory_anchor.schemas.filters import TIME_RANGE
from memory_anchor.worker.store.dialect import POSTGRES, SQLITE, dialect_of, index_hint, limit_param, truth
from memory_anchor.worker.store.terms import index_record

MAIN = "main"
QUERY_ORDERS = ("seq DESC", "seq ASC", "happened_at DESC", "happened_at ASC")
BRANCH_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,99}$")

# Columns a caller may set on a new version (everything else is managed here).
WRITABLE = (
    "kind", "layer", "status", "project", "user_id", "agent_id", "run_id", "session_id",
    "type", "title", "text", "data", "metadata", "confidence", "fact_key", "happened_at",
    "source_id", "tool_use_id",
)  # fmt: skip


# Columns a record keeps across all its versions; filters on them may prune
# rows before the per-id head is chosen.
STABLE_COLUMNS = ("id", "kind", "project", "user_id", "agent_id", "run_id", "session_id")


class RecordError(Exception):
    """A request about records that cannot be served; `code` is the API error code."""

    def __init__(self, message: str, code: str = "bad_request", status: int = 400):
        super().__init__(message)
        self.code = code
        self.status = status


class NotFound(RecordError):
    def __init__(self, message: str):
        super().__init__(message, code="not_found", status=404)


@dataclass(frozen=True)
class View:
    """What a reader sees: `chain` is [(branch, max visible seq or None)], own branch first."""

    chain: tuple[tuple[str, int | None], ...] = ((MAIN, None),)
    as_of: int | None = None

    @property
    def branch(self) -> str:
        return self.chain[0][0]

    def sql(self, alias: str = "", dialect: str = SQLITE) -> tuple[str, list[Any]]:
        """A WHERE fragment selecting the rows this view can see."""
        # The unary `+` keeps SQLite from reading through the branch index: every
        # caller also filters on a more selective column (project, kind, id, ...),
        # and on main the branch matches nearly every row.
        hint = index_hint(dialect)
        prefix = f"{hint}{alias}." if alias else hint
        parts, params = [], []
        for name, upto in self.chain:
            if upto is None:
                parts.append(f"({prefix}branch = ?)")
                params.append(name)
            else:
                parts.append(f"({prefix}branch = ? AND {prefix}seq <= ?)")
                params.extend([name, upto])
        return "(" + " OR ".join(parts) + ")", params

    def sees_row(self, branch: str, seq: int) -> bool:
        for name, upto in self.chain:
            if name == branch:
                return upto is None or seq <= upto
        return False


def resolve_view(conn: sqlite3.Connection, branch: str = MAIN, as_of: Any = None) -> View:
    """The view of `branch` (walking its ancestors), cut off at `as_of` if given.

    `as_of` is a sequence number, a snapshot name or a timestamp (ISO 8601 or
    epoch seconds); see `resolve_as_of`.
    """
    branch = branch or MAIN
    limit = resolve_as_of(conn, as_of) if as_of not in (None, "") else None
    chain: list[tuple[str, int | None]] = []
    name, upto = branch, limit
    seen = set()
    while name is not None:
        if name in seen:  # defensive: a cycle would be a corrupt registry
            raise RecordError(f"branch registry has a cycle at {name!r}", code="corrupt", status=500)
        seen.add(name)
        row = conn.execute("SELECT parent, fork_seq FROM branches WHERE name = ?", (name,)).fetchone()
        if row is None:
            raise NotFound(f"branch {name!r} does not exist")
        chain.append((name, upto))
        parent, fork = row["parent"], row["fork_seq"]
        if parent is not None:
            upto = fork if upto is None else min(upto, fork)
        name = parent
    return View(chain=tuple(chain), as_of=limit)


def resolve_as_of(conn: sqlite3.Connection, as_of: Any) -> int:
    """Turn `as_of` into a sequence number: the last seq written at that point."""
    if isinstance(as_of, bool):
        raise RecordError("as_of must be a sequence number, a snapshot name or a timestamp")
    if isinstance(as_of, int):
        if as_of < 0:
            raise RecordError(f"as_of must not be negative, got {as_of}")
        return as_of
    if isinstance(as_of, float):
        return _seq_at_time(conn, as_of)
    text = str(as_of).strip()
    if re.fullmatch(r"\d{1,9}", text):  # small integers are sequence numbers
        return int(text)
    snap = conn.execute("SELECT seq FROM snapshots WHERE name = ?", (text,)).fetchone()
    if snap is not None:
        return int(snap["seq"])
    try:
        return _seq_at_time(conn, parse_time(text))
    except ValueError:
        raise NotFound(f"as_of {text!r} is neither a sequence number, a snapshot nor a timestamp")


def _seq_at_time(conn: sqlite3.Connection, when: float) -> int:
    # All rows of one transaction share its start time (`_write_time`), so this
    # is always the last seq of a whole transaction: a merge is seen whole or not at all.
    row = conn.execute("SELECT max(seq) FROM records WHERE created_at <= ?", (when,)).fetchone()
    return int(row[0] or 0)


def _write_time(conn: sqlite3.Connection) -> float:
    """`created_at` for a row: the start of the write transaction (`Database.transaction`)."""
    return getattr(conn, "transaction_started_at", None) or time.time()


# JSON's escape for U+0000, not preceded by an escaped backslash (`\\u0000` is a backslash and "u0000").
_ESCAPED_NUL = re.compile(r"(?<!\\)((?:\\\\)*)\\u0000")


def _json_column(conn, value: Any) -> str:
    """A data or metadata column's JSON text. On PostgreSQL U+0000 becomes U+FFFD, as in every
    string the store sends there (postgres/database.py): the privacy trigger reads metadata as
    jsonb, which refuses the escaped NUL that SQLite's JSON keeps."""
    text = json.dumps(value or {}, ensure_ascii=False, default=str)
    return _ESCAPED_NUL.sub(r"\1\\ufffd", text) if dialect_of(conn) == POSTGRES and "\\u0000" in text else text


def ensure_writable(conn: sqlite3.Connection, branch: str) -> None:
    """Refuse a write to a branch that does not exist (PostgreSQL's foreign key would refuse it with
    a driver error; SQLite's records table has none and kept the row on no branch), or to an
    archived one: archiving makes a branch read-only."""
    row = conn.execute("SELECT status FROM branches WHERE name = ?", (branch,)).fetchone()
    if row is None:
        raise NotFound(f"branch {branch!r} does not exist")
    if row[0] == "archived":
        raise RecordError(
            f"branch {branch!r} is archived, so it is read-only; restore it first "
            f"(`memory-anchor branch restore {branch}`, or PATCH /api/v1/branches/{branch} with status=active)",
            code="branch_archived",
            status=409,
        )


def parse_time(value: Any) -> float:
    """ISO 8601 (a trailing Z allowed; naive means UTC) or epoch seconds → epoch seconds."""
    if isinstance(value, bool):
        raise ValueError("a timestamp cannot be a boolean")
    if isinstance(value, (int, float)):
        return _in_range(float(value))
    text = str(value).strip()
    if re.fullmatch(r"-?\d+(\.\d+)?", text):
        return _in_range(float(text))
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"not an ISO 8601 timestamp or epoch seconds: {text!r}")
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=timezone.utc)
    return _in_range(parsed.timestamp())


def _in_range(ts: float) -> float:
    """Epoch seconds a date can show (years 1 to 9999): a stored time must be readable back."""
    if not TIME_RANGE[0] <= ts <= TIME_RANGE[1]:
        raise ValueError(f"timestamp {ts} is outside the years 1 to 9999")
    return ts


def iso(ts: float | None) -> str | None:
    """ISO 8601 of epoch seconds; None for a time no date can show (NaN, 1e308): a bad value a
    store already holds (written before the door checked it) must not break every read of it."""
    if ts is None:
        return None
    try:
        return datetime.fromtimestamp(ts, tz=timezone.utc).isoformat().replace("+00:00", "Z")
    except (OverflowError, ValueError, OSError):
        return None


def new_id() -> str:
    return str(uuid.uuid4())


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()


def validate_branch_name(name: str) -> str:
    if not isinstance(name, str) or not BRANCH_NAME_RE.match(name) or ".." in name or name.endswith("/"):
        raise RecordError(
            f"invalid branch name {name!r}: use 1-100 letters, digits, '.', '_', '-' or '/', "
            "starting with a letter or digit, without '..'",
            code="invalid_branch",
        )
    return name


def row_to_dict(row: sqlite3.Row) -> dict[str, Any]:
    record = {key: row[key] for key in row.keys()}
    for key in ("data", "metadata"):
        value = record.get(key)
        record[key] = json.loads(value) if isinstance(value, str) and value else {}
    return record


@dataclass
class NewVersion:
    """The columns of a version to write; `id` None means a new record."""

    kind: str
    text: str = ""
    id: str | None = None
    values: dict[str, Any] = field(default_factory=dict)


def _split_filters(filters: dict[str, Any] | None) -> tuple[list[tuple[str, list[Any]]], list[tuple[str, list[Any]]]] | None:
    """Column filters as (stable, changing) lists of (column, allowed values); None when one allows nothing.

    A column that can change between versions (status, type, fact_key, the
    branch a version was written on, ...) must be tested on the head only:
    tested on every version, an older version would pass for the head. Stable
    columns (kind, project, user/agent/run/session ids) can be tested on every
    version, which lets SQLite narrow the rows early.
    """
    stable: list[tuple[str, list[Any]]] = []
    changing: list[tuple[str, list[Any]]] = []
    for column, value in (filters or {}).items():
        if column not in WRITABLE and column not in ("branch", "id"):
            raise RecordError(f"cannot filter on {column!r}")
        if value is None:
            continue
        values = list(value) if isinstance(value, (list, tuple, set)) else [value]
        if not values:
            return None
        (stable if column in STABLE_COLUMNS else changing).append((column, values))
    return stable, changing


def _in_clauses(filters: list[tuple[str, list[Any]]]) -> tuple[list[str], list[Any]]:
    """`r.<column> IN (?, ...)` per filter, and their parameters."""
    clauses, params = [], []
    for column, values in filters:
        clauses.append(f"r.{column} IN ({','.join('?' * len(values))})")
        params.extend(values)
    return clauses, params


class Records:
    """Reads and writes of versioned records. Callers pass the connection.

    Writes take the writer connection inside `Database.transaction()`; reads
    take any connection plus a `View`.
    """

    # --- writes -----------------------------------------------------------

    @staticmethod
    def put(
        conn: sqlite3.Connection,
        kind: str,
        text: str,
        *,
        branch: str = MAIN,
        actor: str | None = None,
        reason: str | None = "ADD",
        record_id: str | None = None,
        **values: Any,
    ) -> dict[str, Any]:
        """Write a record with exactly these values: a new id, or the next version of `record_id`.

        Unlike `update`, nothing is carried over from an earlier version.
        """
        rid = record_id or new_id()
        version = Records._next_version(conn, rid) if record_id else 1
        return Records._insert(conn, rid, version, branch, "put", actor, reason, {"kind": kind, "text": text, **values})

    @staticmethod
    def update(
        conn: sqlite3.Connection,
        record_id: str,
        *,
        branch: str = MAIN,
        actor: str | None = None,
        reason: str | None = "UPDATE",
        view: View | None = None,
        **changes: Any,
    ) -> dict[str, Any]:
        """Write a new version of `record_id` on `branch`, carrying over unchanged columns."""
        values = {**Records._visible_values(conn, record_id, view or resolve_view(conn, branch)), **changes}
        return Records._insert(
            conn, record_id, Records._next_version(conn, record_id), branch, "put", actor, reason, values
        )

    @staticmethod
    def delete(
        conn: sqlite3.Connection,
        record_id: str,
        *,
        branch: str = MAIN,
        actor: str | None = None,
        reason: str | None = "DELETE",
        view: View | None = None,
    ) -> dict[str, Any]:
        """Write a tombstone: the record disappears from this branch from now on."""
        values = {**Records._visible_values(conn, record_id, view or resolve_view(conn, branch)), "text": ""}
        return Records._insert(
            conn, record_id, Records._next_version(conn, record_id), branch, "delete", actor, reason, values
        )

    @staticmethod
    def copy_version(
        conn: sqlite3.Connection, source: dict[str, Any], *, branch: str, actor: str | None, reason: str
    ) -> dict[str, Any]:
        """Re-write an existing version (from another branch) as the next version on `branch`."""
        values = {k: source[k] for k in WRITABLE}
        return Records._insert(
            conn, source["id"], Records._next_version(conn, source["id"]), branch, source["op"], actor, reason, values
        )

    @staticmethod
    def _visible_values(conn: sqlite3.Connection, record_id: str, view: View) -> dict[str, Any]:
        """The writable columns of the version `view` sees, or NotFound."""
        current = Records.get(conn, record_id, view)
        if current is None:
            raise NotFound(f"memory {record_id} not found")
        return {k: current[k] for k in WRITABLE}

    @staticmethod
    def _next_version(conn: sqlite3.Connection, record_id: str) -> int:
        row = conn.execute("SELECT max(version) FROM records WHERE id = ?", (record_id,)).fetchone()
        return int(row[0] or 0) + 1

    @staticmethod
    def _insert(
        conn: sqlite3.Connection,
        record_id: str,
        version: int,
        branch: str,
        op: str,
        actor: str | None,
        reason: str | None,
        values: dict[str, Any],
    ) -> dict[str, Any]:
        unknown = set(values) - set(WRITABLE)
        if unknown:
            raise TypeError(f"unknown record columns: {sorted(unknown)}")
        ensure_writable(conn, branch)
        now = _write_time(conn)
        row = {k: values.get(k) for k in WRITABLE}
        row["text"] = row["text"] or ""
        row["project"] = row["project"] or ""
        row["status"] = row["status"] or "active"
        row["data"] = _json_column(conn, row["data"])
        row["metadata"] = _json_column(conn, row["metadata"])
        row["happened_at"] = float(row["happened_at"]) if row["happened_at"] is not None else now
        columns = ["id", "version", "branch", "op", "actor", "reason", "created_at", "content_hash", *WRITABLE]
        params = [record_id, version, branch, op, actor, reason, now, content_hash(row["text"])]
        params += [row[k] for k in WRITABLE]
        stored = conn.execute(
            f"INSERT INTO records ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))}) RETURNING *",
            params,
        ).fetchone()
        index_record(conn, stored)
        return row_to_dict(stored)

    @staticmethod
    def remove_branch_rows(conn: sqlite3.Connection, branch: str) -> None:
        """Remove every version written on `branch`, just before its registry row goes.

        The one way rows leave the append-only table (`branches.delete_branch`).
        SQLite: the rows, their keyword index entries, pending vectors and merge
        copies. PostgreSQL: nothing here; deleting the branch row takes them all
        (ON DELETE CASCADE, postgres/schema.py), other members' private rows
        included, which a member could neither see nor delete.
        """
        if dialect_of(conn) != SQLITE:
            return
        rows = conn.execute(
            # As the index holds them (fts_words: migration 0005_cjk_keywords).
            "SELECT seq, op, fts_words(text) AS text, fts_words(coalesce(title, '')) AS title FROM records"
            " WHERE branch = ?",
            (branch,),
        ).fetchall()
        for r in rows:
            if r["op"] == "put" and r["text"] != "":
                # records_fts is an external-content index: removing a row needs its old values.
                conn.execute(
                    "INSERT INTO records_fts(records_fts, rowid, text, title) VALUES ('delete', ?, ?, ?)",
                    (r["seq"], r["text"], r["title"]),
                )
        conn.execute("DELETE FROM pending_vectors WHERE seq IN (SELECT seq FROM records WHERE branch = ?)", (branch,))
        conn.execute(
            "DELETE FROM merge_copies WHERE target_seq IN (SELECT seq FROM records WHERE branch = ?)", (branch,)
        )
        conn.execute("DELETE FROM records WHERE branch = ?", (branch,))

    # --- reads ------------------------------------------------------------

    @staticmethod
    def get(conn: sqlite3.Connection, record_id: str, view: View) -> dict[str, Any] | None:
        """The visible version of `record_id`, or None if absent or deleted in this view."""
        where, params = view.sql("", dialect_of(conn))
        row = conn.execute(
            f"SELECT * FROM records WHERE id = ? AND {where} ORDER BY seq DESC LIMIT 1",
            [record_id, *params],
        ).fetchone()
        if row is None or row["op"] == "delete":
            return None
        return row_to_dict(row)

    @staticmethod
    def history(conn: sqlite3.Connection, record_id: str, view: View) -> list[dict[str, Any]]:
        """Every version of `record_id` this view can see, oldest first (tombstones included)."""
        where, params = view.sql("", dialect_of(conn))
        rows = conn.execute(
            f"SELECT * FROM records WHERE id = ? AND {where} ORDER BY seq", [record_id, *params]
        ).fetchall()
        return [row_to_dict(r) for r in rows]

    @staticmethod
    def visible_seqs(conn: sqlite3.Connection, seqs: Iterable[int], view: View) -> set[int]:
        """Which of these row seqs are the visible, live version of their record in `view`."""
        return set(Records.visible_heads(conn, seqs, view))

    @staticmethod
    def visible_heads(
        conn: sqlite3.Connection,
        seqs: Iterable[int],
        view: View,
        columns: str = "",
        condition: tuple[str, list[Any]] | None = None,
    ) -> dict[int, Any]:
        """The rows among these seqs that are the visible, live version of their record in `view`,
        by seq: `id`, `seq`, `branch`, `op` and the SQL `columns` of `records r`, and when a
        `condition` (SQL over `r`, its params) is given, only the heads that meet it.

        One statement reads the heads and what the caller wants of them: on a team database
        every statement is a round trip to the server.
        """
        seqs = {int(s) for s in seqs}
        if not seqs:
            return {}
        dialect = dialect_of(conn)
        test, test_params = condition or (truth(dialect, True), [])
        extra = f", {columns}" if columns else ""
        # Fetch every version of the candidates' ids through the (id, seq) index and
        # pick each id's head in Python: a per-candidate correlated subquery lets
        # SQLite walk the branch index instead, which is slow on a big branch.
        heads: dict[str, Any] = {}
        by_id = " INDEXED BY records_by_id" if dialect == SQLITE else ""
        ordered = sorted(seqs)
        for start in range(0, len(ordered), 500):
            chunk = ordered[start : start + 500]
            rows = conn.execute(
                f"""
                SELECT r.id, r.seq, r.branch, r.op, ({test}) AS meets{extra} FROM records r{by_id}
                WHERE r.id IN (SELECT c.id FROM records c WHERE c.seq IN ({','.join('?' * len(chunk))}))
                """,
                [*test_params, *chunk],
            ).fetchall()
            for row in rows:
                if not view.sees_row(row["branch"], row["seq"]):
                    continue
                head = heads.get(row["id"])
                if head is None or row["seq"] > head["seq"]:
                    heads[row["id"]] = row
        return {row["seq"]: row for row in heads.values() if row["op"] == "put" and row["seq"] in seqs and row["meets"]}

    @staticmethod
    def query(
        conn: sqlite3.Connection,
        view: View,
        *,
        filters: dict[str, Any] | None = None,
        statuses: tuple[str, ...] | None = ("active",),
        order: str = "seq DESC",
        limit: int = 100,
        offset: int = 0,
        extra_where: str = "",
        extra_params: list[Any] | None = None,
    ) -> tuple[list[dict[str, Any]], int]:
        """Visible records matching column filters (exact match; a list means IN).

        Returns (page, total). Filters on columns that never change between
        versions (kind, project, user/agent/run/session ids) are pushed into the
        inner query so the per-id head lookup touches few rows.
        """
        if order not in QUERY_ORDERS:
            raise RecordError(f"order must be one of {', '.join(QUERY_ORDERS)}")
        where, params = view.sql("r", dialect_of(conn))
        split = _split_filters(filters)
        if split is None:
            return [], 0
        stable, changing = split
        conditions, cond_params = _in_clauses(stable)
        changing_clauses, outer_params = _in_clauses(changing)
        outer = ["r.op = 'put'", *changing_clauses]
        inner_where = " AND ".join([where, *conditions]) if conditions else where
        if statuses:
            outer.append(f"r.status IN ({','.join('?' * len(statuses))})")
            outer_params.extend(statuses)
        if extra_where:
            outer.append(f"({extra_where})")
            outer_params.extend(extra_params or [])
        base = f"""
            FROM records r
            JOIN (SELECT r.id AS id, max(r.seq) AS head FROM records r
                  WHERE {inner_where} GROUP BY r.id) h ON r.seq = h.head
            WHERE {' AND '.join(outer)}
        """
        base_params = [*params, *cond_params, *outer_params]
        total = conn.execute(f"SELECT count(*) {base}", base_params).fetchone()[0]
        rows = conn.execute(
            f"SELECT r.* {base} ORDER BY r.{order} LIMIT ? OFFSET ?",
            [*base_params, limit_param(dialect_of(conn), limit), offset],
        ).fetchall()
        return [row_to_dict(r) for r in rows], int(total)

    @staticmethod
    def latest(
        conn: sqlite3.Connection,
        view: View,
        *,
        filters: dict[str, Any] | None = None,
        statuses: tuple[str, ...] | None = ("active",),
        limit: int = 100,
        batch: int = 200,
    ) -> list[dict[str, Any]]:
        """The `limit` newest live records matching `filters`, without counting them all.

        Walks the view's rows newest first: the first row met for an id is its
        head in this view (nothing later is visible), so the cost grows with
        `limit`, not with how many records there are. `query` answers the same
        first page with a total, at a cost that grows with the whole scope.
        """
        where, params = view.sql("r", dialect_of(conn))
        split = _split_filters(filters)
        if split is None:
            return []
        stable, changing = split
        stable_clauses, stable_params = _in_clauses(stable)
        inner, inner_params = [where, *stable_clauses], [*params, *stable_params]
        # Columns that change between versions are checked on the head row itself, in Python.
        checks = [(column, set(values)) for column, values in changing]
        if statuses:
            checks.append(("status", set(statuses)))
        found: list[dict[str, Any]] = []
        seen: set[str] = set()
        before: int | None = None
        while len(found) < limit:
            cursor_where = " AND ".join(inner) + (" AND r.seq < ?" if before is not None else "")
            rows = conn.execute(
                f"SELECT r.* FROM records r WHERE {cursor_where} ORDER BY r.seq DESC LIMIT ?",
                [*inner_params, *([before] if before is not None else []), batch],
            ).fetchall()
            for row in rows:
                if row["id"] in seen:
                    continue
                seen.add(row["id"])
                if row["op"] == "put" and all(row[column] in allowed for column, allowed in checks):
                    found.append(row_to_dict(row))
                    if len(found) == limit:
                        break
            if len(rows) < batch:
                break
            before = rows[-1]["seq"]
        return found

    @staticmethod
    def by_seqs(conn: sqlite3.Connection, seqs: Iterable[int]) -> dict[int, dict[str, Any]]:
        seqs = [int(s) for s in seqs]
        out: dict[int, dict[str, Any]] = {}
        for start in range(0, len(seqs), 500):
            chunk = seqs[start : start + 500]
            rows = conn.execute(
                f"SELECT * FROM records WHERE seq IN ({','.join('?' * len(chunk))})", chunk
            ).fetchall()
            out.update({r["seq"]: row_to_dict(r) for r in rows})
        return out

    @staticmethod
    def head_seq(conn: sqlite3.Connection) -> int:
        """The last seq handed out. Read from the counter (SQLite's AUTOINCREMENT, PostgreSQL's
        sequence), not max(seq): deleting a branch removes its rows, and the sequence must never
        move back."""
        row = conn.execute(_HEAD_SEQ[dialect_of(conn)]).fetchone()
        return int(row[0] or 0)


_HEAD_SEQ = {
    SQLITE: "SELECT max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'records'), 0),"
    " coalesce((SELECT max(seq) FROM records), 0))",
    # The sequence itself (schema.py): rows deleted with a branch or private to
    # others do not hide a seq. Inside a write transaction, which holds the
    # write-order lock, no other write is in flight, so this is the committed head.
    POSTGRES: "SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM record_seq",
}


def max_seq(conn: sqlite3.Connection) -> int:
    """The highest seq this connection can see (0 when none): where a live feed starts."""
    return int(conn.execute("SELECT coalesce(max(seq), 0) FROM records").fetchone()[0])


def written_for(conn: sqlite3.Connection, session_id: str, source_id: str, happened_at: float) -> dict[str, Any] | None:
    """The latest version a session's event wrote (its `source_id` and time), or None."""
    row = conn.execute(
        """SELECT * FROM records WHERE session_id = ? AND source_id = ? AND happened_at = ?
           ORDER BY seq DESC LIMIT 1""",
        (session_id, source_id, happened_at),
    ).fetchone()
    return dict(row) if row is not None else None


def versions_of(conn: sqlite3.Connection, ids: list[str]) -> list[Any]:
    """Every version of these records on every branch, in seq order (rows as read)."""
    return conn.execute(f"SELECT * FROM records WHERE id IN ({','.join('?' * len(ids))}) ORDER BY seq", ids).fetchall()


def ids_written_on(conn: sqlite3.Connection, branch: str, after: int, upto: int | None = None) -> list[str]:
    """The ids with a version on `branch` whose seq is in (after, upto]; upto None: no upper bound."""
    sql = "SELECT DISTINCT id FROM records WHERE branch = ? AND seq > ?"
    params: list[Any] = [branch, after]
    if upto is not None:
        sql += " AND seq <= ?"
        params.append(upto)
    return [row[0] for row in conn.execute(sql, params)]


def ids_with_prefix(conn: sqlite3.Connection, prefix: str, limit: int | None = None) -> list[str]:
    """The record ids that start with `prefix` (the 8 characters the briefing and `search` print).

    A range on the id (records_by_id) rather than LIKE, which neither engine serves from the index;
    hyphens stripped from the end, which some collations sort apart."""
    prefix = prefix.strip().lower()
    low = prefix.rstrip("-")
    if not low:
        return []
    high = low[:-1] + chr(ord(low[-1]) + 1)
    sql = "SELECT DISTINCT id FROM records WHERE id >= ? AND id < ?" + (" LIMIT ?" if limit is not None else "")
    rows = conn.execute(sql, (low, high) if limit is None else (low, high, limit))
    return [r[0] for r in rows if r[0].startswith(prefix)]


def first_written(conn: sqlite3.Connection, ids: list[str]) -> dict[str, float]:
    """{record id: when its first version was written}."""
    first: dict[str, float] = {}
    for start in range(0, len(ids), 500):
        chunk = ids[start : start + 500]
        for row in conn.execute(
            f"SELECT id, min(created_at) FROM records WHERE id IN ({','.join('?' * len(chunk))}) GROUP BY id", chunk
        ):
            first[row[0]] = row[1]
    return first


def log_fact_rejection(conn: sqlite3.Connection, *, project: str, agent_id: str | None, text: str, confidence: float,
                       source: str | None, reason: str, at: float) -> None:  # fmt: skip
    """A statement refused as a fact, kept with why (`fact_rejections`)."""
    conn.execute(
        "INSERT INTO fact_rejections(project, agent_id, text, confidence, source, reason, created_at) VALUES (?,?,?,?,?,?,?)",
        (project, agent_id, text, confidence, source, reason, at),
    )


def earlier_same_text(conn: sqlite3.Connection, record_id: str, before_seq: int, content_hash: str) -> int | None:
    """The seq of the latest earlier version of a record with the same text, or None."""
    row = conn.execute(
        "SELECT seq FROM records WHERE id = ? AND seq < ? AND content_hash = ? AND op = 'put' "
        "ORDER BY seq DESC LIMIT 1",
        (record_id, before_seq, content_hash),
    ).fetchone()
    return row[0] if row is not None else None


def seqs_with_text_after(conn: sqlite3.Connection, after: int, limit: int) -> list[int]:
    """The next `limit` versions with text after seq `after`, in seq order."""
    return [row[0] for row in conn.execute(
        "SELECT seq FROM records WHERE seq > ? AND op = 'put' AND text != '' ORDER BY seq LIMIT ?", (after, limit))]  # fmt: skip


def new_rows(conn: sqlite3.Connection, after: int, skip_kinds: Iterable[str], limit: int) -> list[Any]:
    """(seq, author, created_at) of the next `limit` versions with text after seq `after`, but those of `skip_kinds`."""
    skip = sorted(skip_kinds)
    return conn.execute(f"""
        SELECT seq, author, created_at FROM records
        WHERE seq > ? AND op = 'put' AND text <> '' AND kind NOT IN ({", ".join("?" * len(skip))})
        ORDER BY seq LIMIT ?
    """, (after, *skip, limit)).fetchall()  # fmt: skip


def _containing(piece: str) -> str:
    """A LIKE pattern (with ESCAPE '\\') for text that holds `piece`, lower case, as it is."""
    escaped = piece.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def claude_texts_containing(conn: sqlite3.Connection, project: str, piece: str, limit: int = 20) -> list[str]:
    """Claude's words in a project (its reply passages and session summaries) that contain `piece`
    in any case: where a sentence pasted back into a prompt was first said."""
    return [row[0] for row in conn.execute(
        "SELECT text FROM records WHERE project = ? AND kind IN ('transcript', 'summary') AND op = 'put' "
        "AND lower(text) LIKE ? ESCAPE '\\' LIMIT ?", (project, _containing(piece), limit))]  # fmt: skip


def prompts_containing(conn: sqlite3.Connection, project: str, piece: str, limit: int = 100) -> list[dict[str, Any]]:
    """The prompts of a project that contain `piece` in any case, the latest first (their text, session
    and data): where the user said something before."""
    rows = conn.execute(
        "SELECT text, session_id, data FROM records WHERE project = ? AND kind = 'prompt' AND op = 'put' "
        "AND lower(text) LIKE ? ESCAPE '\\' ORDER BY seq DESC LIMIT ?", (project, _containing(piece), limit)).fetchall()  # fmt: skip
    return [row_to_dict(row) for row in rows]


def versions_by_kind(conn: sqlite3.Connection) -> dict[str, int]:
    """How many record versions there are of each kind."""
    return {r[0]: r[1] for r in conn.execute("SELECT kind, count(*) FROM records GROUP BY kind")}
