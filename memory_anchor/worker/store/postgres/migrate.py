"""Moving a memory between SQLite and a team database, keys and seqs unchanged.

Both ways go through the export format of `memory_anchor/worker/store/portability.py`:

- SQLite to PostgreSQL: the `Exporter` reads one consistent snapshot of the
  data dir's file, and `load_into_postgres` writes its rows into an empty team
  database in one transaction, each in the name of the developer it belongs to.
- PostgreSQL to SQLite: `export_postgres` writes the team database's rows as an
  export, and the `Importer` loads it into an empty SQLite file, with every
  check it makes of any export.

Seqs, versions, branch fork points, snapshots and timestamps travel as they
are, so every read (`as_of` a seq, a snapshot or a time included) answers the
same on the other side. Per-machine tables (the LLM budget, the quarantine)
stay where they are; record vectors are rebuilt from the text.

Run as the database owner (as `storage init` is): the team tables FORCE
row-level security, which only their owner may lift, and only inside the
migration's transaction. On PostgreSQL a record's seq is handed out by a
trigger under the write-order lock; the loader holds that lock and sets the
sequence so that the trigger hands out the record's own seq, which keeps the
trigger (and its rule for `private`) the only one.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import psycopg
from pydantic import ValidationError

from memory_anchor.schemas.portability import ExportEnd, ExportHeader, ExportRow
from memory_anchor.core.version import __version__
from memory_anchor.worker.store.errors import StorageError
from memory_anchor.worker.store.portability import LEADING_TABLES, decode_value, encode_value
from memory_anchor.worker.store.postgres.database import Connection as StoreConnection
from memory_anchor.worker.store.postgres.database import row_factory
from memory_anchor.worker.store.postgres.schema import MEMBER_ROLE, WRITE_ORDER_LOCK
from memory_anchor.worker.store.records import MAIN, iso
from memory_anchor.worker.store.terms import index_record

# This machine's, not the team's: never copied into a team database.
LOCAL_TABLES = frozenset({"llm_usage", "quarantine", "inbox", "pending_vectors"})
# The team database's own: vectors are rebuilt from the text on the other side.
TEAM_ONLY_TABLES = frozenset({"record_vectors", "schema_migrations"})


def team_tables(conn: psycopg.Connection) -> list[str]:
    rows = conn.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE'"
    ).fetchall()
    return [r[0] for r in rows if r[0] not in TEAM_ONLY_TABLES]


def _column_types(conn: psycopg.Connection, table: str) -> dict[str, str]:
    """Column name to data type, generated columns left out (nothing may write them)."""
    rows = conn.execute(
        """SELECT column_name, data_type FROM information_schema.columns
           WHERE table_schema = 'public' AND table_name = %s AND is_generated = 'NEVER' ORDER BY ordinal_position""",
        (table,),
    ).fetchall()
    return {name: kind for name, kind in rows}


def _parents(conn: psycopg.Connection) -> dict[str, set[str]]:
    """Each table's foreign-key parents (other tables)."""
    rows = conn.execute(
        """SELECT c.conrelid::regclass::text, c.confrelid::regclass::text FROM pg_constraint c
           WHERE c.contype = 'f' AND c.conrelid <> c.confrelid"""
    ).fetchall()
    parents: dict[str, set[str]] = {}
    for child, parent in rows:
        parents.setdefault(child, set()).add(parent)
    return parents


def _lift_row_security(conn: psycopg.Connection, tables: Iterable[str]) -> None:
    """For this transaction only (DDL rolls back with it, and the COMMIT restores it below)."""
    for table in tables:
        conn.execute(f'ALTER TABLE "{table}" NO FORCE ROW LEVEL SECURITY')


def _restore_row_security(conn: psycopg.Connection, tables: Iterable[str]) -> None:
    for table in tables:
        conn.execute(f'ALTER TABLE "{table}" FORCE ROW LEVEL SECURITY')


def _require_empty(conn: psycopg.Connection, tables: list[str]) -> None:
    records = conn.execute("SELECT count(*) FROM records").fetchone()[0]
    busy = [f"{records} record versions"] if records else []
    for table in tables:
        if table == "records":
            continue
        if table == "branches":
            if conn.execute("SELECT 1 FROM branches WHERE name <> %s LIMIT 1", (MAIN,)).fetchone():
                busy.append("branches")
        elif conn.execute(f'SELECT 1 FROM "{table}" LIMIT 1').fetchone():
            busy.append(table)
    if busy:
        raise StorageError(
            f"the team database is not empty ({', '.join(busy)}): migrate only into a database just made "
            "with `memory-anchor storage init`; nothing was written"
        )


def _require_member(conn: psycopg.Connection, role: str) -> None:
    """The rows will be `role`'s: a developer's role that is a member, so that they can read them."""
    member = conn.execute(
        "SELECT pg_has_role(r.rolname, %s, 'MEMBER') FROM pg_roles r WHERE r.rolname = %s", (MEMBER_ROLE, role)
    ).fetchone()
    if not member or not member[0]:
        raise StorageError(
            f"{role!r} is not a member of the team database: `memory-anchor storage add-member {role}` first"
        )


def _lines(chunks: Iterable[bytes]) -> Iterator[dict[str, Any]]:
    """The export's lines as objects (an Exporter's chunks always end at a line's end)."""
    for chunk in chunks:
        for raw in chunk.split(b"\n"):
            if raw.strip():
                yield json.loads(raw)


def load_into_postgres(conn: psycopg.Connection, chunks: Iterable[bytes], author: str) -> dict[str, Any]:
    """Write an export into the empty team database behind `conn` (the owner's, in autocommit), every
    row in `author`'s name, in one transaction; {"copied": {table: rows}, "left_local": [...], "head_seq"}.
    StorageError when the database is not empty or the export does not fit it; nothing is written then."""
    lines = _lines(chunks)
    try:
        header = ExportHeader.model_validate(next(lines))
    except (StopIteration, ValidationError) as exc:
        raise StorageError(f"the source is not a Memory Anchor export: {exc}")
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_ORDER_LOCK,))
        _require_member(conn, author)
        tables = team_tables(conn)
        unknown = sorted(set(header.tables) - set(tables) - LOCAL_TABLES)
        if unknown:
            raise StorageError(f"the team database has no table(s) {', '.join(unknown)}: upgrade it with `storage init`")
        _lift_row_security(conn, tables)
        _require_empty(conn, tables)
        conn.execute("DELETE FROM branches")  # the schema's seed `main`: the source brings its own
        loader = _Loader(conn, tables, author)
        end = None
        for line in lines:
            if line.get("type") == "end":
                end = ExportEnd.model_validate(line)
                continue
            row = ExportRow.model_validate(line)
            if row.table not in LOCAL_TABLES:
                loader.add(row.table, row.row)
        if end is None:
            raise StorageError("the export ends without its end line: it is truncated; nothing was written")
        loader.finish()
        head = conn.execute("SELECT coalesce(max(seq), 0) FROM records").fetchone()[0]  # while the owner still sees
        _restore_row_security(conn, tables)
    return {
        "copied": loader.copied,
        "left_local": sorted(set(header.tables) & LOCAL_TABLES),
        "head_seq": int(head),
    }


class _Loader:
    """Inserts rows table by table; rows of a table whose foreign-key parents have not all been
    loaded yet (the export orders tables by name after the leading ones) wait until they have."""

    def __init__(self, conn: psycopg.Connection, tables: list[str], author: str):
        self.conn = conn
        self.store = StoreConnection(conn)  # the store's face of it, for index_record
        self.author = author
        self.types = {t: _column_types(conn, t) for t in tables}
        self.parents = _parents(conn)
        self.copied: dict[str, int] = {}
        self.waiting: dict[str, list[dict[str, Any]]] = {}

    def add(self, table: str, row: dict[str, Any]) -> None:
        if self._ready(table):
            self._insert(table, row)
        else:
            self.waiting.setdefault(table, []).append(row)

    def _ready(self, table: str) -> bool:
        return all(parent == table or parent in self.copied for parent in self.parents.get(table, ()))

    def finish(self) -> None:
        while self.waiting:
            ready = [t for t in self.waiting if self._ready(t)] or list(self.waiting)  # empty parents count too
            for table in ready:
                for row in self.waiting.pop(table):
                    self._insert(table, row)
                self.copied.setdefault(table, 0)
        self._advance_identities()

    def _insert(self, table: str, row: dict[str, Any]) -> None:
        types = self.types[table]
        missing = sorted(set(row) - set(types))
        if missing:
            raise StorageError(f"the team database's {table} has no column(s) {', '.join(missing)}: nothing was written")
        values = {name: self._value(types[name], decode_value(value, None, name)) for name, value in row.items()}
        if "author" in types:
            values["author"] = self.author
        if table == "records":
            # The trigger hands out nextval: make that this row's own seq.
            self.conn.execute("SELECT setval('record_seq', %s, false)", (values["seq"],))
        names = ", ".join(f'"{n}"' for n in values)
        marks = ", ".join(["%s"] * len(values))
        cursor = self.conn.cursor(row_factory=row_factory)
        cursor.execute(f'INSERT INTO "{table}" ({names}) VALUES ({marks}) RETURNING *', list(values.values()))
        if table == "records":
            # Its keyword terms, as the store writes them with a record (SQLite's index is its own;
            # the export does not carry it). Records come in seq order: the thread context of
            # each, the records before it, is already there.
            index_record(self.store, cursor.fetchone())
        self.copied[table] = self.copied.get(table, 0) + 1

    @staticmethod
    def _value(kind: str, value: Any) -> Any:
        if kind == "boolean" and value is not None:
            return bool(value)  # SQLite keeps booleans as 0/1
        return value

    def _advance_identities(self) -> None:
        """Identity columns go on after the copied ids, and the record seq after the head."""
        rows = self.conn.execute(
            """SELECT table_name, column_name FROM information_schema.columns
               WHERE table_schema = 'public' AND is_identity = 'YES'"""
        ).fetchall()
        for table, column in rows:
            if self.copied.get(table):
                self.conn.execute(
                    f"SELECT setval(pg_get_serial_sequence(%s, %s), (SELECT max(\"{column}\") FROM \"{table}\"))",
                    (table, column),
                )
        if self.copied.get("records"):
            self.conn.execute("SELECT setval('record_seq', (SELECT max(seq) FROM records))")


def export_postgres(conn: psycopg.Connection, sqlite_tables: dict[str, list[str]]) -> Iterator[bytes]:
    """The team database as an export for SQLite: the tables and columns SQLite has (`sqlite_tables`),
    read in one snapshot as the owner. Rows as the owner sees them all: every author's."""
    with conn.transaction():
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        tables = [t for t in team_tables(conn) if t in sqlite_tables]
        _lift_row_security(conn, tables)
        leading = [t for t in LEADING_TABLES if t in tables]
        ordered = leading + sorted(set(tables) - set(leading))
        counts = {t: conn.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0] for t in ordered}
        head = conn.execute("SELECT coalesce(max(seq), 0) FROM records").fetchone()[0]
        # The source's migrations are PostgreSQL's, which SQLite does not know by name: none are claimed.
        header = ExportHeader(
            worker_version=__version__, exported_at=iso(time.time()), head_seq=head, migrations=[], tables=counts
        )
        yield (header.model_dump_json() + "\n").encode("utf-8")
        rows = 0
        for table in ordered:
            columns = [c for c in _column_types(conn, table) if c in sqlite_tables[table]]
            quoted = ", ".join(f'"{c}"' for c in columns)
            keys = _order_keys(conn, table)
            order = f" ORDER BY {keys}" if keys else ""
            for values in conn.execute(f'SELECT {quoted} FROM "{table}"{order}'):
                row = {c: _sqlite_value(v) for c, v in zip(columns, values)}
                line = ExportRow(table=table, row=row).model_dump_json()
                rows += 1
                yield (line + "\n").encode("utf-8")
        yield (ExportEnd(rows=rows).model_dump_json() + "\n").encode("utf-8")
        raise psycopg.Rollback()  # it only read: row security was lifted for this transaction alone


def _order_keys(conn: psycopg.Connection, table: str) -> str:
    """The primary key's columns (rows come out in the order they were written), else none."""
    rows = conn.execute(
        """SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)
           WHERE i.indrelid = %s::regclass AND i.indisprimary""",
        (table,),
    ).fetchall()
    return ", ".join(f'"{r[0]}"' for r in rows)


def _sqlite_value(value: Any) -> Any:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (bytes, memoryview)):
        return encode_value(value)
    return value




def sqlite_to_postgres(sqlite_path: Path, url: str, author: str) -> dict[str, Any]:
    """Copy the memory in a SQLite file into the empty team database at `url` (the owner's URL)."""
    from memory_anchor.worker.store.portability import Exporter
    from memory_anchor.worker.store.postgres.connect import connect, explain

    if not Path(sqlite_path).is_file():
        raise StorageError(f"no memory at {sqlite_path}: give the data dir (--data-dir) or the file (--from)")
    with connect(url, autocommit=True) as conn:
        try:
            return load_into_postgres(conn, Exporter(sqlite_path).chunks(), author)
        except psycopg.Error as exc:
            raise explain(exc, "copying into the team database") from exc


def postgres_to_sqlite(url: str, sqlite_path: Path) -> dict[str, Any]:
    """Copy the team database at `url` (the owner's URL) into a new or empty SQLite file."""
    from memory_anchor.worker.store.db import Database
    from memory_anchor.worker.store.portability import Importer, exportable_tables, table_columns
    from memory_anchor.worker.store.postgres.connect import connect, explain

    database = Database(sqlite_path)
    try:
        reader = database.reader()
        sqlite_tables = {t: table_columns(reader, t) for t in exportable_tables(reader)}
        with tempfile.TemporaryDirectory(prefix="memory-anchor-migrate-") as scratch:
            export = Path(scratch) / "team.jsonl"
            with connect(url, autocommit=True) as conn, open(export, "wb") as handle:
                try:
                    for chunk in export_postgres(conn, sqlite_tables):
                        handle.write(chunk)
                except psycopg.Error as exc:
                    raise explain(exc, "reading the team database") from exc
            result = Importer(database).import_file(export)
    finally:
        database.close()
    return result.model_dump()
