"""`memory-anchor storage migrate`: a SQLite memory into a team database, and back, reads unchanged.

The source is a real worker's memory (tests/test_portability.py's `fill`: updates,
deletes, three branches, a snapshot, a merge, an approval, captured tool uses).
It is migrated into a fresh team database as the member `dev`; the store's reads
there (get, history, each `as_of` a seq, a snapshot or a time, on every branch)
answer as on the source; migrated back into a new data dir, a worker there
answers every read of the portability round trip exactly as the source did.
"""

from __future__ import annotations

import json
import subprocess
import sys

import psycopg
import pytest

from tests.conftest import ROOT, start_worker
from tests.postgres import database_owned_by_a_non_superuser, init_team_database, member_url
from tests.test_portability import add, every_read, export_text, fill, rows_of
from memory_anchor.worker.store.db import Database
from memory_anchor.worker.store.postgres.database import PostgresDatabase
from memory_anchor.worker.store.postgres.migrate import LOCAL_TABLES
from memory_anchor.worker.store.records import Records, resolve_view

# Columns the team database adds to a record (who wrote it, who may read it).
TEAM_COLUMNS = ("author", "private")


def migrate(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "memory_anchor.cli.main", "--json", "storage", "migrate", *argv],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    """A filled memory, its worker stopped: (data dir, plan, every read's answer, its export)."""
    data_dir = tmp_path_factory.mktemp("migrate-source") / "data"
    worker = start_worker(data_dir)
    try:
        # A branch written to and deleted first: its rows go and leave a gap in the seqs, so a copy
        # that numbered the versions afresh would not pass for the original.
        worker.post("/api/v1/branches", {"name": "scratch"}, expect=201)
        add(worker, "on a branch about to go", branch="scratch")
        status, _ = worker.request("DELETE", "/api/v1/branches/scratch")
        assert status == 200
        plan = fill(worker)
        answers, export = every_read(worker, plan), export_text(worker)
    finally:
        worker.stop()
    return data_dir, plan, answers, export


@pytest.fixture
def team(postgres_cluster):
    name = init_team_database(postgres_cluster)
    yield postgres_cluster.url(name), member_url(postgres_cluster, name, "dev")
    postgres_cluster.drop_database(name)


def _reads(db, plan: dict, when: float) -> dict:
    """The store's answers to get and history on every branch, now and as of each point in `plan`."""
    answers = {}
    conn = db.reader()
    for branch in plan["branches"]:
        for as_of in [None, *plan["as_of"], when]:
            view = resolve_view(conn, branch, as_of)
            for record_id in plan["ids"]:
                found = Records.get(conn, record_id, view)
                answers[("get", branch, as_of, record_id)] = _common(found) if found else None
                answers[("history", branch, as_of, record_id)] = [_common(v) for v in Records.history(conn, record_id, view)]
    return answers


def _common(record: dict) -> dict:
    return {k: v for k, v in record.items() if k not in TEAM_COLUMNS}


def _table_rows(export: str) -> dict[str, list[str]]:
    """Rows per table as sorted JSON, per-machine tables left out (they stay where they were)."""
    tables: dict[str, list[str]] = {}
    for line in rows_of(export):
        if line["table"] not in LOCAL_TABLES:
            tables.setdefault(line["table"], []).append(json.dumps(line["row"], sort_keys=True))
    return {table: sorted(rows) for table, rows in tables.items()}


def test_sqlite_to_postgres_and_back_keeps_every_read(source, team, tmp_path):
    data_dir, plan, answers, export = source
    owner_url, dev_url = team
    sqlite_file = data_dir / "memory.sqlite3"

    done = migrate("--to", owner_url, "--from", str(sqlite_file), "--author", "dev")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    source_records = sum(1 for line in rows_of(export) if line["table"] == "records")
    assert result["copied"]["records"] == source_records and result["copied"]["branches"] == 3

    # On the team database, as the member: the same versions, seqs and times on every branch and as_of.
    local = Database(sqlite_file)
    team_db = PostgresDatabase(dev_url)
    try:
        middle = local.reader().execute("SELECT created_at FROM records ORDER BY seq LIMIT 1 OFFSET 5").fetchone()[0]
        expected = _reads(local, plan, middle)
        assert _reads(team_db, plan, middle) == expected
        assert any(v for k, v in expected.items() if k[0] == "history" and len(v) > 1)  # the reads are not all empty
        # Keyword search finds the migrated records: their terms are indexed as the store writes them.
        assert _keyword_reads(team_db) == _keyword_reads(local)
    finally:
        team_db.close()
        local.close()

    # Back into a new data dir: a worker there answers every read as the source did.
    back_dir = tmp_path / "back"
    back_dir.mkdir()
    done = migrate("--to", str(back_dir), "--from", owner_url)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["imported"]["records"] == source_records

    # The team database's sequence goes on after the copied head.
    team_db = PostgresDatabase(dev_url)
    try:
        with team_db.transaction() as conn:
            new = Records.put(conn, "memory", "written after the migration", branch="main", actor="test")
        assert new["seq"] == result["head_seq"] + 1
    finally:
        team_db.close()

    worker = start_worker(back_dir)
    try:
        worker.wait_idle()
        after = every_read(worker, plan)
        assert after.keys() == answers.keys()
        for key in answers:
            assert after[key] == answers[key], key
        assert _table_rows(export_text(worker)) == _table_rows(export)
    finally:
        worker.stop()


def test_a_non_empty_target_is_refused_and_left_alone(source, team, tmp_path):
    data_dir, _plan, _answers, _export = source
    owner_url, _dev_url = team
    sqlite_file = data_dir / "memory.sqlite3"
    assert migrate("--to", owner_url, "--from", str(sqlite_file), "--author", "dev").returncode == 0
    with psycopg.connect(owner_url) as conn:  # the test cluster's superuser: row security does not apply
        before = conn.execute("SELECT count(*), max(seq) FROM records").fetchone()

    again = migrate("--to", owner_url, "--from", str(sqlite_file), "--author", "dev")
    assert again.returncode == 1 and "not empty" in again.stderr and "Traceback" not in again.stderr
    with psycopg.connect(owner_url) as conn:
        assert conn.execute("SELECT count(*), max(seq) FROM records").fetchone() == before
        # Row security is in force again after the migration's transaction.
        forced = conn.execute("SELECT relforcerowsecurity FROM pg_class WHERE relname = 'records'").fetchone()[0]
        assert forced is True

    # A member cannot lift the tables' row security: the way back asks for the owner, plainly.
    member = migrate("--to", str(tmp_path / "copy" / "memory.sqlite3"), "--from", _dev_url)
    assert member.returncode == 1 and "database owner" in member.stderr and "Traceback" not in member.stderr

    # The way back refuses a data dir that already has a memory.
    back = migrate("--to", str(data_dir), "--from", owner_url)
    assert back.returncode == 1 and ("not empty" in back.stderr or "already holds" in back.stderr), back.stderr


def test_unknown_author_and_missing_source_are_clear_errors(team, tmp_path):
    owner_url, _ = team
    nobody = migrate("--to", owner_url, "--from", str(tmp_path / "none.sqlite3"), "--author", "dev")
    assert nobody.returncode == 1 and "no memory at" in nobody.stderr
    Database(tmp_path / "empty.sqlite3").close()
    stranger = migrate("--to", owner_url, "--from", str(tmp_path / "empty.sqlite3"), "--author", "mallory")
    assert stranger.returncode == 1 and "add-member mallory" in stranger.stderr
    no_author = migrate("--to", owner_url, "--from", str(tmp_path / "empty.sqlite3"))
    assert no_author.returncode == 1 and "--author" in no_author.stderr


def test_an_owner_who_is_not_a_superuser_migrates(source, postgres_cluster):
    """As on a managed PostgreSQL: the owner has CREATEROLE only, and lifts its tables' FORCE for the
    migration's transaction alone; the member then reads the memory, and the owner still reads nothing."""
    data_dir, plan, _answers, export = source
    database, owner = database_owned_by_a_non_superuser(postgres_cluster, "migrating_owner")
    try:
        cli = [sys.executable, "-m", "memory_anchor.cli.main", "storage"]
        for step in (["init", owner], ["add-member", "fran", "--url", owner]):
            assert subprocess.run([*cli, *step], cwd=ROOT, capture_output=True, timeout=120).returncode == 0
        done = migrate("--to", owner, "--from", str(data_dir / "memory.sqlite3"), "--author", "fran")
        assert done.returncode == 0, done.stderr
        records = sum(1 for line in rows_of(export) if line["table"] == "records")
        head = max(line["row"]["seq"] for line in rows_of(export) if line["table"] == "records")
        assert json.loads(done.stdout)["head_seq"] == head
        with psycopg.connect(postgres_cluster.url(database, user="fran")) as conn:
            assert conn.execute("SELECT count(*) FROM records").fetchone()[0] == records
        with psycopg.connect(owner) as conn:
            assert conn.execute("SELECT count(*) FROM records").fetchone()[0] == 0
    finally:
        postgres_cluster.drop_database(database)


def _keyword_reads(db) -> tuple[int, dict[str, list[str]]]:
    """Records with keyword terms, and the texts keyword search finds for a few words of the source
    (sorted: the backends order equal scores differently)."""
    from memory_anchor.worker.store.keywords import ColumnWeights, KeywordQuery, keyword_index

    conn = db.reader()
    index = keyword_index(conn)
    found = {}
    for word in ("build", "redis", "snapshot", "漢字", "staging"):
        hits = index.search(conn, KeywordQuery([word]), "r.op = 'put'", [], 20, ColumnWeights(1.0, 0.5))
        texts = {r["seq"]: r["text"] for r in Records.by_seqs(conn, [seq for seq, _ in hits]).values()}
        found[word] = sorted(texts[seq] for seq, _ in hits)
    assert found["build"] and found["staging"]
    return index.doc_count(conn), found
