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
