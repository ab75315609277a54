"""Both backends index the same keyword terms for the same text (memory_anchor/worker/store/terms.py).

SQLite's terms are read back from its own index (fts5vocab over records_fts);
PostgreSQL's from record_terms. Keyword recall follows the terms, so BM25 on
PostgreSQL ranks like FTS5 only while these agree.
"""

from __future__ import annotations

import pytest

from memory_anchor.worker.store.dialect import SQLITE, dialect_of
from memory_anchor.worker.store.records import Records
from memory_anchor.worker.store.terms import stem, tokens, tsvector_literal

TEXTS = {
    "english": "Meetings were running late; the café's décor impressed Ada's teammates.",
    "chinese": "女儿王小红的电话是13800138000",
    "japanese": "明日の会議は東京で行います",
    "korean": "회의는 내일 서울에서 합니다",
    "mixed": "Deploy 部署 the cache キャッシュ 캐시 today",
}


@pytest.fixture
def members(postgres_cluster):
    """The store as members of one fresh team database: `alice, bob = members("alice", "bob")`."""
    from tests.postgres import init_team_database, member_url
    from memory_anchor.worker.store.postgres.database import PostgresDatabase

    name = init_team_database(postgres_cluster)
    opened = []

    def open_as(*roles: str):
        stores = [PostgresDatabase(member_url(postgres_cluster, name, role)) for role in roles]
        opened.extend(stores)
        return stores

    yield open_as
    for store in opened:
        store.close()
    postgres_cluster.drop_database(name)


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
    from memory_anchor.worker.store.keywords import ColumnWeights, KeywordQuery, keyword_index
    from memory_anchor.worker.store.db import Database
    from memory_anchor.worker.store.postgres.database import PostgresDatabase

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


def test_term_statistics_count_only_what_the_reader_may_see(members):
    """A private row's words show nowhere for another member, not even as a document count."""
    from memory_anchor.worker.store.keywords import ColumnWeights, KeywordQuery, keyword_index

    alice, bob = members("alice", "bob")
    with alice.transaction() as conn:
        Records.put(conn, "prompt", "book the zanzibar trip for my anniversary", user_id="alice")
        Records.put(conn, "fact", "The team offsite is in Lisbon.", user_id="alice")
    index = keyword_index(alice.reader())
    assert index.doc_freq(alice.reader(), "zanzibar") == 1 and index.doc_count(alice.reader()) == 2
    assert index.doc_freq(bob.reader(), "zanzibar") == 0 and index.doc_count(bob.reader()) == 1
    assert bob.reader().execute("SELECT count(*) FROM record_terms").fetchone()[0] == 1
    # The postings search reads keep to the same rule.
    postings = "SELECT count(*) FROM record_postings WHERE term IN ('zanzibar', 'lisbon')"
    assert bob.reader().execute(postings).fetchone()[0] == 1
    assert alice.reader().execute(postings).fetchone()[0] == 2
    found = index.search(bob.reader(), KeywordQuery(["zanzibar", "lisbon"]), "r.op = 'put'", [], 10, ColumnWeights())
    assert len(found) == 1
    with bob.transaction() as conn:  # nor can bob write terms for alice's rows
        seq = conn.execute("SELECT max(seq) FROM records").fetchone()[0]
    with pytest.raises(Exception, match="row-level security"):
        with bob.transaction() as conn:
            conn.execute("INSERT INTO record_terms(seq, terms, length, private) VALUES (?, 'x', 1, false)", (seq,))


def test_postgresql_thread_context_is_the_two_records_before_and_never_a_private_one(members):
    (alice,) = members("alice")
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


def postings_of(conn, seq: int) -> dict[str, tuple]:
    rows = conn.execute(
        "SELECT term, own, text_tf, title_tf, context_tf, opens, length FROM record_postings WHERE seq = ?", (seq,)
    ).fetchall()
    return {r["term"]: tuple(r)[1:] for r in rows}


def test_postings_hold_each_terms_frequency_per_column_and_leave_with_their_branch(members):
    """record_postings, which BM25 reads on PostgreSQL, are derived from the term vector the worker
    writes: one row per term with its count in text, title and thread context; a deleted branch
    takes them and their statistics with its records."""
    from memory_anchor.worker.store import branches

    (alice,) = members("alice")
    with alice.transaction() as conn:
        Records.put(conn, "memory", "deploy notes on main", session_id="s1")
        branches.create_branch(conn, "exp", actor="alice")
        Records.put(conn, "memory", "Deploy the deploy script", session_id="s1", branch="exp")
        seq = Records.put(conn, "memory", "Ada: deploy again", title="Deploy", session_id="s1", branch="exp")["seq"]
    conn = alice.reader()
    length = 4  # its own tokens: "ada deploy again" and the title's "deploy"
    assert postings_of(conn, seq) == {
        "ada": (True, 1, 0, 0, True, length),
        "deploi": (True, 1, 1, 2, False, length),  # the context: the record before it on its branch
        "again": (True, 1, 0, 0, False, length),
        "script": (False, 0, 0, 1, False, length),
        "the": (False, 0, 0, 1, False, length),
    }
    docs = "SELECT sum(docs) FROM term_stats WHERE term = 'deploi'"
    assert conn.execute(docs).fetchone()[0] == 3
    with alice.transaction() as conn:
        branches.delete_branch(conn, "exp")
    conn = alice.reader()
    assert conn.execute("SELECT count(*) FROM record_postings WHERE seq > ?", (seq - 2,)).fetchone()[0] == 0
    assert conn.execute(docs).fetchone()[0] == 1


def test_a_word_matched_in_own_words_only_counts_no_hit_in_the_thread_context(members):
    """As FTS5 counts a column-filtered phrase: the context's hits of an own-words-only term do not
    add to its frequency, so two records with the same own words score alike."""
    from memory_anchor.worker.store.keywords import ColumnWeights, KeywordQuery, keyword_index

    (alice,) = members("alice")
    with alice.transaction() as conn:
        Records.put(conn, "memory", "zebra zebra zebra", session_id="a")
        after_zebras = Records.put(conn, "memory", "a zebra ran", session_id="a")["seq"]
        Records.put(conn, "memory", "plain words", session_id="b")
        after_plain = Records.put(conn, "memory", "a zebra ran", session_id="b")["seq"]
    conn = alice.reader()
    weights = ColumnWeights(1.0, 0.5, 0.3)
    own_only = dict(keyword_index(conn).search(conn, KeywordQuery([], ["zebra"]), "true", [], 10, weights))
    assert own_only[after_zebras] == pytest.approx(own_only[after_plain])
    anywhere = dict(keyword_index(conn).search(conn, KeywordQuery(["zebra"]), "true", [], 10, weights))
    assert anywhere[after_zebras] > anywhere[after_plain]


def test_the_speaker_check_finds_only_records_the_reader_may_see(members):
    from memory_anchor.worker.store.keywords import keyword_index

    alice, bob = members("alice", "bob")
    with alice.transaction() as conn:
        Records.put(conn, "prompt", "Zed: the plan for Friday")  # private: a prompt
        Records.put(conn, "fact", "Ada: the release is on Monday")
        Records.put(conn, "fact", "Ada and Zed met; Zed: is not at the start")
    index = keyword_index(alice.reader())
    assert index.opens_with(alice.reader(), "Zed") and index.opens_with(alice.reader(), "Ada")
    assert not index.opens_with(bob.reader(), "Zed") and index.opens_with(bob.reader(), "Ada")
    assert not index.opens_with(alice.reader(), "Monday")


def test_upgrading_to_postings_indexes_the_records_already_written(postgres_cluster, capsys):
    """A team database made before the postings (migration 0009) gets them from its term vectors
    when `storage init` upgrades it: keyword search and the speaker check find the old records."""
    import psycopg

    from memory_anchor.cli.main import main
    from memory_anchor.worker.store.keywords import ColumnWeights, KeywordQuery, keyword_index
    from memory_anchor.worker.store.postgres.database import Connection, PostgresDatabase
    from memory_anchor.worker.store.postgres.roles import add_member
    from memory_anchor.worker.store.postgres.schema import MIGRATIONS, apply_schema

    before = [name for name, _ in MIGRATIONS].index("0009_keyword_postings")
    database = postgres_cluster.create_database()
    owner = postgres_cluster.url(database)
    try:
        with psycopg.connect(owner, autocommit=True) as conn:
            apply_schema(conn, MIGRATIONS[:before])
            add_member(conn, "alice")
        with psycopg.connect(postgres_cluster.url(database, user="alice")) as raw:
            written = [Records.put(Connection(raw), "fact", text, session_id="s") for text in CORPUS]
            Records.put(Connection(raw), "prompt", "Ada: my own notes on the deploy", session_id="p")
        assert main(["storage", "init", owner]) == 0
        capsys.readouterr()
        alice = PostgresDatabase(postgres_cluster.url(database, user="alice"))
        try:
            conn = alice.reader()
            index = keyword_index(conn)
            found = index.search(conn, KeywordQuery(["rollbacks"]), "r.op = 'put'", [], 10, ColumnWeights(1.0, 0.5))
            assert {seq for seq, _ in found} == {written[4]["seq"], written[5]["seq"]}
            assert index.opens_with(conn, "Ada")
        finally:
            alice.close()
    finally:
        postgres_cluster.drop_database(database)
