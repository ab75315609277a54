"""Ranked keyword search on either backend: BM25 over the same terms, one call for the callers.

    index = keyword_index(conn)
    index.search(conn, KeywordQuery(["cache", "decide"]), "r.project = ?", ["/repo"], 60)
    # -> [(seq, score)], best first, score higher-is-better (BM25)

SQLite: FTS5's own bm25() over `records_fts` (a record's text and title) or
`records_thread_fts` (plus its thread neighbours' words in a low-weight
column, migration 0003). PostgreSQL: the same BM25 formula computed in SQL
over `record_terms`, the terms FTS5 would have indexed (worker/store/terms.py),
with document frequencies and lengths from `term_stats` / `term_totals`
(postgres/schema.py 0005), which count only rows the reader may see.
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

from worker.store.dialect import SQLITE, dialect_of
from worker.store.terms import stem

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


def _tsquery(terms: list[str], own_only: set[str] = frozenset()) -> str:
    """Terms OR-ed; those in `own_only` match the record's own text and title only (labels D, C)."""
    return " | ".join(
        "'" + t.replace("\\", "\\\\").replace("'", "''") + "'" + (":CD" if t in own_only else "") for t in terms
    )


class PostgresKeywords:
    def search(self, conn, query: KeywordQuery, where: str, params: list, k: int, weights: ColumnWeights) -> list[tuple[int, float]]:
        words = [stem(w) for w in query.words]
        terms = list(dict.fromkeys(words + [stem(w) for w in query.own_only]))
        if not terms:
            return []
        with_context = weights.context is not None
        own_only = set(terms) - (set(words) if with_context else set())
        count, tokens = self._totals(conn)
        if not count:
            return []
        freqs = self._doc_freqs(conn, terms)
        idf = [_idf(count, freqs.get(t, 0)) for t in terms]
        # Per matching row: each query term's frequency (its positions, weighted by the
        # column their label names), then FTS5's BM25 sum. The document's length is its
        # own words': FTS5 counts the context too, but there every record has context on
        # both sides; here only the records before lend theirs, so a thread's first record
        # has none, and counting it would rank records by their place in the thread.
        # The GIN index on `terms` finds the rows (record_terms_matching, postgres/schema.py,
        # which also keeps other members' private rows out; the join with `records` under
        # the member's own policy keeps them out again).
        sql = f"""
            WITH q(term, idf) AS (SELECT * FROM unnest(?::text[], ?::float8[]))
            SELECT t.seq AS seq,
                   sum(q.idf * tf.f * {K1 + 1} / (tf.f + {K1} * (1 - {B} + {B} * t.length / ?))) AS score
            FROM record_terms_matching(?::tsquery) t
            JOIN records r ON r.seq = t.seq
            CROSS JOIN LATERAL unnest(t.terms) AS u(lexeme, positions, weights)
            JOIN q ON q.term = u.lexeme
            CROSS JOIN LATERAL (
                SELECT sum(CASE w WHEN 'C' THEN ?::float8 WHEN 'B' THEN ?::float8 ELSE ?::float8 END) AS f
                FROM unnest(u.weights) AS w
            ) tf
            WHERE {where}
            GROUP BY t.seq
            ORDER BY score DESC, t.seq DESC
            LIMIT ?
        """
        average = max(tokens / count, 1e-9)
        rank_params = [weights.title, weights.context or 0.0, weights.text]
        rows = conn.execute(
            sql, [terms, idf, average, _tsquery(terms, own_only), *rank_params, *params, k]
        ).fetchall()
        return [(int(r["seq"]), float(r["score"])) for r in rows if float(r["score"]) > 0]

    @staticmethod
    def _totals(conn) -> tuple[int, int]:
        """(documents, their own tokens) the reader may see."""
        row = conn.execute("SELECT coalesce(sum(docs), 0) AS docs, coalesce(sum(tokens), 0) AS tokens FROM term_totals").fetchone()
        return int(row["docs"]), int(row["tokens"])

    @staticmethod
    def _doc_freqs(conn, terms: list[str]) -> dict[str, int]:
        rows = conn.execute(
            "SELECT term, sum(docs) AS docs FROM term_stats WHERE term = ANY(?) GROUP BY term", (terms,)
        ).fetchall()
        return {r["term"]: int(r["docs"]) for r in rows}

    def doc_count(self, conn) -> int:
        return self._totals(conn)[0]

    def doc_freq(self, conn, word: str) -> int:
        return self._doc_freqs(conn, [stem(word)]).get(stem(word), 0)

    def opens_with(self, conn, name: str) -> bool:
        """Whether some record's text starts with "<name>: " (a transcript speaker)."""
        term = stem(name)
        sql = """
            SELECT 1 FROM record_terms_matching(?::tsquery) t JOIN records r ON r.seq = t.seq
            WHERE substr(r.text, 1, ?) = ? LIMIT 1
        """
        return conn.execute(sql, (_tsquery([term]), len(name) + 2, f"{name}: ")).fetchone() is not None


def _idf(count: int, freq: int) -> float:
    """FTS5's idf: log((N - n + 0.5) / (n + 0.5)), floored at 1e-6 for words in most rows."""
    value = math.log((count - freq + 0.5) / (freq + 0.5))
    return value if value > 0 else 1e-6


SQLITE_KEYWORDS = SqliteKeywords()
POSTGRES_KEYWORDS = PostgresKeywords()
