"""The thread-context keyword index (`records_thread_fts`, migration 0003) and how search uses it."""

from __future__ import annotations

import time

import pytest

from memory_anchor.core import paths
from memory_anchor.worker.store.branches import delete_branch
from memory_anchor.worker.index.search import SearchService
from memory_anchor.worker.store.db import Database
from memory_anchor.worker.store.migrations import apply_migrations
from memory_anchor.worker.store.records import Records, resolve_view


@pytest.fixture
def db(tmp_path):
    database = Database(paths.database_path(tmp_path))
    yield database
    database.close()


def put(db, text, **values):
    values.setdefault("user_id", "alice")
    with db.transaction() as conn:
        return Records.put(conn, values.pop("kind", "memory"), text, **values)


def context_words(db, record) -> list[str]:
    row = db.reader().execute("SELECT context FROM records_thread_fts WHERE rowid = ?", (record["seq"],)).fetchone()
    return sorted(row[0].split()) if row else None


def test_each_record_carries_two_neighbours_on_each_side(db):
    turns = [put(db, f"turn{n}") for n in range(5)]
    assert context_words(db, turns[0]) == ["turn1", "turn2"]
    assert context_words(db, turns[2]) == ["turn0", "turn1", "turn3", "turn4"]
    assert context_words(db, turns[4]) == ["turn2", "turn3"]


def test_threads_are_per_session_else_user_and_per_kind(db):
    a1 = put(db, "alpha", session_id="s1")
    put(db, "noise", session_id="s2")
    put(db, "obs", session_id="s1", kind="observation")
    a2 = put(db, "beta", session_id="s1")
    u1 = put(db, "gamma", user_id="bob")
    put(db, "delta", user_id="carol")
    u2 = put(db, "epsilon", user_id="bob")
    assert context_words(db, a1) == ["beta"]
    assert context_words(db, a2) == ["alpha"]
    assert context_words(db, u1) == ["epsilon"]
    assert context_words(db, u2) == ["gamma"]


def test_a_new_version_keeps_its_context_and_does_not_extend_the_thread(db):
    first = put(db, "one")
    second = put(db, "two")
    with db.transaction() as conn:
        revised = Records.update(conn, first["id"], text="uno")
    assert context_words(db, revised) == ["two"]
    assert context_words(db, second) == ["one"]  # "uno" is not a new neighbour


def test_branches_do_not_share_context_and_deleting_one_drops_its_rows(db):
    main_turn = put(db, "mainword")
    with db.transaction() as conn:
        conn.execute(
            "INSERT INTO branches(name, parent, fork_seq, created_at) VALUES ('exp', 'main', ?, ?)",
            (Records.head_seq(conn), time.time()),
        )
    branch_turn = put(db, "branchword", branch="exp")
    assert context_words(db, main_turn) == []
    assert context_words(db, branch_turn) == []
    with db.transaction() as conn:
        delete_branch(conn, "exp")
    assert context_words(db, branch_turn) is None
    hits = db.reader().execute("SELECT rowid FROM records_thread_fts WHERE records_thread_fts MATCH 'branchword'")
    assert hits.fetchall() == []


def test_existing_records_get_the_same_context_when_the_migration_runs(db):
    turns = [put(db, f"word{n}", user_id="u" if n % 3 else "v") for n in range(7)]
    with db.transaction() as conn:
        revised = Records.update(conn, turns[1]["id"], text="revised")
    expected = {r["seq"]: context_words(db, r) for r in [*turns, revised]}
    with db.transaction() as conn:
        for statement in ("DROP TRIGGER records_thread_fts_insert", "DROP TRIGGER records_thread_fts_delete",
                          "DROP TABLE records_thread_fts"):  # fmt: skip
            conn.execute(statement)
        conn.execute("DELETE FROM schema_migrations WHERE name = '0003_thread_context_fts'")
        assert apply_migrations(conn) == ["0003_thread_context_fts"]
    assert {seq: context_words(db, {"seq": seq}) for seq in expected} == expected


def test_keyword_search_finds_the_answer_next_to_the_question_words(store_db):
    """The answer turn shares no word with the question but its speaker; its neighbour shares the rest."""
    db = store_db
    put(db, "Alice: What did you bake for the school fundraiser?")
    answer = put(db, "Bob: Lemon bars, they sold out in an hour.")
    for n in range(6):
        put(db, f"Alice: Unrelated chat number {n} about the weather and trains.")
    service = SearchService(db, None, None)
    view = resolve_view(db.reader(), "main")
    hits = service.search("what did Bob bake for the fundraiser?", view, filters={"user_id": "alice"},
                          mode="keyword", top_k=3, fallback=False)  # fmt: skip
    assert answer["id"] in [h["id"] for h in hits]
    assert any(h["text"].startswith("Alice: What did you bake") for h in hits)
    if isinstance(db, Database):
        # Own words still outrank context. On PostgreSQL the question turn's context lacks
        # the answer's words (context there is the records before only), so the answer,
        # with "Bob" of its own and the question's words as context, may lead.
        assert hits[0]["text"].startswith("Alice: What did you bake")


def test_common_words_are_matched_in_own_text_only(db, monkeypatch):
    """At scale a word's context matches cost ~5x its own: common words skip the context column."""
    service = SearchService(db, None, None)
    freq = {"deploy": 100, "customer": 900, "the": 50_000}
    monkeypatch.setattr(service, "_total_docs", lambda conn: 100_000)
    monkeypatch.setattr(service, "_doc_freq", lambda conn, word: freq.get(word, 0))
    match = service.keyword_query(db.reader(), "the customer deploy")
    assert match == '"deploy" OR {text title} : ("customer")'
    db.reader().execute("SELECT rowid FROM records_thread_fts WHERE records_thread_fts MATCH ?", (match,)).fetchall()
