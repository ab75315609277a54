"""Ranked keyword search on either backend: BM25 over the same terms, one call for the callers.

    index = keyword_index(conn)
    index.search(conn, KeywordQuery(["cache", "decide"]), "r.project = ?", ["/repo"], 60)
    # -> [(seq, score)], best first, score higher-is-better (BM25)

SQLite: FTS5's own bm25() over `records_fts` (a record's text and title) or
`records_thread_fts` (plus its thread neighbours' words in a low-weight
column, migration 0003). PostgreSQL: the same BM25 formula computed in SQL
over `record_postings`, one row per (term, record) of the terms FTS5 would
have indexed (memory_anchor/worker/store/terms.py writes them as `record_terms`, a trigger
derives the postings; postgres/schema.py 0007, 0009), with document
frequencies and lengths from `term_stats` / `term_totals`; all three count
only rows the reader may see.
PostgreSQL's own rankers (ts_rank, ts_rank_cd) lost 3 to 9 points of
recall@10 against FTS5; BM25 over the same terms matched it.

Thread context: SQLite's `context` column holds the words of the two records
before and the two after a record in its thread; PostgreSQL's (label B in
`record_terms`) only those before (the rows are append-only there).

The `where` given to `search` is a condition over `records r` (view, scope).
"""

from __future__ import annotations

import math
import sqlite3
from dataclasses import dataclass, field
from typing import Any

from memory_anchor.worker.store.dialect import SQLITE, dialect_of
from memory_anchor.worker.store.terms import stem

# FTS5's bm25() constants (sqlite/ext/fts5/fts5_aux.c), so both backends rank alike.
K1 = 1.2
B = 0.75


@dataclass
class KeywordQuery:
    """Query words (as typed, lower-cased) OR-ed; `own_only` are matched in the record's own
    text and title only, never in its neighbours' words (they are too common there)."""

    words: list[str]
    own_only: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.words or self.own_only)


@dataclass
class ColumnWeights:
    text: float = 1.0
    title: float = 1.0
    context: float | None = None  # None: search records' own words only (no thread context)


def keyword_index(conn: Any) -> "SqliteKeywords | PostgresKeywords":
    return SQLITE_KEYWORDS if dialect_of(conn) == SQLITE else POSTGRES_KEYWORDS


def _phrase(word: str) -> str:
    """`word` as an FTS5 string, so no word of a query is read as an operator."""
    return '"' + word.replace('"', "") + '"'


class SqliteKeywords:
    def __init__(self) -> None:
        self._vocab_ready: set[int] = set()

    @staticmethod
    def match_expression(query: KeywordQuery) -> str:
        parts = [_phrase(w) for w in query.words]
        if query.own_only:
            parts.append("{text title} : (" + " OR ".join(_phrase(w) for w in query.own_only) + ")")
        return " OR ".join(parts)

    def search(self, conn, query: KeywordQuery, where: str, params: list, k: int, weights: ColumnWeights) -> list[tuple[int, float]]:
        if not query:
            return []
        if weights.context is None:
            table, ranker, rank_params = "records_fts", "bm25(records_fts, ?, ?)", [weights.text, weights.title]
            query = KeywordQuery(query.words + query.own_only)
        else:
            table = "records_thread_fts"
            ranker = "bm25(records_thread_fts, ?, ?, ?)"
            rank_params = [weights.text, weights.title, weights.context]
        sql = f"""
            SELECT f.rowid AS seq, {ranker} AS rank
            FROM {table} f JOIN records r ON r.seq = f.rowid
            WHERE {table} MATCH ? AND {where}
            ORDER BY rank LIMIT ?
        """
        try:
            rows = conn.execute(sql, [*rank_params, self.match_expression(query), *params, k]).fetchall()
        except sqlite3.OperationalError:  # a malformed MATCH must not break search; callers fall back
            return []
        # bm25() is lower-is-better and unbounded; flip the sign.
        return [(int(r["seq"]), -float(r["rank"])) for r in rows]

    def doc_count(self, conn) -> int:
        return int(conn.execute("SELECT count(*) FROM records_fts_docsize").fetchone()[0])

    def doc_freq(self, conn, word: str) -> int:
        self._ensure_vocab(conn)
        sql = "SELECT doc FROM temp.records_fts_vocab WHERE term = ?"
        try:
            row = conn.execute(sql, (stem(word),)).fetchone()
        except sqlite3.OperationalError:  # a new connection that reused an old one's id
            self._vocab_ready.discard(id(conn))
            self._ensure_vocab(conn)
            row = conn.execute(sql, (stem(word),)).fetchone()
        return int(row[0]) if row else 0

    def _ensure_vocab(self, conn) -> None:
        if id(conn) in self._vocab_ready:
            return
        # A temp fts5vocab table (per connection) gives document frequencies per term;
        # readers are query_only, and creating a temp table needs that lifted for a moment.
        read_only = bool(conn.execute("PRAGMA query_only").fetchone()[0])
        conn.execute("PRAGMA query_only=OFF")
        try:
            conn.execute(
                "CREATE VIRTUAL TABLE IF NOT EXISTS temp.records_fts_vocab USING fts5vocab(main, records_fts, row)"
            )
        finally:
            if read_only:
                conn.execute("PRAGMA query_only=ON")
        self._vocab_ready.add(id(conn))

    def opens_with(self, conn, name: str) -> bool:
        """Whether some record's text starts with "<name>: " (a transcript speaker)."""
        # FTS5's initial-token query (^) finds records that open with the word; the
        # prefix check looks at 200 of them at most.
        sql = """
            SELECT 1 FROM (SELECT rowid FROM records_fts WHERE records_fts MATCH ? LIMIT 200) f
            JOIN records r ON r.seq = f.rowid WHERE substr(r.text, 1, ?) = ? LIMIT 1
        """
        try:
            return conn.execute(sql, ("{text} : ^" + _phrase(name), len(name) + 2, f"{name}: ")).fetchone() is not None
        except sqlite3.OperationalError:
            return False


class PostgresKeywords:
    def search(self, conn, query: KeywordQuery, where: str, params: list, k: int, weights: ColumnWeights) -> list[tuple[int, float]]:
        words = [stem(w) for w in query.words]
        terms = list(dict.fromkeys(words + [stem(w) for w in query.own_only]))
        if not terms:
            return []
        # Terms matched in thread context too (label B); the rest in a record's own words only.
        in_context = [t for t in terms if t in words] if weights.context is not None else []
        count, tokens, freqs = self._statistics(conn, terms)
        if not count:
            return []
        idf = [_idf(count, freqs.get(t, 0)) for t in terms]
        # Per matching posting: the term's frequency weighted by column, then FTS5's BM25
        # sum per record. As in FTS5, a term matched in a record's own words only counts
        # no hit in its context. The document's length is its own words': FTS5 counts the
        # context too, but there every record has context on both sides; here only the
        # records before lend theirs, so a thread's first record has none, and counting it
        # would rank records by their place in the thread.
        # The plan is fixed on purpose: the postings of the query's terms (an index-only
        # scan; an own-words term's by the key's `own` alone) are summed per record and
        # sorted by score, and each record, best first, is looked up by its key and
        # checked against the view and filters until `k` pass (OFFSET 0 keeps the
        # lateral subquery from being flattened, so no other join order exists). Its
        # cost is bounded by the terms' postings. Left to choose, the planner started
        # from the filtered records when it estimated one of them (a user new since the
        # last ANALYZE) and scanned every posting once per record: 360 ms for a LoCoMo
        # question, against 3 ms.
        sql = f"""
            SELECT s.seq AS seq, s.score AS score FROM (
                SELECT p.seq, sum(
                    (?::float8[])[array_position(?::text[], p.term)] * p.f * {K1 + 1}
                    / (p.f + {K1} * (1 - {B} + {B} * p.length / ?))
                ) AS score
                FROM (
                    SELECT seq, term, length, text_tf * ?::float8 + title_tf * ?::float8 AS f
                    FROM record_postings WHERE term = ANY(?::text[]) AND own
                    UNION ALL
                    SELECT seq, term, length, text_tf * ?::float8 + title_tf * ?::float8 + context_tf * ?::float8
                    FROM record_postings WHERE term = ANY(?::text[])
                ) p
                GROUP BY p.seq
                ORDER BY score DESC, p.seq DESC
            ) s
            CROSS JOIN LATERAL (SELECT 1 FROM records r WHERE r.seq = s.seq AND {where} OFFSET 0) r
            ORDER BY s.score DESC, s.seq DESC
            LIMIT ?
        """
        own_only = [t for t in terms if t not in in_context]
        average = max(tokens / count, 1e-9)
        columns = [weights.text, weights.title]
        postings = [*columns, own_only, *columns, weights.context or 0.0, in_context]
        rows = conn.execute(sql, [idf, terms, average, *postings, *params, k]).fetchall()
        return [(int(r["seq"]), float(r["score"])) for r in rows if float(r["score"]) > 0]

    @staticmethod
    def _statistics(conn, terms: list[str]) -> tuple[int, int, dict[str, int]]:
        """(documents, their own tokens, each term's document frequency) the reader may see,
        in one round trip (the totals are the row without a term)."""
        rows = conn.execute(
            """
            SELECT NULL AS term, coalesce(sum(docs), 0) AS docs, coalesce(sum(tokens), 0) AS tokens FROM term_totals
            UNION ALL
            SELECT term, sum(docs), 0 FROM term_stats WHERE term = ANY(?) GROUP BY term
            """,
            (terms,),
        ).fetchall()
        freqs = {r["term"]: int(r["docs"]) for r in rows if r["term"] is not None}
        totals = next(r for r in rows if r["term"] is None)
        return int(totals["docs"]), int(totals["tokens"]), freqs

    def doc_count(self, conn) -> int:
        return self._statistics(conn, [])[0]

    def doc_freq(self, conn, word: str) -> int:
        return self._statistics(conn, [stem(word)])[2].get(stem(word), 0)

    def opens_with(self, conn, name: str) -> bool:
        """Whether some record's text starts with "<name>: " (a transcript speaker)."""
        # The postings of records whose text opens with the word, then the prefix itself.
        sql = """
            SELECT 1 FROM record_postings p JOIN records r ON r.seq = p.seq
            WHERE p.term = ? AND p.own AND p.opens AND substr(r.text, 1, ?) = ? LIMIT 1
        """
        return conn.execute(sql, (stem(name), len(name) + 2, f"{name}: ")).fetchone() is not None


def _idf(count: int, freq: int) -> float:
    """FTS5's idf: log((N - n + 0.5) / (n + 0.5)), floored at 1e-6 for words in most rows."""
    value = math.log((count - freq + 0.5) / (freq + 0.5))
    return value if value > 0 else 1e-6


SQLITE_KEYWORDS = SqliteKeywords()
POSTGRES_KEYWORDS = PostgresKeywords()
