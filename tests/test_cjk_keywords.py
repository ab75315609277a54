"""Keyword search in scripts written without spaces: two-character words inside a sentence match.

Real SQLite files and real PostgreSQL (`store_db`), the real migrations and
SearchService in keyword mode (no embedding model involved, so what is found
here is found by the index alone).
"""

from __future__ import annotations

import pytest

from memory_anchor.worker.store import branches
from memory_anchor.worker.index.search import SearchService
from memory_anchor.worker.memory.common import fts_query
from memory_anchor.worker.store import migrations
from memory_anchor.worker.store.cjk import grams, index_words, query_words
from memory_anchor.worker.store.db import Database
from memory_anchor.worker.store.records import Records, resolve_view


def put(db: Database, text: str, **values) -> dict:
    values.setdefault("user_id", "alice")
    with db.transaction() as conn:
        return Records.put(conn, values.pop("kind", "memory"), text, **values)


def keyword_search(db: Database, query: str, branch: str = "main") -> list[str]:
    service = SearchService(db, None, None)
    view = resolve_view(db.reader(), branch)
    hits = service.search(query, view, filters={"user_id": "alice"}, mode="keyword", fallback=False)
    return [h["text"] for h in hits]


def fts_integrity(db) -> None:
    """SQLite's own check of its two keyword indexes (PostgreSQL's terms are checked by
    tests/test_keyword_terms.py)."""
    if not isinstance(db, Database):
        return
    with db.transaction() as conn:
        conn.execute("INSERT INTO records_fts(records_fts, rank) VALUES ('integrity-check', 1)")
        conn.execute("INSERT INTO records_thread_fts(records_thread_fts, rank) VALUES ('integrity-check', 1)")


def test_cjk_runs_become_bigrams_and_characters_latin_text_is_unchanged():
    assert grams("电话号") == ["电话", "话号", "电", "话", "号"]
    assert index_words("女儿的电话 is 138") == " 女儿 儿的 的电 电话 女 儿 的 电 话  is 138"
    assert index_words("Müller fährt nach Köln") == "Müller fährt nach Köln"
    # Query words: question particles dropped, Latin words as before.
    assert query_words("吃什么药") == ["吃什", "么药", "吃", "药"]
    assert query_words("회의는 언제") == ["회의", "의는", "회", "언제", "언", "제"]
    assert fts_query("女儿电话") == '"女儿" OR "儿电" OR "电话" OR "女" OR "儿" OR "电" OR "话"'


@pytest.mark.parametrize(
    "query, expected, other",
    [
        ("女儿电话", "女儿王小红的电话是13800138000", "今天中午吃了饺子，味道不错"),
        ("降压药", "每天早上八点吃一片降压药", "下午在公园散步了一个小时"),
        ("会議の時間", "明日の会議は午前十時から始まります", "昨日は雨だったので家にいました"),
        ("회의 시간", "내일 회의는 오전 열 시에 시작합니다", "어제는 비가 와서 집에 있었어요"),
        ("Bürgermeister", "Der Bürgermeister hat die Straße eröffnet", "Wir haben Kuchen gegessen"),
        ("burgermeister strasse", "Der Bürgermeister hat die Straße eröffnet", "Wir haben Kuchen gegessen"),
        ("canción", "Mañana cantaremos la canción del año", "El perro duerme en el jardín"),
    ],
)
def test_a_word_inside_a_sentence_is_found(store_db, query, expected, other):
    put(store_db, other)
    put(store_db, expected)
    assert keyword_search(store_db, query)[:1] == [expected]
    fts_integrity(store_db)


def test_thread_context_carries_cjk_words_to_the_next_turn(tmp_path):
    db = Database(tmp_path / "memory.sqlite3")
    put(db, "用户：下周去北京出差吗？", session_id="s1")
    answer = put(db, "助手：是的，周三出发", session_id="s1")
    put(db, "完全无关的一句话", session_id="s2")
    context = db.reader().execute(
        "SELECT context FROM records_thread_fts WHERE rowid = ?", (answer["seq"],)
    ).fetchone()[0]
    assert "北京" in context.split() and "出差" in context.split()
    assert answer["text"] in keyword_search(db, "北京出差")
    fts_integrity(db)
    db.close()


def test_existing_memories_are_reindexed_by_the_migration(tmp_path, monkeypatch):
    """A database from before 0005_cjk_keywords: its Chinese memories become findable, nothing else changes."""
    path = tmp_path / "memory.sqlite3"
    before = [m for m in migrations.CORE if m[0] != "0005_cjk_keywords"]
    monkeypatch.setattr(migrations, "CORE", before)
    old = Database(path)
    chinese = put(old, "女儿王小红的电话是13800138000", title="联系人")
    english = put(old, "The deploy script lives in ops/deploy.sh")
    assert keyword_search(old, "电话") == []  # one token per run: the word inside cannot match
    old.close()

    monkeypatch.undo()
    db = Database(path)
    # (each also reaches the other as its thread neighbour's words, ranked below)
    assert keyword_search(db, "电话")[:1] == [chinese["text"]]
    assert keyword_search(db, "联系")[:1] == [chinese["text"]]  # the title too
    assert keyword_search(db, "deploy script")[:1] == [english["text"]]
    fts_integrity(db)
    db.close()


def test_deleting_a_branch_removes_its_cjk_rows_from_the_index(store_db):
    db = store_db
    with db.transaction() as conn:
        branches.create_branch(conn, "trial", parent="main")
    put(db, "试验分支上的缓存方案", branch="trial")
    assert keyword_search(db, "缓存", branch="trial")
    with db.transaction() as conn:
        branches.delete_branch(conn, "trial")
    fts_integrity(db)
    with db.transaction() as conn:  # made again: nothing of the old one shows
        branches.create_branch(conn, "trial", parent="main")
    assert keyword_search(db, "缓存", branch="trial") == []
    if isinstance(db, Database):
        assert db.reader().execute("SELECT count(*) FROM records_fts WHERE records_fts MATCH '\"缓存\"'").fetchone()[0] == 0
    else:  # the terms and their document count went with the rows
        assert db.reader().execute("SELECT count(*) FROM record_terms").fetchone()[0] == 0
        assert db.reader().execute("SELECT coalesce(sum(docs), 0) FROM term_stats WHERE term = '缓存'").fetchone()[0] == 0
