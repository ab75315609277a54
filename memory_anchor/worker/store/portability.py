"""Export the whole memory as JSON Lines, and import such a file into an empty worker.

What is exported is discovered from `sqlite_master`, so a table another area
adds later (approvals, merges, ...) travels without a change here. Left out:
SQLite's own tables, FTS5 tables and their shadow tables (rebuilt by the
records trigger on import), the inbox (transport, not memory), the vector
queue (rebuilt after import) and `schema_migrations` (the header lists it).

Rows keep their keys, so record `seq`s, approval ids and branch fork points
mean the same after an import: every read (get, history, list, `as_of`)
answers as it did in the source.

    chunks = Exporter(db.path).chunks()          # bytes, one consistent read snapshot
    result = Importer(db).import_file(path)      # all or nothing; RecordError on bad input
"""

from __future__ import annotations

import base64
import json
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from memory_anchor.core.version import __version__
from memory_anchor.schemas.portability import (
    ExportEnd,
    ExportHeader,
    ExportedRecord,
    ExportRow,
    ImportResult,
)
from memory_anchor.worker.store.db import Database, connect
from memory_anchor.worker.store.records import MAIN, RecordError, iso

EXCLUDED_TABLES = frozenset({"inbox", "pending_vectors", "schema_migrations"})
# Written first so that a reader of the file meets the branch registry before
# the rows that refer to it; every other table follows in name order.
LEADING_TABLES = ("branches", "snapshots", "records", "sessions")
CHUNK_BYTES = 256 * 1024
BYTES_KEY = "$bytes"


class ExportFileError(RecordError):
    """An export file that cannot be imported; says which line and why."""

    def __init__(self, message: str, *, line: int | None = None, code: str = "invalid_export", status: int = 400):
        super().__init__(f"line {line}: {message}" if line else message, code=code, status=status)


def exportable_tables(conn: sqlite3.Connection) -> list[str]:
    """The memory's tables, in export order (see the module docstring for what is left out)."""
    rows = conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'").fetchall()
    virtual = [r[0] for r in rows if (r[1] or "").lstrip().upper().startswith("CREATE VIRTUAL TABLE")]
    names = []
    for name, _sql in rows:
        if name.startswith("sqlite_") or name in EXCLUDED_TABLES or name in virtual:
            continue
        if any(name.startswith(f"{v}_") for v in virtual):  # FTS5 shadow tables
            continue
        names.append(name)
    leading = [t for t in LEADING_TABLES if t in names]
    return leading + sorted(set(names) - set(leading))


def table_columns(conn: sqlite3.Connection, table: str) -> list[str]:
    return [r[1] for r in conn.execute(f'PRAGMA table_info("{table}")')]


def _has_rowid(conn: sqlite3.Connection, table: str) -> bool:
    sql = conn.execute("SELECT sql FROM sqlite_master WHERE name = ?", (table,)).fetchone()[0] or ""
    return "WITHOUT ROWID" not in sql.upper()


def encode_value(value: Any) -> Any:
    """A column value as an export line holds it (bytes as {"$bytes": base64})."""
    if isinstance(value, (bytes, memoryview)):
        return {BYTES_KEY: base64.b64encode(bytes(value)).decode("ascii")}
    return value


def decode_value(value: Any, line: int | None, column: str) -> Any:
    """A column value from an export line; ExportFileError names the line and column when it is malformed."""
    if isinstance(value, dict):
        if set(value) != {BYTES_KEY} or not isinstance(value[BYTES_KEY], str):
            raise ExportFileError(f"column {column!r}: an object value must be {{\"$bytes\": base64}}", line=line)
        try:
            return base64.b64decode(value[BYTES_KEY], validate=True)
        except ValueError:
            raise ExportFileError(f"column {column!r}: invalid base64", line=line)
    return value


def _migrations(conn: sqlite3.Connection) -> list[str]:
    return [r[0] for r in conn.execute("SELECT name FROM schema_migrations ORDER BY name")]


class Exporter:
    """Streams one consistent snapshot of the database as JSON Lines."""

    def __init__(self, db_path: Path | str):
        self.db_path = db_path

    def chunks(self) -> Iterator[bytes]:
        """The export in chunks of about CHUNK_BYTES. Close the generator to stop early."""
        conn = connect(self.db_path)
        conn.execute("PRAGMA query_only=ON")
        # One read transaction: WAL gives it a snapshot, so writes that land
        # while the export streams are either wholly in it or wholly out.
        conn.execute("BEGIN")
        try:
            tables = exportable_tables(conn)
            counts = {t: conn.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0] for t in tables}
            head = conn.execute("SELECT max(seq) FROM records").fetchone()[0] or 0
            header = ExportHeader(
                worker_version=__version__,
                exported_at=iso(time.time()),
                head_seq=head,
                migrations=_migrations(conn),
                tables=counts,
            )
            buffer = [header.model_dump_json()]
            size = len(buffer[0])
            rows = 0
            for table in tables:
                columns = table_columns(conn, table)
                order = " ORDER BY rowid" if _has_rowid(conn, table) else ""
                quoted = ", ".join(f'"{c}"' for c in columns)
                for values in conn.execute(f'SELECT {quoted} FROM "{table}"{order}'):
                    row = {c: encode_value(v) for c, v in zip(columns, values)}
                    line = json.dumps({"type": "row", "table": table, "row": row}, ensure_ascii=False)
                    buffer.append(line)
                    size += len(line)
                    rows += 1
                    if size >= CHUNK_BYTES:
                        yield ("\n".join(buffer) + "\n").encode("utf-8")
                        buffer, size = [], 0
            buffer.append(ExportEnd(rows=rows).model_dump_json())
            yield ("\n".join(buffer) + "\n").encode("utf-8")
        finally:
            conn.execute("ROLLBACK")
            conn.close()


class Importer:
    """Loads an export into a worker whose memory is empty, in one transaction."""

    def __init__(self, db: Database):
        self.db = db

    def import_file(self, path: Path | str) -> ImportResult:
        started = time.monotonic()
        with open(path, "rb") as handle, self.db.transaction() as conn:
            # The file lists branches before snapshots, but other tables may
            # refer to each other in any order: check foreign keys at the end.
            conn.execute("PRAGMA defer_foreign_keys=ON")
            tables = exportable_tables(conn)
            self._require_empty(conn, tables)
            for table in tables:  # only the seed rows of the migrations (the `main` branch)
                conn.execute(f'DELETE FROM "{table}"')
            imported = self._load(conn, handle, tables)
            self._check_integrity(conn)
            # The records trigger already queued each version's text; this makes
            # sure of it even if that trigger changes: the vector index rebuilds.
            conn.execute(
                "INSERT OR IGNORE INTO pending_vectors(seq) SELECT seq FROM records WHERE op = 'put' AND text != ''"
            )
            queued = conn.execute("SELECT count(*) FROM pending_vectors").fetchone()[0]
            head = conn.execute("SELECT max(seq) FROM records").fetchone()[0] or 0
        return ImportResult(
            imported=imported,
            rows=sum(imported.values()),
            head_seq=head,
            queued_for_embedding=queued,
            seconds=round(time.monotonic() - started, 3),
        )

    @staticmethod
    def _require_empty(conn: sqlite3.Connection, tables: list[str]) -> None:
        records = conn.execute("SELECT count(*) FROM records").fetchone()[0]
        if records:
            raise RecordError(
                f"this worker already holds {records} record versions; import only into an empty data dir "
                "(start a worker with a new MEMORY_ANCHOR_DATA_DIR)",
                code="not_empty",
                status=409,
            )
        busy = []
        for table in tables:
            if table == "branches":
                others = conn.execute("SELECT count(*) FROM branches WHERE name != ?", (MAIN,)).fetchone()[0]
                if others:
                    busy.append(table)
            elif conn.execute(f'SELECT 1 FROM "{table}" LIMIT 1').fetchone():
                busy.append(table)
        if busy:
            raise RecordError(
                f"this worker is not empty (rows in {', '.join(busy)}); import only into an empty data dir",
                code="not_empty",
                status=409,
            )

    def _load(self, conn: sqlite3.Connection, handle, tables: list[str]) -> dict[str, int]:
        header: ExportHeader | None = None
        end: ExportEnd | None = None
        columns: dict[str, set[str]] = {t: set(table_columns(conn, t)) for t in tables}
        imported: dict[str, int] = {}
        number = 0
        for number, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            line = self._parse(raw, number)
            kind = line.get("type")
            if header is None:
                header = self._header(conn, line, number, tables)
                imported = {t: 0 for t in header.tables}
                continue
            if end is not None:
                raise ExportFileError("nothing may follow the end line", line=number)
            if kind == "end":
                end = self._validated(ExportEnd, line, number)
                continue
            if kind != "row":
                raise ExportFileError(f"expected a row or the end line, got type {kind!r}", line=number)
            row = self._validated(ExportRow, line, number)
            if row.table not in imported:
                raise ExportFileError(f"table {row.table!r} is not listed in the header", line=number)
            unknown = set(row.row) - columns[row.table]
            if unknown:
                raise ExportFileError(f"table {row.table!r} has no column(s) {sorted(unknown)}", line=number)
            if row.table == "records":
                self._check_record(row.row, number)
            self._insert(conn, row.table, row.row, number)
            imported[row.table] += 1
        if header is None:
            raise ExportFileError("the file is empty: expected an export header on line 1")
        if end is None:
            raise ExportFileError(f"the file ends at line {number} without its end line: it is truncated")
        if end.rows != sum(imported.values()):
            raise ExportFileError(f"the end line counts {end.rows} rows but the file has {sum(imported.values())}")
        for table, expected in header.tables.items():
            if imported[table] != expected:
                raise ExportFileError(f"the header lists {expected} rows of {table!r} but the file has {imported[table]}")
        return imported

    @staticmethod
    def _parse(raw: bytes, number: int) -> dict[str, Any]:
        try:
            line = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ExportFileError(f"not valid JSON ({exc})", line=number)
        if not isinstance(line, dict):
            raise ExportFileError("each line must be a JSON object", line=number)
        return line

    @staticmethod
    def _validated(model, line: dict[str, Any], number: int):
        try:
            return model.model_validate(line)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'line'}: {e['msg']}" for e in exc.errors()[:3]
            )
            raise ExportFileError(problems, line=number)

    def _header(self, conn: sqlite3.Connection, line: dict[str, Any], number: int, tables: list[str]) -> ExportHeader:
        if line.get("type") != "header" or line.get("format") != "memory-anchor-export":
            raise ExportFileError("not a Memory Anchor export: the first line must be its header", line=number)
        header = self._validated(ExportHeader, line, number)
        missing = sorted(set(header.migrations) - set(_migrations(conn)))
        if missing:
            raise ExportFileError(
                f"the export comes from a newer schema (migrations {', '.join(missing)} are unknown here); "
                "upgrade memory-anchor first",
                code="incompatible_export",
            )
        unknown = sorted(set(header.tables) - set(tables))
        if unknown:
            raise ExportFileError(f"the export has tables this worker does not import: {', '.join(unknown)}", line=number)
        return header

    @staticmethod
    def _check_record(row: dict[str, Any], number: int) -> None:
        checked = Importer._validated(ExportedRecord, row, number)
        for column in ("data", "metadata"):
            try:
                value = json.loads(getattr(checked, column))
            except json.JSONDecodeError:
                value = None
            if not isinstance(value, dict):
                raise ExportFileError(f"records.{column} must be the text of a JSON object", line=number)

    @staticmethod
    def _insert(conn: sqlite3.Connection, table: str, row: dict[str, Any], number: int) -> None:
        names = list(row)
        values = [decode_value(row[c], number, c) for c in names]
        quoted = ", ".join(f'"{c}"' for c in names)
        try:
            conn.execute(f'INSERT INTO "{table}" ({quoted}) VALUES ({", ".join("?" * len(names))})', values)
        except sqlite3.Error as exc:
            raise ExportFileError(f"cannot insert into {table}: {exc}", line=number)

    @staticmethod
    def _check_integrity(conn: sqlite3.Connection) -> None:
        """Foreign keys and the branch registry, checked before COMMIT so a bad file rolls back."""
        broken = conn.execute("PRAGMA foreign_key_check").fetchall()
        if broken:
            table, rowid, parent = broken[0][0], broken[0][1], broken[0][2]
            raise ExportFileError(
                f"{len(broken)} row(s) refer to missing rows, e.g. {table} rowid {rowid} → {parent}"
            )
        if conn.execute("SELECT 1 FROM branches WHERE name = ?", (MAIN,)).fetchone() is None:
            raise ExportFileError("the export has no 'main' branch")
        orphans = conn.execute(
            "SELECT DISTINCT branch FROM records WHERE branch NOT IN (SELECT name FROM branches) LIMIT 3"
        ).fetchall()
        if orphans:
            raise ExportFileError(f"records are on unknown branch(es): {', '.join(r[0] for r in orphans)}")
