"""Both backends index the same keyword terms for the same text (worker/store/terms.py).

SQLite's terms are read back from its own index (fts5vocab over records_fts);
PostgreSQL's from record_terms. Keyword recall follows the terms, so BM25 on
PostgreSQL ranks like FTS5 only while these agree.
"""

from __future__ import annotations

import pytest

from worker.store.dialect import SQLITE, dialect_of
from worker.store.records import Records
from worker.store.terms import stem, tokens, tsvector_literal

TEXTS = {
    "english": "Meetings were running late; the café's décor impressed Ada's teammates.",
    "chinese": "女儿王小红的电话是13800138000",
    "japanese": "明日の会議は東京で行います",
    "korean": "회의는 내일 서울에서 합니다",
    "mixed": "Deploy 部署 the cache キャッシュ 캐시 today",
}


def indexed_terms(conn, seq: int) -> list[tuple[str, int]]:
    """(term, count) pairs the backend's index holds for record `seq`'s text column."""
    if dialect_of(conn) == SQLITE:
        conn.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.terms_check USING fts5vocab(main, records_fts, instance)")
        rows = conn.execute(
            "SELECT term, count(*) AS n FROM temp.terms_check WHERE doc = ? AND col = 'text' GROUP BY term", (seq,)
        ).fetchall()
    else:
        rows = conn.execute(
            "SELECT lexeme AS term, count(*) AS n FROM record_terms, unnest(terms) AS u(lexeme, positions, weights),"
            " unnest(u.weights) AS w WHERE seq = ? AND w = 'D' GROUP BY lexeme",
            (seq,),
        ).fetchall()
    return sorted((r["term"], int(r["n"])) for r in rows)


@pytest.mark.parametrize("language", sorted(TEXTS))
def test_each_backend_indexes_the_terms_of_the_shared_function(store_db, language):
    text = TEXTS[language]
    with store_db.transaction() as conn:
        seq = Records.put(conn, "memory", text, user_id="alice", title="Note")["seq"]
    expected = sorted({t: tokens(text).count(t) for t in tokens(text)}.items())
    assert expected  # the text has terms at all
    with store_db.transaction() as conn:
        assert indexed_terms(conn, seq) == expected


def test_terms_are_porter_stems_cjk_grams_and_folded_diacritics():
    assert tokens("Meetings running café") == ["meet", "run", "cafe"]
    assert tokens("电话号") == ["电话", "话号", "电", "话", "号"]
    assert stem("Meetings") == "meet"
    assert tokens("") == [] and tokens(None) == []


def test_tsvector_literal_labels_columns_and_counts_every_token():
    literal, length = tsvector_literal([(["run", "it", "run"], "D"), (["o'neil"], "C")])
    assert literal == "'run':1,3 'it':2 'o''neil':4C"
    assert length == 4


CORPUS = [
    "The deploy failed because the database migration timed out.",
    "Deploy notes: run the migration before the deploy, never after.",
    "Lunch near the office: ramen, tacos and a salad bar.",
    "明日の会議でデプロイの手順を決めます",
    "The migration guide lives in docs/migrations.md and covers rollbacks.",
    "Rollbacks of a failed deploy take ten minutes.",
]


def test_bm25_in_postgresql_scores_like_fts5(tmp_path, postgres_cluster):
    """Same terms, same formula, same constants: the same ranking and the same scores."""
    from tests.postgres import init_team_database, member_url
    from worker.index.keywords import ColumnWeights, KeywordQuery, keyword_index
    from worker.store.db import Database
    from worker.store.postgres.database import PostgresDatabase

    name = init_team_database(postgres_cluster)
    backends = [Database(tmp_path / "m.sqlite3"), PostgresDatabase(member_url(postgres_cluster, name, "dev"))]
    try:
        results = []
        for db in backends:
            with db.transaction() as conn:
                for n, text in enumerate(CORPUS):
                    Records.put(conn, "fact", text, user_id="team", title="Deploy" if n == 4 else None)
            conn = db.reader()
            query = KeywordQuery(["deploy", "migration", "rollbacks", "会議"])
            results.append(keyword_index(conn).search(conn, query, "r.op = 'put'", [], 10, ColumnWeights(1.0, 0.5)))
        sqlite_hits, postgres_hits = results
        assert len(sqlite_hits) == 6 - 1  # the lunch note matches nothing
        assert [seq for seq, _ in postgres_hits] == [seq for seq, _ in sqlite_hits]
        for (_, ours), (_, theirs) in zip(postgres_hits, sqlite_hits):
            assert ours == pytest.approx(theirs, rel=1e-6)
    finally:
        for db in backends:
            db.close()
        postgres_cluster.drop_database(name)


def test_term_statistics_count_only_what_the_reader_may_see(postgres_cluster):
    """A private row's words show nowhere for another member, not even as a document count."""
    from tests.postgres import init_team_database, member_url
    from worker.index.keywords import ColumnWeights, KeywordQuery, keyword_index
    from worker.store.postgres.database import PostgresDatabase

    name = init_team_database(postgres_cluster)
    alice = PostgresDatabase(member_url(postgres_cluster, name, "alice"))
    bob = PostgresDatabase(member_url(postgres_cluster, name, "bob"))
    try:
        with alice.transaction() as conn:
            Records.put(conn, "prompt", "book the zanzibar trip for my anniversary", user_id="alice")
            Records.put(conn, "fact", "The team offsite is in Lisbon.", user_id="alice")
        index = keyword_index(alice.reader())
        assert index.doc_freq(alice.reader(), "zanzibar") == 1 and index.doc_count(alice.reader()) == 2
        assert index.doc_freq(bob.reader(), "zanzibar") == 0 and index.doc_count(bob.reader()) == 1
        assert bob.reader().execute("SELECT count(*) FROM record_terms").fetchone()[0] == 1
        # Search's way in to the GIN index keeps to the same rule.
        matching = "SELECT count(*) FROM record_terms_matching('zanzibar | lisbon'::tsquery)"
        assert bob.reader().execute(matching).fetchone()[0] == 1
        assert alice.reader().execute(matching).fetchone()[0] == 2
        found = index.search(bob.reader(), KeywordQuery(["zanzibar", "lisbon"]), "r.op = 'put'", [], 10, ColumnWeights())
        assert len(found) == 1
        with bob.transaction() as conn:  # nor can bob write terms for alice's rows
            seq = conn.execute("SELECT max(seq) FROM records").fetchone()[0]
        with pytest.raises(Exception, match="row-level security"):
            with bob.transaction() as conn:
                conn.execute("INSERT INTO record_terms(seq, terms, length, private) VALUES (?, 'x', 1, false)", (seq,))
    finally:
        alice.close()
        bob.close()
        postgres_cluster.drop_database(name)


def test_postgresql_thread_context_is_the_two_records_before_and_never_a_private_one(postgres_cluster):
    from tests.postgres import init_team_database, member_url
    from worker.store.postgres.database import PostgresDatabase

    name = init_team_database(postgres_cluster)
    alice = PostgresDatabase(member_url(postgres_cluster, name, "alice"))
    try:
        with alice.transaction() as conn:
            put = lambda text, kind="fact", **v: Records.put(conn, kind, text, session_id="s1", **v)["seq"]  # noqa: E731
            put("apples")
            put("secret bananas", metadata={"private": True})
            put("cherries")
            put("dates")
            put("other kind", kind="decision")
            last = put("elderberries")

        def context(seq):
            rows = alice.reader().execute(
                "SELECT lexeme FROM record_terms, unnest(terms) AS u(lexeme, positions, weights)"
                " WHERE seq = ? AND 'B' = ANY(weights) ORDER BY lexeme",
                (seq,),
            ).fetchall()
            return [r["lexeme"] for r in rows]

        # The two before it in its thread and kind; the private one is skipped for a shared record.
        assert context(last) == ["cherri", "date"]
        assert context(last - 3) == ["appl"]  # "cherries": "secret bananas" is private
    finally:
        alice.close()
        postgres_cluster.drop_database(name)
