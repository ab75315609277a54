"""Finding records of the memory layers: a fallback chain, so a search of a non-empty memory finds something.

1. semantic: the retrieval engine's hybrid search (`memory_anchor.worker.index.search.SearchService`)
   when the worker has one;
2. keyword: BM25 over the records' own words (memory_anchor/worker/store/keywords.py), always available;
3. most recent: the latest records matching the filters.

Each step only runs when the previous ones found fewer than asked for, and each
hit says which step found it (`match`). With a non-empty memory in scope the
chain never returns nothing. Filters are exact column matches (a list = IN);
`statuses` and `time_range` (on `happened_at`) are applied at every step.
"""

from __future__ import annotations

import logging
import math
import time
from typing import Any, Callable

from memory_anchor.worker.store.keywords import ColumnWeights, KeywordQuery, keyword_index
from memory_anchor.worker.memory.common import keyword_words
from memory_anchor.worker.store.db import Database
from memory_anchor.worker.store.dialect import SQLITE, dialect_of, truth
from memory_anchor.worker.store.records import Records, View

log = logging.getLogger(__name__)

Filters = dict[str, Any]


class Finder:
    def __init__(self, db: Database, search: Callable[[], Any] | None = None):
        self.db = db
        # A callable so that the heavy search engine is built only when first used.
        self._search = search

    def find(
        self,
        query: str,
        view: View,
        *,
        filters: Filters,
        limit: int = 10,
        statuses: tuple[str, ...] = ("active",),
        time_range: tuple[float | None, float | None] = (None, None),
        recent_fallback: bool = True,
        conn=None,
    ) -> list[dict[str, Any]]:
        conn = conn or self.db.reader()
        found: dict[str, dict[str, Any]] = {}
        if query.strip():
            for hit in self._semantic(query, view, filters, limit, time_range):
                if self._keep(hit, filters, statuses, time_range):
                    found.setdefault(hit["id"], {**hit, "match": "semantic"})
            if len(found) < limit:
                for hit in self._keyword(conn, query, view, filters, limit * 3, statuses, time_range):
                    found.setdefault(hit["id"], {**hit, "match": "keyword"})
        if recent_fallback and not found:
            for hit in self.recent(conn, view, filters=filters, limit=limit, statuses=statuses, time_range=time_range):
                found.setdefault(hit["id"], {**hit, "match": "recent", "score": 0.0})
        hits = sorted(found.values(), key=lambda h: -float(h.get("score") or 0.0))
        return hits[:limit]

    # --- the three steps --------------------------------------------------------------

    def _semantic(self, query, view, filters, limit, time_range) -> list[dict[str, Any]]:
        if self._search is None:
            return []
        try:
            engine = self._search()
            if engine is None:
                return []
            search_filters = {
                k: v for k, v in filters.items()
                if k in ("kind", "layer", "project", "agent_id", "session_id", "type")
                and not (isinstance(v, (list, tuple, set)) and None in v)  # post-filtered by _keep
            }  # fmt: skip
            hits = engine.search(query, view, filters=search_filters, top_k=limit * 2, time_range=time_range, fallback=False)
        except Exception:  # a broken engine must not break recall; the next steps run
            log.warning("semantic search failed; falling back to keywords", exc_info=True)
            return []
        return [h for h in hits if isinstance(h, dict) and h.get("id")]

    def _keyword(self, conn, query, view, filters, limit, statuses, time_range) -> list[dict[str, Any]]:
        words = keyword_words(query)
        if not words:
            return []
        where, params = [truth(dialect_of(conn), True)], []
        for column, value in filters.items():
            if value is None:
                continue
            if isinstance(value, (list, tuple, set)):
                clause, values = _in_clause(column, value, dialect_of(conn))
                where.append(clause)
                params.extend(values)
            else:
                where.append(f"r.{column} = ?")
                params.append(value)
        try:
            ranked = keyword_index(conn).search(
                conn, KeywordQuery(words), " AND ".join(where), params, max(limit, 50), ColumnWeights()
            )
        except Exception:
            log.warning("keyword search failed for %r", query, exc_info=True)
            return []
        ranks = dict(ranked)
        visible = Records.visible_seqs(conn, ranks, view)
        records = Records.by_seqs(conn, visible)
        top = max([ranks[s] for s in visible] or [1.0]) or 1.0
        out = []
        for seq in visible:
            record = records[seq]
            if not self._keep(record, filters, statuses, time_range):
                continue
            out.append({**record, "score": max(ranks[seq], 0.0) / top if top > 0 else 0.0})
        return out

    def recent(self, conn, view, *, filters, limit, statuses=("active",), time_range=(None, None)) -> list[dict[str, Any]]:
        extra, params = _time_where(time_range)
        plain = {}
        for column, value in filters.items():
            if isinstance(value, (list, tuple, set)) and None in value:
                clause, values = _in_clause(column, value)
                extra = f"{extra} AND {clause}" if extra else clause
                params.extend(values)
            else:
                plain[column] = value
        rows, _ = Records.query(
            conn, view, filters=plain, statuses=statuses, order="happened_at DESC",
            limit=limit, extra_where=extra, extra_params=params,
        )  # fmt: skip
        return rows

    # --- helpers -------------------------------------------------------------------

    @staticmethod
    def _keep(record, filters, statuses, time_range) -> bool:
        if statuses and record.get("status", "active") not in statuses:
            return False
        for column, value in filters.items():
            if value is None:
                continue
            have = record.get(column)
            if isinstance(value, (list, tuple, set)):
                if have not in value:
                    return False
            elif have != value:
                return False
        start, end = time_range
        happened = record.get("happened_at")
        if isinstance(happened, str):  # a wire-shaped hit from the search engine
            return True
        if start is not None and (happened is None or happened < start):
            return False
        if end is not None and (happened is None or happened >= end):
            return False
        return True


def _in_clause(column: str, values, dialect: str = SQLITE) -> tuple[str, list[Any]]:
    """`column IN (...)`, where a None in the list also matches NULL."""
    present = [v for v in values if v is not None]
    parts = []
    if present:
        parts.append(f"r.{column} IN ({','.join('?' * len(present))})")
    if None in values:
        parts.append(f"r.{column} IS NULL")
    return "(" + " OR ".join(parts or [truth(dialect, False)]) + ")", present


def _time_where(time_range) -> tuple[str, list[Any]]:
    start, end = time_range
    parts, params = [], []
    if start is not None:
        parts.append("r.happened_at >= ?")
        params.append(start)
    if end is not None:
        parts.append("r.happened_at < ?")
        params.append(end)
    return " AND ".join(parts), params


def boosted(score: float, happened_at: float | None, confidence: float | None, at: float | None = None) -> float:
    """Recency and confidence boosts: a recent, confident memory ranks higher."""
    at = at or time.time()
    age_days = max(0.0, (at - (happened_at or at)) / 86_400.0)
    recency = math.exp(-age_days / 30.0)
    conf = 1.0 if confidence is None else max(0.0, min(1.0, confidence))
    return score * (0.85 + 0.15 * recency) * (0.7 + 0.3 * conf)
