"""A record's keyword-index terms, exactly as SQLite's index sees them, for PostgreSQL to rank.

SQLite's keyword index (`records_fts`) runs each record through `fts_words`
(CJK runs as bigrams and characters, memory_anchor/worker/store/cjk.py) and FTS5's
`porter unicode61 remove_diacritics 2` tokenizer. PostgreSQL has neither that
tokenizer nor that Porter stemmer (its `english` dictionary is Snowball's
Porter2, which stems differently), and keyword recall follows the terms: the
same BM25 over different terms loses points. So the worker asks FTS5 itself,
in a private in-memory table, which terms a text holds, and PostgreSQL stores
exactly those (`record_terms`, postgres/schema.py 0005). Both backends then
rank the same terms; tests/test_keyword_terms.py holds them to it.

    tokens("Running to the café")  ->  ["run", "to", "the", "cafe"]
    stem("meetings")               ->  "meet"
"""

from __future__ import annotations

import sqlite3
import threading

from memory_anchor.worker.store.cjk import index_words
from memory_anchor.worker.store.dialect import POSTGRES, dialect_of

# The tokenizer of records_fts and records_thread_fts (memory_anchor/worker/store/migrations.py).
TOKENIZER = "porter unicode61 remove_diacritics 2"

# PostgreSQL's tsvector keeps positions 1..16383 and at most 256 per lexeme; a longer
# text's tail shares the last position, which only caps its term frequency.
MAX_POSITION = 16383

_local = threading.local()


def _tokenizer() -> sqlite3.Connection:
    """This thread's in-memory FTS5 table and its per-token vocabulary view."""
    conn = getattr(_local, "conn", None)
    if conn is None:
        conn = sqlite3.connect(":memory:")
        conn.execute(f"CREATE VIRTUAL TABLE t USING fts5(x, tokenize='{TOKENIZER}')")
        conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, instance)")
        _local.conn = conn
    return conn


def tokens(text: str | None) -> list[str]:
    """The terms FTS5 indexes for `text` (after `fts_words`), in the order they occur."""
    words = index_words(text)
    if not words or not words.strip():
        return []
    conn = _tokenizer()
    with conn:
        conn.execute("INSERT INTO t(rowid, x) VALUES (1, ?)", (words,))
        rows = conn.execute("SELECT term FROM v ORDER BY offset").fetchall()
        conn.execute("DELETE FROM t")
    return [row[0] for row in rows]


def stem(word: str) -> str:
    """A query word as the index holds it (FTS5 stems the words of a MATCH the same way)."""
    found = tokens(word)
    return found[0] if found else word


def tsvector_literal(columns: list[tuple[list[str], str]]) -> tuple[str, int]:
    """(a tsvector literal, the number of tokens) for columns given as (terms, weight label).

    Positions run on across columns; the label ('D' is the default and written
    bare) tells BM25 which column a hit is in, so column weights can apply.
    """
    positions: dict[str, list[str]] = {}
    at = 0
    for terms, label in columns:
        suffix = "" if label == "D" else label
        for term in terms:
            at = min(at + 1, MAX_POSITION)
            positions.setdefault(term, []).append(f"{at}{suffix}")
    parts = ["'" + term.replace("\\", "\\\\").replace("'", "''") + "':" + ",".join(p[:256]) for term, p in positions.items()]
    return " ".join(parts), sum(len(terms) for terms, _ in columns)


# SQLite's thread context (migration 0003): a neighbour lends the head of its text.
CONTEXT_CHARS = 200

# The two records before `row` in its thread (its session, else its user): same kind and
# branch, first versions, with text. Only neighbours everyone who reads `row` may read:
# a private neighbour's words must not make a shared record match.
_PREVIOUS_IN_THREAD = """
    SELECT substr(text, 1, ?) AS head FROM records
    WHERE {thread} = ? AND seq < ? AND kind = ? AND branch = ? AND version = 1 AND op = 'put'
      AND text <> '' AND id <> ? AND (NOT private OR (? AND author = ?))
    ORDER BY seq DESC LIMIT 2
"""


def index_record(conn, row) -> None:
    """Index a just-inserted record's terms on PostgreSQL, in the insert's transaction.

    SQLite indexes in its own triggers (records_fts, records_thread_fts), with
    the same condition: puts with text. PostgreSQL's thread context holds the
    two records before this one; the two after it would mean changing this
    row later, and records (and their terms) are append-only there.
    """
    if dialect_of(conn) != POSTGRES or row["op"] != "put" or not row["text"]:
        return
    thread, key = ("session_id", row["session_id"]) if row["session_id"] is not None else ("user_id", row["user_id"])
    context: list[str] = []
    if key is not None:
        neighbours = conn.execute(
            _PREVIOUS_IN_THREAD.format(thread=thread),
            (CONTEXT_CHARS, key, row["seq"], row["kind"], row["branch"], row["id"], row["private"], row["author"]),
        ).fetchall()
        for neighbour in reversed(neighbours):
            context.extend(tokens(neighbour["head"]))
    own = [(tokens(row["text"]), "D"), (tokens(row["title"] or ""), "C")]
    vector, length = tsvector_literal([*own, (context, "B")])
    conn.execute(
        "INSERT INTO record_terms(seq, terms, length, private, author) VALUES (?, ?::tsvector, ?, ?, ?)",
        (row["seq"], vector, length - len(context), row["private"], row["author"]),
    )
