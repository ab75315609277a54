"""One store, two backends: the versioned records behave the same on SQLite and PostgreSQL.

Every test here runs twice, on a real SQLite file and on a real PostgreSQL
database (tests/postgres.py) reached as a developer's own role, so row-level
security is in force while the store works.
"""

from __future__ import annotations

import threading
import time

import psycopg
import pytest

from memory_anchor.worker.store import branches as registry
from memory_anchor.worker.store import snapshots
from memory_anchor.worker.store import filters
from memory_anchor.worker.store.dialect import dialect_of
from memory_anchor.worker.store.postgres.database import PostgresDatabase
from memory_anchor.worker.store.records import NotFound, Records, resolve_view
from tests.postgres import init_team_database, member_url


@pytest.fixture
def db(store_db):
    return store_db


def put(db, text, *, kind="fact", branch="main", **values):
    with db.transaction() as conn:
        return Records.put(conn, kind, text, branch=branch, project=values.pop("project", "p"), **values)


def update(db, record_id, *, branch="main", **changes):
    with db.transaction() as conn:
        return Records.update(conn, record_id, branch=branch, **changes)


def delete(db, record_id, *, branch="main"):
    with db.transaction() as conn:
        return Records.delete(conn, record_id, branch=branch)


def get(db, record_id, *, branch="main", as_of=None):
    conn = db.reader()
    return Records.get(conn, record_id, resolve_view(conn, branch, as_of))


def texts(db, *, branch="main", as_of=None, **query):
    conn = db.reader()
    rows, _ = Records.query(conn, resolve_view(conn, branch, as_of), order="seq ASC", **query)
    return [r["text"] for r in rows]


def where(db, mem0_filter):
    """A mem0 filter compiled for this backend, as Records.query's extra condition."""
    conn = db.reader()
    sql, params = filters.parse(mem0_filter).sql("r", dialect_of(conn))
    return {"extra_where": sql, "extra_params": params}


# --- versions -----------------------------------------------------------------------------


def test_put_stores_a_first_version_that_get_reads_back(db):
    written = put(db, "the build uses make", user_id="u1", metadata={"topic": "build"}, confidence=0.95)
    read = get(db, written["id"])
    assert read == written
    assert (read["version"], read["op"], read["kind"], read["text"]) == (1, "put", "fact", "the build uses make")
    assert read["metadata"] == {"topic": "build"} and read["data"] == {} and read["confidence"] == 0.95
    assert read["seq"] >= 1 and read["created_at"] > 0 and read["happened_at"] == read["created_at"]


def test_update_writes_a_new_version_carrying_unchanged_columns(db):
    first = put(db, "tabs", user_id="u1", metadata={"topic": "style"})
    second = update(db, first["id"], text="spaces")
    assert (second["id"], second["version"]) == (first["id"], 2)
    assert second["seq"] > first["seq"] and second["user_id"] == "u1" and second["metadata"] == {"topic": "style"}
    assert get(db, first["id"])["text"] == "spaces"


def test_delete_writes_a_tombstone_and_history_keeps_every_version_oldest_first(db):
    first = put(db, "v1")
    update(db, first["id"], text="v2")
    tomb = delete(db, first["id"])
    assert tomb["op"] == "delete" and tomb["version"] == 3
    assert get(db, first["id"]) is None
    conn = db.reader()
    history = Records.history(conn, first["id"], resolve_view(conn))
    assert [(h["version"], h["op"], h["text"]) for h in history] == [(1, "put", "v1"), (2, "put", "v2"), (3, "delete", "")]
    with pytest.raises(NotFound):
        update(db, first["id"], text="too late")


def test_seqs_only_grow_and_by_seqs_finds_each_version(db):
    a, b = put(db, "a"), put(db, "b")
    assert b["seq"] > a["seq"]
    with db.transaction() as conn:
        assert Records.head_seq(conn) == b["seq"]
    found = Records.by_seqs(db.reader(), [a["seq"], b["seq"], 10**9])
    assert {seq: r["text"] for seq, r in found.items()} == {a["seq"]: "a", b["seq"]: "b"}


def test_visible_seqs_are_the_live_heads_only(db):
    kept = put(db, "kept")
    old = put(db, "old")
    new = update(db, old["id"], text="new")
    gone = put(db, "gone")
    delete(db, gone["id"])
    conn = db.reader()
    seqs = [kept["seq"], old["seq"], new["seq"], gone["seq"]]
    assert Records.visible_seqs(conn, seqs, resolve_view(conn)) == {kept["seq"], new["seq"]}


# --- queries ------------------------------------------------------------------------------


def test_query_filters_on_columns_counts_and_pages(db):
    for n in range(5):
        put(db, f"fact {n}", user_id="alice" if n % 2 == 0 else "bob", project="p" if n < 4 else "q")
    put(db, "an observation", kind="observation", user_id="alice")
    conn = db.reader()
    view = resolve_view(conn)
    rows, total = Records.query(conn, view, filters={"kind": "fact", "user_id": "alice", "project": "p"})
    assert total == 2 and [r["text"] for r in rows] == ["fact 2", "fact 0"]
    rows, total = Records.query(conn, view, filters={"user_id": ["alice", "bob"]}, order="seq ASC", limit=2, offset=1)
    assert total == 6 and [r["text"] for r in rows] == ["fact 1", "fact 2"]
    assert Records.query(conn, view, filters={"user_id": []}) == ([], 0)


def test_query_tests_changing_columns_on_the_head_only(db):
    record = put(db, "pending fact", status="pending")
    update(db, record["id"], status="active", text="approved fact")
    assert texts(db, statuses=("pending",)) == []
    assert texts(db, statuses=("active",)) == ["approved fact"]


def test_mem0_filters_on_metadata_columns_and_times(db):
    put(db, "perf work", user_id="alice", metadata={"topic": "perf", "priority": 3, "tags": ["db", "Speed"]})
    put(db, "db work", user_id="bob", metadata={"topic": "db", "priority": 10, "note": "Use an INDEX"})
    put(db, "legacy work", user_id="carol", metadata={"app_id": "legacy", "priority": "high"})
    assert texts(db, **where(db, {"topic": "perf"})) == ["perf work"]
    assert texts(db, **where(db, {"topic": {"in": ["perf", "db"]}})) == ["perf work", "db work"]
    assert texts(db, **where(db, {"priority": {"gte": 3}})) == ["perf work", "db work"]  # "high" is no number
    assert texts(db, **where(db, {"priority": {"gt": 3, "lt": 100}})) == ["db work"]
    assert texts(db, **where(db, {"tags": {"contains": "db"}})) == ["perf work"]
    assert texts(db, **where(db, {"tags": {"icontains": "speed"}})) == ["perf work"]
    assert texts(db, **where(db, {"note": {"icontains": "index"}})) == ["db work"]
    assert texts(db, **where(db, {"NOT": [{"app_id": "legacy"}]})) == ["perf work", "db work"]
    assert texts(db, **where(db, {"app_id": "*"})) == ["legacy work"]
    assert texts(db, **where(db, {"topic": {"ne": "perf"}})) == ["db work", "legacy work"]
    assert texts(db, **where(db, {"OR": [{"user_id": "carol"}, {"memory": {"contains": "perf"}}]})) == [
        "perf work", "legacy work",
    ]  # fmt: skip
    assert texts(db, **where(db, {"user_id": {"nin": ["alice", "bob"]}})) == ["legacy work"]
    assert texts(db, **where(db, {"created_at": {"gte": "2000-01-01"}, "happened_at": {"lt": "9999-01-01"}})) == [
        "perf work", "db work", "legacy work",
    ]  # fmt: skip
    assert texts(db, **where(db, {"created_at": {"lt": "2000-01-01"}})) == []
    assert texts(db, **where(db, {"user_id": {"icontains": "AL"}})) == ["perf work"]
    assert texts(db, **where(db, {"memory": {"icontains": "DB W"}})) == ["db work"]
    assert texts(db, **where(db, {"topic": None})) == ["legacy work"]
    assert texts(db, **where(db, {"priority": {"nin": [3, 10]}})) == ["legacy work"]
    assert texts(db, **where(db, {"priority": {"lt": "z"}})) == ["legacy work"]  # strings with strings
    assert texts(db, **where(db, {"kind": {"ne": "fact"}})) == []
    assert texts(db, **where(db, {"user_id": {"gt": "b"}})) == ["db work", "legacy work"]
    assert texts(db, **where(db, {"metadata": {"topic": "db", "priority": 10}})) == ["db work"]


def test_latest_walks_newest_first_and_skips_superseded_versions(db):
    a = put(db, "a")
    put(db, "b")
    update(db, a["id"], text="a2")
    conn = db.reader()
    assert [r["text"] for r in Records.latest(conn, resolve_view(conn), limit=2, batch=1)] == ["a2", "b"]


# --- branches and time travel ----------------------------------------------------------


def test_a_branch_sees_its_parent_up_to_the_fork_and_its_own_writes(db):
    shared = put(db, "before the fork")
    with db.transaction() as conn:
        registry.create_branch(conn, "experiment")
    after = put(db, "main after the fork")
    own = put(db, "only on the experiment", branch="experiment")
    update(db, shared["id"], branch="experiment", text="changed on the experiment")

    assert texts(db, branch="experiment") == ["only on the experiment", "changed on the experiment"]
    assert texts(db) == ["before the fork", "main after the fork"]
    assert get(db, own["id"]) is None and get(db, after["id"], branch="experiment") is None
    with db.transaction() as conn:
        registry.create_branch(conn, "experiment/deeper", parent="experiment")
    assert texts(db, branch="experiment/deeper") == ["only on the experiment", "changed on the experiment"]


def test_a_branch_forked_in_the_past_sees_the_parent_as_it_was(db):
    first = put(db, "first")
    put(db, "second")
    with db.transaction() as conn:
        registry.create_branch(conn, "back-then", as_of=first["seq"])
    assert texts(db, branch="back-then") == ["first"]


def test_as_of_a_seq_a_snapshot_or_a_timestamp(db):
    first = put(db, "first")
    with db.transaction() as conn:
        snapshots.create_snapshot(conn, "after-first")
    time.sleep(0.01)
    second = update(db, first["id"], text="second")
    put(db, "third")

    assert texts(db, as_of=first["seq"]) == ["first"]
    assert texts(db, as_of=str(first["seq"])) == ["first"]
    assert texts(db, as_of="after-first") == ["first"]
    assert texts(db, as_of=second["created_at"]) == ["second"]
    assert texts(db, as_of=second["created_at"] - 0.005) == ["first"]
    assert get(db, first["id"], as_of="after-first")["text"] == "first"
    assert texts(db) == ["second", "third"]
    with pytest.raises(NotFound):
        texts(db, as_of="no-such-snapshot")


def test_every_row_of_one_transaction_shares_its_time(db):
    with db.transaction() as conn:
        a = Records.put(conn, "fact", "a")
        time.sleep(0.01)
        b = Records.put(conn, "fact", "b")
    assert a["created_at"] == b["created_at"]


def test_a_failed_transaction_leaves_nothing(db):
    with pytest.raises(RuntimeError), db.transaction() as conn:
        Records.put(conn, "fact", "never committed")
        raise RuntimeError("stop")
    assert texts(db) == []


# --- PostgreSQL only: the write order ------------------------------------------------------


@pytest.fixture
def team(postgres_cluster):
    database = init_team_database(postgres_cluster)
    yield postgres_cluster, database
    postgres_cluster.drop_database(database)


def test_a_write_waits_for_the_open_one_so_seqs_follow_commit_order(team):
    """A follower reading "everything after seq N" must never miss a row: a transaction that
    took a lower seq cannot commit after one that took a higher seq."""
    cluster, database = team
    db = PostgresDatabase(member_url(cluster, database, "dev"))
    other_client = psycopg.connect(member_url(cluster, database, "dev2"), autocommit=True)
    finished: dict[str, int] = {}

    def raw_insert():
        # A client that knows nothing of the store: the records trigger takes the lock for it.
        finished["raw"] = other_client.execute(
            "INSERT INTO records(id, version, kind, happened_at, created_at) VALUES ('raw', 1, 'fact', 0, 0) RETURNING seq"
        ).fetchone()[0]

    try:
        with db.transaction() as conn:
            held = Records.put(conn, "fact", "written first, committed after a pause")
            racer = threading.Thread(target=raw_insert)
            racer.start()
            racer.join(0.5)
            assert racer.is_alive(), "the other write did not wait for the open transaction"
        racer.join(10)
        assert finished["raw"] > held["seq"]
    finally:
        other_client.close()
        db.close()


def test_a_database_without_the_schema_is_refused_with_what_to_run(postgres_cluster, postgres_url):
    from memory_anchor.worker.store.postgres.connect import StorageError

    with pytest.raises(StorageError, match="storage init"):
        PostgresDatabase(postgres_url)


def test_an_unreachable_server_is_told_at_once(postgres_cluster):
    from tests.postgres import free_port
    from memory_anchor.worker.store.postgres.connect import StorageError

    started = time.monotonic()
    with pytest.raises(StorageError, match="cannot connect to PostgreSQL at"):
        PostgresDatabase(f"postgresql://dev@127.0.0.1:{free_port()}/team")
    assert time.monotonic() - started < 5
