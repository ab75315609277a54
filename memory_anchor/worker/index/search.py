"""Hybrid retrieval: dense (MiniLM) and lexical (BM25) candidates, fused, scoped, boosted.

On both backends: BM25 is FTS5's on SQLite and computed in SQL over the same
terms on PostgreSQL (keywords.py); on team storage a `follower` brings other
workers' vectors into the in-memory index before a dense search (follower.py).

    service = SearchService(db, vectors, embedder)
    hits = service.search(
        "what did we decide about the cache?",
        view,                                   # records.resolve_view(conn, branch, as_of)
        filters={"project": "/repo", "user_id": "alice", "kind": ["fact", "observation"],
                 "metadata": {"topic": "perf"}},
        top_k=10,
        threshold=None,                          # minimum `score` (0..1), None = no minimum
        mode="hybrid",                           # or "vector" | "keyword"
        time_range=(after, before),              # epoch seconds or ISO 8601 on happened_at; either may be None
        fallback=True,                           # False: no "most recent" hits when nothing matches
    )
    # -> [record dict (as Records.get returns) + "score" (0..1, higher is better) + "match" (how found)]

Filters (all optional, exact match, a list means "any of"): project, user_id,
agent_id, run_id, session_id, kind, layer, status (default "active"), and
metadata keys, given either under "metadata" or as any other top-level key
(mem0 style: `{"user_id": "u", "topic": "x"}`). Omitting `project` searches
every project. Identity records (kind "identity") are never returned.

How a search runs:
1. The query is read for dates ("in May 2023", "last week", "yesterday";
   see timewords.py): records that happened in that window get a boost (not
   a hard filter: the question may be asked later about something said earlier).
2. Candidates: the nearest vectors within the scope (in-memory index, see
   vectors.py; the query is embedded without the names of the transcript
   speakers it mentions: step 4's speaker boost scores who spoke) and the best
   BM25 matches of the shaped keyword query (stop words
   and over-frequent words dropped, so FTS5 stays fast at 100k rows) over each
   record's own words plus, at low weight, its thread neighbours' words
   (`records_thread_fts`, see migration 0003).
3. Only the version each record has in `view` survives (branch visibility and
   as_of), then status and metadata filters.
4. Scores are fused (weighted, each list normalised), then lifted by neighbour
   context, the speaker the query names, recency, confidence and date match; the result is scaled to 0..1.
5. Fallback chain so that a search of non-empty memory answers: semantic (and
   keyword) → keyword only → most recent records in scope. Fallback hits score 0.
   A `threshold` is applied last and can leave the result empty: a caller who
   asks for a minimum score gets only hits above it (the fallback hits too
   score below any positive threshold).

`score` is absolute where it can be, so thresholds mean the same across
queries: the cosine similarity of the hit to the query when the vector search
found it, or when the search embedded a keyword hit that has no stored vector
(`_score_by_meaning`); for hits found only by their words (and in keyword mode) half their
fused score relative to the best hit (at most 0.5); 0 for fallback hits. The
order of hits is the fused ranking; a hit's score is capped at the score of the
hit before it, so scores never rise down the list.

The same memory is returned once: hits whose text is the same (case, spacing and
times aside; `same_key`) are one hit, the best ranked, with `count` saying how
many records said it. Of hits that differ but share their kind and title (ten
downloads, ten todo lists) SAME_TITLE_SHOWN are shown; the first counts the
rest in `similar`.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Iterable

import numpy as np

from memory_anchor.worker.index.embeddings import Embedder
from memory_anchor.worker.index.follower import LogFollower
from memory_anchor.worker.index.indexer import NOT_EMBEDDED, embedding_texts
from memory_anchor.worker.store.keywords import ColumnWeights, KeywordQuery, SqliteKeywords, keyword_index
from memory_anchor.worker.index.timewords import time_window
from memory_anchor.worker.index.vectors import VectorFilter, Vectors
from memory_anchor.worker.store import filters as filter_language
from memory_anchor.worker.store.cjk import is_cjk_word, query_words, written_in_cjk
from memory_anchor.worker.store.db import Database
from memory_anchor.worker.store.dialect import dialect_of, metadata_in, truth
from memory_anchor.worker.store.filters import Filter
from memory_anchor.worker.store.records import RecordError, Records, View, parse_time
from memory_anchor.worker.store.threads import neighbour_walks

MODES = ("hybrid", "vector", "keyword")
# How many times more rows a word matches in records_thread_fts (own text + two
# neighbours on each side) than in the records' own text.
CONTEXT_EXPANSION = 5
# Query embeddings run here while the calling thread queries FTS5.
_EMBED_POOL = ThreadPoolExecutor(max_workers=2, thread_name_prefix="query-embed")
NEVER_SEARCHED_KINDS = ("identity",)
# Of the records the words found that have no stored vector (observations: see indexer.NOT_EMBEDDED),
# this many of the best are scored by meaning at search time, their gists embedded beside the query.
SCORED_BY_MEANING = 8
GISTS_KEPT = 1024  # gist vectors kept for the next search (1.5 KB each): the same tool calls come back
SAME_TITLE_SHOWN = 2  # hits of one kind and title shown; more are counted (`similar`) on the first
COLUMN_FILTERS = ("project", "user_id", "agent_id", "run_id", "session_id", "kind", "layer", "type", "status")
# Filters the vector index can apply itself; the rest are checked in SQLite.
INDEX_FILTERS = {
    "user_id": "user_ids",
    "agent_id": "agent_ids",
    "run_id": "run_ids",
    "session_id": "session_ids",
    "kind": "kinds",
    "layer": "layers",
}

STOP_WORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further had
    has have having he her here hers herself him himself his how i if in into is it its itself just
    me more most my myself no nor not now of off on once only or other our ours ourselves out over
    own same she should so some such than that the their theirs them themselves then there these
    they this those through to too under until up very was we were what when where which while who
    whom why will with would you your yours yourself yourselves s t don didn doesn isn wasn aren
    weren won shouldn couldn wouldn also ever any anything something things thing get got go going
    went like likely really us let lets kind sort etc""".split()
)


@dataclass
class Tuning:
    """The knobs of ranking; defaults were tuned on the dev benchmark file (see team/retrieval-notes.md)."""

    dense_weight: float = 0.5
    # The embedding model reads English; to it any two CJK texts look alike (0.7-0.8), so on a query
    # in a CJK script its vote counts for little and the words decide.
    cjk_dense_weight: float = 0.1
    keyword_weight: float = 0.5
    candidates: int = 60  # per list, at least (top_k * 4 if larger)
    neighbour_weight: float = 0.4  # share of the best adjacent record's relevance added
    neighbour_candidates: int = 30  # how many of the best candidates look for neighbours
    speaker_weight: float = 0.5  # "Name: ..." records whose speaker the query names
    recency_weight: float = 0.02  # at most this much for the newest record in the results
    confidence_weight: float = 0.05
    date_weight: float = 0.3
    context_weight: float = 0.3  # BM25 weight of a record's neighbours' words (the `context` column)
    max_df_ratio: float = 0.2  # drop keyword terms found in more than this share of documents
    max_df_docs: int = 2000  # ... or in more than this many (FTS5 cost grows with matching rows)


@dataclass
class _Candidate:
    seq: int
    dense: float = 0.0
    keyword: float = 0.0
    found_by: str = ""
    # The cosine of a keyword hit that has no stored vector, worked out at search time: its
    # similarity for thresholds and recall; the ranking stays by its words (`_score_by_meaning`).
    meaning: float | None = None


class SearchError(RecordError):
    pass


class SearchService:
    def __init__(
        self,
        db: Database,
        vectors: Vectors | None,
        embedder: Embedder | None,
        *,
        tuning: Tuning | None = None,
        follower: LogFollower | None = None,
    ):
        self.db = db
        # Team storage: other workers' records reach this worker's vector index by the follower.
        self.follower = follower
        self.vectors = vectors
        self.embedder = embedder
        self.tuning = tuning or Tuning()
        self._df_cache = _TimedCache(ttl=60)
        self._doc_count: tuple[float, int] = (0.0, 0)
        self._speaker_cache = _TimedCache(ttl=300)
        self._gists = _TimedCache(ttl=24 * 3600, size=GISTS_KEPT)  # a text's vector never changes

    # --- the one public entry point -------------------------------------------------

    def search(
        self,
        query: str,
        view: View,
        *,
        filters: dict[str, Any] | None = None,
        top_k: int = 10,
        threshold: float | None = None,
        mode: str = "hybrid",
        time_range: tuple[Any, Any] | None = None,
        fallback: bool = True,
        now: float | None = None,
        score_unembedded: bool = True,
    ) -> list[dict[str, Any]]:
        """Records matching `query` in `view`, best first; see the module docstring.

        `score_unembedded` False: keyword hits without a stored vector keep no similarity
        (`_score_by_meaning`), which saves embedding them."""
        if mode not in MODES:
            raise SearchError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
        if not isinstance(top_k, int) or isinstance(top_k, bool) or top_k < 1 or top_k > 1000:
            raise SearchError("top_k must be an integer between 1 and 1000")
        if threshold is not None and not isinstance(threshold, (int, float)):
            raise SearchError("threshold must be a number")
        query = (query or "").strip()
        scope = _Scope.from_filters(filters or {}, time_range)
        now = time.time() if now is None else now
        conn = self.db.reader()
        wanted = max(self.tuning.candidates, top_k * 4)

        hits: list[dict[str, Any]] = []
        if query:
            window = time_window(query, now)
            date_window = (window.start, window.end) if window else None
            candidates: dict[int, _Candidate] = {}
            dense = mode in ("hybrid", "vector") and self.vectors is not None and self.embedder is not None
            if dense and self.follower is not None:
                self.follower.catch_up(embed=False, wait=False)
            # The query embedding (onnxruntime) and FTS5 (SQLite) both release the GIL: overlap them.
            pending_vector = _EMBED_POOL.submit(self.embedder.embed_one, self.dense_query(conn, query)) if dense else None
            keyword_hits = self._keyword(conn, query, view, scope, wanted, alone=not dense) if mode in ("hybrid", "keyword") else []
            if pending_vector is not None:
                query_vector = pending_vector.result()
                loading = self.vectors.loading  # the index answers nothing until it is read back
                for seq, score in self._dense(query_vector, view, scope, wanted):
                    candidates.setdefault(seq, _Candidate(seq)).dense = score
                if score_unembedded:
                    for seq, score in self._score_by_meaning(conn, query_vector, keyword_hits, candidates, every_kind=loading):
                        candidates.setdefault(seq, _Candidate(seq)).meaning = score
            for seq, score in keyword_hits:
                candidates.setdefault(seq, _Candidate(seq)).keyword = score
            hits = self._rank(conn, candidates, view, scope, date_window, now, top_k, mode, query)
            if not hits and mode == "vector":
                # Nothing embedded in scope yet (e.g. still indexing): try the words.
                lexical = {s: _Candidate(s, keyword=v) for s, v in self._keyword(conn, query, view, scope, wanted, alone=True)}
                hits = self._rank(conn, lexical, view, scope, date_window, now, top_k, "keyword", query)
        if not hits and fallback:
            hits = self._most_recent(conn, view, scope, top_k)
        if threshold is not None:
            hits = [h for h in hits if h["score"] >= threshold]
        return hits[:top_k]

    # --- candidates --------------------------------------------------------------------

    def _dense(self, vector, view: View, scope: "_Scope", k: int) -> list[tuple[int, float]]:
        if scope.metadata or scope.expr is not None:
            k *= 10  # metadata and filter expressions are checked afterwards, in SQLite; look deeper
        return self.vectors.search(vector, k, scope.vector_filter(view))

    def _score_by_meaning(self, conn, query_vector, keyword_hits: list[tuple[int, float]],
                          candidates: dict[int, _Candidate], *, every_kind: bool = False) -> list[tuple[int, float]]:  # fmt: skip
        """(seq, cosine to the query) of the best keyword hits that have no stored vector, or of any
        kind (`every_kind`) while the stored vectors are being read back at start-up.

        A tool call is stored without one (indexer.NOT_EMBEDDED): its words find it and rank it, and
        its cosine is its `similarity`, which thresholds and recall judge as any other hit's (a hit
        with none is never recalled). Put in the ranking too, short tool calls crowded out the
        replies that answer (on brain's questions, search's top 10 answered 20 instead of 22).
        Only the best few are embedded, so a search pays for a handful of short texts instead of an
        import for every tool call; and the first prompt after the worker starts gets its recall
        before the index is loaded.
        """
        unscored = [seq for seq, _ in keyword_hits if seq not in candidates][: SCORED_BY_MEANING * 3]
        rows = Records.by_seqs(conn, unscored) if unscored else {}
        wanted = [rows[seq] for seq in unscored
                  if seq in rows and (every_kind or rows[seq]["kind"] in NOT_EMBEDDED)][:SCORED_BY_MEANING]  # fmt: skip
        if not wanted:
            return []
        texts = embedding_texts(wanted, self.embedder)
        vectors = {text: self._gists.get(text) for text in texts}
        new = sorted(text for text, vector in vectors.items() if vector is None)
        # In two halves, one a core: the model runs each text on one thread (embeddings.py).
        halves = [part for part in (new[: (len(new) + 1) // 2], new[(len(new) + 1) // 2 :]) if part]
        embedded = [_EMBED_POOL.submit(self.embedder.embed, part) for part in halves]
        for text, vector in zip(new, [v for job in embedded for v in job.result()]):
            vectors[text] = vector
            self._gists.put(text, vector)
        return [(record["seq"], float(np.dot(query_vector, vectors[text]))) for record, text in zip(wanted, texts)]

    def _keyword(self, conn, query: str, view: View, scope: "_Scope", k: int, *, alone: bool) -> list[tuple[int, float]]:
        words = self.keyword_terms(conn, query, alone=alone)
        if not words:
            return []
        dialect = dialect_of(conn)
        where, params = view.sql("r", dialect)
        conditions, cond_params = scope.sql("r", dialect)
        # One BM25 over a record's text, title and (SQLite) its thread neighbours' words
        # lets a question whose words are split between a turn and the one before or
        # after it rank that turn (memory_anchor/worker/store/keywords.py).
        weights = ColumnWeights(text=1.0, title=0.5, context=self.tuning.context_weight)
        return keyword_index(conn).search(conn, words, f"{where} {conditions}", [*params, *cond_params], k, weights)

    def dense_query(self, conn, query: str) -> str:
        """`query` as the dense side embeds it: without the names of transcript speakers.

        A record written as "Ada: text" is embedded with its speaker's name, so
        a question naming Ada pulls Ada's short turns ("Ada: Cool, thanks!") by
        the name alone, ahead of the turns that answer it. Who spoke is what the
        speaker boost in `_rank` scores; the embedding should match the content.
        Other capitalised words (places, titles) stay: they are content.
        """
        speakers = [name for name in _named_in(query) if self._is_speaker(conn, name)]
        if not speakers:
            return query
        names = "|".join(re.escape(name) for name in sorted(speakers, key=len, reverse=True))
        stripped = " ".join(re.sub(rf"\b(?:{names})(?:'s)?\b", " ", query).split())
        return stripped if re.search(r"\w", stripped) else query

    def _is_speaker(self, conn, name: str) -> bool:
        """Whether some record is written as "<name>: ..." (cached for five minutes)."""
        cached = self._speaker_cache.get(name)
        if cached is not None:
            return cached
        found = keyword_index(conn).opens_with(conn, name)
        self._speaker_cache.put(name, found)
        return found

    def keyword_query(self, conn, query: str, *, alone: bool = True) -> str:
        """`keyword_terms` as an FTS5 MATCH expression: the words OR-ed, each quoted."""
        return SqliteKeywords.match_expression(self.keyword_terms(conn, query, alone=alone))

    def keyword_terms(self, conn, query: str, *, alone: bool = True) -> KeywordQuery:
        """The informative words of `query`, for BM25 on either backend.

        With no informative word, the rarest word still ranks; beside a dense
        list (`alone` False) only while that stays cheap: BM25 scores every row
        a word matches (8,000 rows take ~15 ms), and a word that common says
        little that the dense list does not.

        A word is matched in the neighbours' words (the `context` column) too only
        while that stays cheap: each record's context holds ~4 other records' words,
        so a word matches up to ~5x as many rows there; common words are matched in
        the records' own text only.
        """
        words = []
        for word in query_words(query):  # CJK runs come as bigrams and characters (see memory_anchor/worker/store/cjk.py)
            word = word.strip("'")
            if word.endswith("'s"):
                word = word[:-2]
            if (len(word) < 2 and not is_cjk_word(word)) or word in STOP_WORDS or word in words:
                continue
            words.append(word)
        if not words:
            return KeywordQuery([])
        own_only: list[str] = []
        # Very frequent words match most rows: they make FTS5 slow and add nothing to ranking.
        # Cost grows with the number of matching rows, so the cap is both relative and absolute.
        total = self._total_docs(conn)
        if total > 1000:
            cap = min(self.tuning.max_df_ratio * total, self.tuning.max_df_docs)
            informative = [w for w in words if self._doc_freq(conn, w) <= cap]
            if not informative:
                rarest = min(words, key=lambda w: self._doc_freq(conn, w))
                if not alone and self._doc_freq(conn, rarest) > self.tuning.max_df_docs:
                    return KeywordQuery([])
                informative = [rarest]
            words = informative
            context_cap = self.tuning.max_df_docs / CONTEXT_EXPANSION
            own_only = [w for w in words if self._doc_freq(conn, w) > context_cap]
            words = [w for w in words if w not in own_only]
        return KeywordQuery(words, own_only)

    def _total_docs(self, conn) -> int:
        stamp, count = self._doc_count
        if time.monotonic() - stamp > 30:
            count = keyword_index(conn).doc_count(conn)
            self._doc_count = (time.monotonic(), count)
        return count

    def _doc_freq(self, conn, word: str) -> int:
        cached = self._df_cache.get(word)
        if cached is not None:
            return cached
        freq = keyword_index(conn).doc_freq(conn, word)
        self._df_cache.put(word, freq)
        return freq

    # --- ranking -----------------------------------------------------------------------

    def _rank(
        self,
        conn,
        candidates: dict[int, _Candidate],
        view: View,
        scope: "_Scope",
        date_window: tuple[float, float] | None,
        now: float,
        top_k: int,
        mode: str,
        query: str = "",
    ) -> list[dict[str, Any]]:
        if not candidates:
            return []
        records = {seq: r for seq, r in _visible_rows(conn, candidates.keys(), view, scope).items() if scope.accepts(r)}
        if not records:
            return []
        tuning = self.tuning
        dense = _normalise({s: candidates[s].dense for s in records if candidates[s].dense})
        keyword = _normalise({s: candidates[s].keyword for s in records if candidates[s].keyword})
        if mode == "vector":
            weights = (1.0, 0.0)
        elif mode == "keyword":
            weights = (0.0, 1.0)
        elif written_in_cjk(query):
            weights = (tuning.cjk_dense_weight, 1.0 - tuning.cjk_dense_weight)
        else:
            weights = (tuning.dense_weight, tuning.keyword_weight)
        relevance = {s: weights[0] * dense.get(s, 0.0) + weights[1] * keyword.get(s, 0.0) for s in records}
        if tuning.neighbour_weight and mode == "hybrid":
            self._add_neighbour_context(conn, view, scope, records, relevance)
        speakers = _named_in(query)
        newest = max(r["happened_at"] for r in records.values())
        oldest = min(r["happened_at"] for r in records.values())
        span = max(newest - oldest, 1.0)
        scored = []
        for seq, record in records.items():
            score = relevance[seq]
            score += tuning.recency_weight * (record["happened_at"] - oldest) / span
            if record.get("confidence") is not None:
                score += tuning.confidence_weight * (float(record["confidence"]) - 0.5)
            if date_window and date_window[0] <= record["happened_at"] <= date_window[1]:
                score += tuning.date_weight
            if speakers and _speaker(record) in speakers:
                score += tuning.speaker_weight
            found = "+".join(name for name, table in (("vector", dense), ("keyword", keyword)) if seq in table)
            scored.append((score, seq, found or "context"))
        scored.sort(key=lambda item: (-item[0], -item[1]))
        top = scored[0][0] if scored else 1.0
        hits: list[dict[str, Any]] = []
        same: dict[str, dict[str, Any]] = {}  # what a hit says -> the hit that says it first
        titles: dict[str, dict[str, Any]] = {}  # a title -> the first hit under it
        shown: set[tuple[str, str]] = set()
        ceiling = 1.0
        position = 0
        while position < len(scored) and len(hits) < top_k:
            # A window at a time: most searches fill top_k from the first; repeats take more.
            window = scored[position : position + max(top_k, 10) * 2]
            position += len(window)
            full = Records.by_seqs(conn, [seq for _, seq, _ in window])
            for score, seq, found in window:
                record = full.get(seq)
                if record is None:  # removed meanwhile (a deleted branch)
                    continue
                key = same_key(record)
                if key in same:  # the same memory said again: counted on the first, not shown twice
                    same[key]["count"] += 1
                    continue
                if len(hits) >= top_k:
                    continue
                title = title_key(record)
                titled = titles.get(title)
                if titled is not None and titled["similar_shown"] >= SAME_TITLE_SHOWN:
                    # One more of a kind already shown twice (the tenth download, the tenth todo list):
                    # counted on the first of them, its room left to other answers.
                    titled["similar"] += 1
                    continue
                # Absolute meaning for thresholds: relevance of the best list score, not rank-relative;
                # never above the hit ranked before it, so scores read in the order hits come.
                found_dense = candidates.get(seq)
                raw = None
                if mode != "keyword" and found_dense is not None:
                    raw = found_dense.dense or found_dense.meaning
                value = _clip01(raw if raw is not None else score / max(top, 1e-9) * 0.5)
                ceiling = min(ceiling, value)
                record["score"] = round(ceiling, 4)
                record["similarity"] = round(raw, 4) if raw is not None else None  # the dense side's own cosine
                record["match"] = found
                record["count"] = 1
                same[key] = record
                if titled is None:
                    record.update(similar=0, similar_shown=1)
                    if title:
                        titles[title] = record
                else:
                    titled["similar_shown"] += 1
                shown.add((record["kind"], _head_key(record.get("text"))))
                hits.append(record)
        # Repeats of a shown hit further down the candidates count too (their text fetched only
        # when they begin like one).
        rest = [seq for _, seq, _ in scored[position:] if (records[seq]["kind"], _head_key(records[seq].get("head"))) in shown]
        if rest:
            for record in Records.by_seqs(conn, rest).values():
                hit = same.get(same_key(record))
                if hit is not None:
                    hit["count"] += 1
        for hit in hits:
            hit.pop("similar_shown", None)
            if not hit.get("similar"):
                hit.pop("similar", None)
        return hits

    def _add_neighbour_context(self, conn, view: View, scope: "_Scope", records: dict, relevance: dict) -> None:
        """Lift each record by the relevance of the records written just before and after it in its thread
        (the adjacent ones fully, those two apart by half).

        A thread is the record's session, else its user (a conversation stored
        turn by turn through the mem0 API). An answer often sits one turn away
        from the words of the question ("Where did you go?" / "To the beach.").
        Claude's reply to a user's prompt is lifted by that prompt too: a query in
        the words of an earlier prompt ("docker is in 502 bad gateway") finds the
        prompt first, and what was found then is in the reply. New records reached
        this way join the results.
        """
        weight = self.tuning.neighbour_weight
        ranked = sorted(records, key=lambda s: -relevance[s])[: self.tuning.neighbour_candidates]
        links = _thread_neighbours(conn, [records[seq] for seq in ranked])
        replies = _replies(conn, [records[seq] for seq in ranked], links)
        neighbours = {n for ns in links.values() for n, _ in ns} | {n for ns in replies.values() for n in ns}
        fresh = neighbours - records.keys()
        if fresh:
            for seq, row in _visible_rows(conn, fresh, view, scope).items():
                if scope.accepts(row):
                    records[seq] = row
                    relevance[seq] = 0.0
        base = dict(relevance)
        lift: dict[int, float] = {}
        for seq, ns in links.items():
            for n, distance in ns:
                if n in records:
                    # symmetric: each side of the pair is lifted by the other; two apart counts half
                    share = 1.0 if distance == 1 else 0.5
                    lift[n] = max(lift.get(n, 0.0), share * base[seq])
                    lift[seq] = max(lift.get(seq, 0.0), share * base[n])
        for prompt, answers in replies.items():
            for reply in answers:  # one way: a prompt that echoes the query is no answer, its reply may be
                if reply in records:
                    lift[reply] = max(lift.get(reply, 0.0), base[prompt])
        for seq, value in lift.items():
            relevance[seq] += weight * value

    def _most_recent(self, conn, view: View, scope: "_Scope", top_k: int) -> list[dict[str, Any]]:
        conditions, params = scope.sql("r", dialect_of(conn))
        rows, _ = Records.query(
            conn,
            view,
            statuses=scope.statuses,
            order="happened_at DESC",
            limit=top_k * 4 + 20,
            extra_where="1=1 " + conditions,
            extra_params=params,
        )
        out = []
        for record in rows:
            if scope.accepts(record):
                record["score"] = 0.0
                record["match"] = "recent"
                out.append(record)
            if len(out) >= top_k:
                break
        return out


# --- scope ---------------------------------------------------------------------------


@dataclass
class _Scope:
    columns: dict[str, tuple[str, ...]]
    statuses: tuple[str, ...]
    metadata: dict[str, Any]
    after: float | None
    before: float | None
    expr: Filter | None = None

    @classmethod
    def from_filters(cls, filters: dict[str, Any], time_range: tuple[Any, Any] | None) -> "_Scope":
        if not isinstance(filters, dict):
            raise SearchError("filters must be an object")
        # Plain equalities narrow the indexes; mem0's operators and AND/OR/NOT compile to SQL.
        filters, rest = filter_language.split(filters)
        expr = filter_language.parse(rest) if rest else None
        columns: dict[str, tuple[str, ...]] = {}
        metadata: dict[str, Any] = {}
        statuses: tuple[str, ...] = ("active",)
        for key, value in filters.items():
            if value is None:
                continue
            if key == "metadata":
                if not isinstance(value, dict):
                    raise SearchError("filters.metadata must be an object")
                metadata.update(value)
            elif key in ("kinds", "layers"):
                columns[key[:-1]] = _as_tuple(value)
            elif key == "status":
                statuses = _as_tuple(value)
            elif key in COLUMN_FILTERS:
                columns[key] = _as_tuple(value)
            elif key in ("branch", "as_of", "id", "seq"):
                raise SearchError(f"filter {key!r} is not a search filter: pass it as the view / a lookup")
            else:
                metadata[key] = value
        after = before = None
        if time_range:
            if len(time_range) != 2:
                raise SearchError("time_range must be (after, before)")
            try:
                after = parse_time(time_range[0]) if time_range[0] not in (None, "") else None
                before = parse_time(time_range[1]) if time_range[1] not in (None, "") else None
            except ValueError as exc:
                raise SearchError(f"bad time_range: {exc}")
        kinds = columns.get("kind")
        if kinds is not None:
            columns["kind"] = tuple(k for k in kinds if k not in NEVER_SEARCHED_KINDS)
        return cls(columns, statuses, metadata, after, before, expr)

    def vector_filter(self, view: View) -> VectorFilter:
        args: dict[str, Any] = {
            "chain": view.chain,
            "exclude_kinds": NEVER_SEARCHED_KINDS,
            "happened_after": self.after,
            "happened_before": self.before,
        }
        if "project" in self.columns:
            args["projects"] = self.columns["project"]
        for column, name in INDEX_FILTERS.items():
            if column in self.columns:
                args[name] = self.columns[column]
        return VectorFilter(**args)

    def sql(self, alias: str, dialect: str) -> tuple[str, list[Any]]:
        """' AND ...' conditions for SQL over `records` (column filters, time, never identity)."""
        parts = [f"{alias}.kind NOT IN ({','.join('?' * len(NEVER_SEARCHED_KINDS))})", f"{alias}.op = 'put'"]
        params: list[Any] = list(NEVER_SEARCHED_KINDS)
        for column, values in self.columns.items():
            if not values:
                parts.append(truth(dialect, False))
                continue
            parts.append(f"{alias}.{column} IN ({','.join('?' * len(values))})")
            params.extend(values)
        if self.after is not None:
            parts.append(f"{alias}.happened_at >= ?")
            params.append(self.after)
        if self.before is not None:
            parts.append(f"{alias}.happened_at <= ?")
            params.append(self.before)
        for key, want in self.metadata.items():
            values = list(want) if isinstance(want, (list, tuple)) else [want]
            condition, condition_params = metadata_in(dialect, alias, key, values)
            parts.append(condition)
            params.extend(condition_params)
        if self.expr is not None:
            text, expr_params = self.expr.sql(alias, dialect)
            parts.append(text)
            params.extend(expr_params)
        return "AND " + " AND ".join(parts), params

    def accepts(self, record: dict[str, Any]) -> bool:
        if record["kind"] in NEVER_SEARCHED_KINDS or record["op"] != "put":
            return False
        if self.statuses and record["status"] not in self.statuses:
            return False
        for column, values in self.columns.items():
            if record.get(column) not in values:
                return False
        if self.after is not None and record["happened_at"] < self.after:
            return False
        if self.before is not None and record["happened_at"] > self.before:
            return False
        meta = record.get("metadata") or {}
        for key, want in self.metadata.items():
            have = meta.get(key)
            if isinstance(want, (list, tuple)):
                if have not in want:
                    return False
            elif have != want and str(have) != str(want):
                return False
        return True


# Beside the id, seq, branch and op that Records.visible_heads reads.
_LIGHT_COLUMNS = (
    "r.kind, r.status, r.project, r.user_id, r.agent_id, r.run_id, r.session_id, r.layer, r.type, "
    "r.happened_at, r.confidence, r.metadata, substr(r.text, 1, 48) AS head"
)

_SPEAKER_RE = re.compile(r"^([A-Z][\w.'-]*(?: [A-Z][\w.'-]*){0,2}): ")


def _speaker(record: dict[str, Any]) -> str | None:
    """The author of a chat-transcript record written as "Name: text", if any."""
    m = _SPEAKER_RE.match(record.get("head") or record.get("text") or "")
    return m.group(1) if m else None


class _TimedCache:
    """A bounded map whose entries expire after `ttl` seconds; the oldest entry goes first when full.

    For facts about the index that change slowly (a word's document count,
    whether a name is a speaker): looked up on every search, refreshed now and then.
    """

    def __init__(self, ttl: float, size: int = 10_000):
        self.ttl = ttl
        self.size = size
        self._entries: OrderedDict[str, tuple[float, Any]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str) -> Any:
        """The cached value, or None when absent or expired."""
        with self._lock:
            entry = self._entries.get(key)
        if entry is not None and time.monotonic() - entry[0] < self.ttl:
            return entry[1]
        return None

    def put(self, key: str, value: Any) -> None:
        with self._lock:
            self._entries[key] = (time.monotonic(), value)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)


def _thread_neighbours(conn, records: list[dict[str, Any]]) -> dict[int, list[tuple[int, int]]]:
    """seq -> [(neighbour seq, distance 1 or 2)]: the two records before and after each in its thread.

    A thread is a record's session, else its user. Each (record, side) is a
    walk of at most two rows down an index; they run as one statement
    (store/threads.py, per backend): one query per record and side cost more
    in call overhead than in the walks.
    """
    walks: list[tuple[str, str, Any, int, str]] = []  # (column, op, thread, seq, kind), one per side
    for record in records:
        if record.get("session_id"):
            column, value = "session_id", record["session_id"]
        elif record.get("user_id"):
            column, value = "user_id", record["user_id"]
        else:
            continue
        for op in ("<", ">"):
            walks.append((column, op, value, record["seq"], record["kind"]))
    found: dict[int, list[int]] = {}
    for side, seq in neighbour_walks(conn, walks):
        found.setdefault(side, []).append(seq)
    links: dict[int, list[tuple[int, int]]] = {}
    for side, neighbours in found.items():
        _, op, _, origin, _ = walks[side]
        nearest_first = sorted(neighbours, reverse=(op == "<"))
        links.setdefault(origin, []).extend((n, d) for d, n in enumerate(nearest_first, start=1))
    return links


def _replies(conn, records: list[dict[str, Any]], links: dict[int, list[tuple[int, int]]]) -> dict[int, list[int]]:
    """prompt seq -> the first two passages of Claude's reply to it: its session's next transcript
    records, before the session's next prompt (`links` holds a prompt's prompt neighbours)."""
    prompts = [r for r in records if r["kind"] == "prompt" and r.get("session_id")]
    walks = [("session_id", ">", r["session_id"], r["seq"], "transcript") for r in prompts]
    out: dict[int, list[int]] = {}
    for side, seq in neighbour_walks(conn, walks):
        origin = prompts[side]["seq"]
        following = [n for n, _ in links.get(origin, []) if n > origin]
        if not following or seq < min(following):
            out.setdefault(origin, []).append(seq)
    return out


def _named_in(query: str) -> set[str]:
    """Capitalised names in a query ("Ada", "Ada's" -> Ada)."""
    names = set()
    for word in re.findall(r"\b[A-Z][\w.-]*(?:'s)?", query):
        names.add(word[:-2] if word.endswith("'s") else word)
    return names


def _visible_rows(conn, seqs: Iterable[int], view: View, scope: "_Scope") -> dict[int, dict[str, Any]]:
    """The visible, live heads among `seqs` with the columns ranking and filtering need, without
    decoding every JSON blob. Rows that fail the scope's filter expression are left out in SQL."""
    dialect = dialect_of(conn)
    condition = scope.expr.sql("r", dialect) if scope.expr is not None else None
    parse_metadata = bool(scope.metadata)
    out: dict[int, dict[str, Any]] = {}
    for seq, row in Records.visible_heads(conn, seqs, view, _LIGHT_COLUMNS, condition).items():
        record = dict(row)
        del record["meets"]
        record["metadata"] = json.loads(record["metadata"] or "{}") if parse_metadata else {}
        out[seq] = record
    return out


def _as_tuple(value: Any) -> tuple[str, ...]:
    if isinstance(value, (list, tuple, set)):
        return tuple(str(v) for v in value)
    return (str(value),)


# --- scoring helpers ----------------------------------------------------------------


_VOLATILE = re.compile(r"\b\d{4}-\d{2}-\d{2}(?:[ T]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?Z?)?\b|\b\d{1,2}:\d{2}(?::\d{2})?\b")


def same_key(record: dict[str, Any]) -> str:
    """What a record says, for telling repeats apart: its kind and text, case, spacing and times aside.
    Two records with one key are one memory said twice (a prompt sent again, a test run repeated)."""
    text = _VOLATILE.sub("", str(record.get("text") or record.get("title") or ""))
    return f"{record.get('kind')}:{' '.join(text.lower().split())}"


def title_key(record: dict[str, Any]) -> str:
    """Hits of one kind under one title ("annas: download", "Updated todo list (3 items, 0 done)")."""
    if record.get("kind") == "transcript":
        return ""  # a reply passage is titled by the request it answers: the turn's passages each say their own
    title = " ".join(str(record.get("title") or "").lower().split())
    return f"{record.get('kind')}:{title}" if title else ""


def _head_key(text: Any) -> str:
    """The first 48 characters of a record's text as `same_key` reads them (what the light rows hold)."""
    return " ".join(_VOLATILE.sub("", str(text or "")[:48]).lower().split())[:24]


def _normalise(scores: dict[int, float]) -> dict[int, float]:
    """Min-max to 0..1 within one candidate list (the best gets 1)."""
    if not scores:
        return {}
    high = max(scores.values())
    low = min(scores.values())
    if high - low < 1e-9:
        return {s: 1.0 for s in scores}
    return {s: (v - low) / (high - low) for s, v in scores.items()}


def _clip01(value: float) -> float:
    return 0.0 if value < 0 else 1.0 if value > 1 else value
