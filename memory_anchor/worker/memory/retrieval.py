"""Retrieval across layers: what `search_memory` and recall return.

- L0 identity is never searched: it is always in the context, in full;
- L1 active context is read by key (`get_active_context`), not searched;
- L2 events (and observations, summaries): time range (from the query's time
  phrase) plus meaning, scoped to the asking agent unless `all_agents`;
- L3 facts: meaning plus keywords, shared by all agents, boosted by their
  effective (decayed) confidence;
- L4 operations: file name and content.

Each layer uses the fallback chain of `Finder`; if every layer comes back empty
the most recent facts and events are returned, so a search of a non-empty
memory never returns nothing. `recall` (get_context): identity first, whatever
the search does.
"""

from __future__ import annotations

import logging
import math
from typing import Any

from memory_anchor.schemas.memory_model import (
    ACTIVE_CONTEXT,
    EVENT_LOG,
    IDENTITY,
    OPERATIONAL,
    VERIFIED_FACT,
    MemorySearch,
)
from memory_anchor.worker.index.timewords import time_window
from memory_anchor.worker.memory.agents import agent_scope
from memory_anchor.worker.memory.facts import decorate
from memory_anchor.worker.memory.finder import boosted
from memory_anchor.worker.store.records import MAIN, RecordError, resolve_view

log = logging.getLogger(__name__)

DEFAULT_LAYERS = (VERIFIED_FACT, EVENT_LOG, OPERATIONAL)
L2_KINDS = ["event", "observation", "summary"]


def _layer_filters(request: MemorySearch, layer: str) -> dict[str, Any]:
    """The record filters of a layer's scope: facts are shared by all agents, events are per agent."""
    filters: dict[str, Any] = {"kind": "fact" if layer == VERIFIED_FACT else L2_KINDS}
    if request.project is not None:
        filters["project"] = request.project
    if layer == EVENT_LOG and not request.all_agents:
        filters["agent_id"] = agent_scope(request.agent_id)
    return filters


class Retrieval:
    def __init__(self, model):
        self.model = model  # MemoryModel: identity, facts, events, operations, finder
        self.db = model.db

    def search(self, request: MemorySearch) -> list[dict[str, Any]]:
        layers = request.layers or list(DEFAULT_LAYERS)
        if IDENTITY in layers:
            raise RecordError(
                "the identity layer is never searched: it is always in the context in full (get_constitution)",
                code="identity_not_searchable",
            )
        if ACTIVE_CONTEXT in layers:
            raise RecordError("active context is read by key with get_active_context, not searched", code="invalid_layer")
        conn = self.db.reader()
        view = resolve_view(conn, request.branch or MAIN, request.as_of)
        window = time_window(request.query)
        start, end, rest = (window.start, window.end, window.rest) if window else (None, None, request.query)
        query = rest or request.query
        per_layer: dict[str, list[dict[str, Any]]] = {}
        finder = self.model.finder
        if VERIFIED_FACT in layers:
            filters = _layer_filters(request, VERIFIED_FACT)
            hits = finder.find(query, view, filters=filters, limit=request.limit, recent_fallback=False, conn=conn)
            per_layer[VERIFIED_FACT] = [self._fact_hit(h) for h in hits]
        if EVENT_LOG in layers:
            filters = _layer_filters(request, EVENT_LOG)
            time_range = (start, end)
            hits = []
            if rest.strip():
                hits = finder.find(query, view, filters=filters, limit=request.limit, time_range=time_range,
                                   recent_fallback=False, conn=conn)  # fmt: skip
            if start is not None:  # "what did we finish last week": everything in the range counts
                seen = {h["id"] for h in hits}
                in_range = finder.recent(conn, view, filters=filters, limit=request.limit, time_range=time_range)
                hits += [{**h, "match": "time_range", "score": 0.3} for h in in_range if h["id"] not in seen]
            per_layer[EVENT_LOG] = [self._hit(h, EVENT_LOG) for h in hits]
        if OPERATIONAL in layers and request.project:
            try:
                hits = self.model.operations.search(query, request.project, limit=min(request.limit, 5))
            except Exception:
                log.warning("operations search failed", exc_info=True)
                hits = []
            per_layer[OPERATIONAL] = [self._hit(h, OPERATIONAL) for h in hits]
        # A question about a time ("what did we fix today") is a question about events first.
        results = self._merge(per_layer, request.limit, priority=EVENT_LOG if start is not None else None)
        if not results:
            results = self._most_recent(conn, view, request, layers)
        return results

    def _fact_hit(self, hit: dict[str, Any]) -> dict[str, Any]:
        record = decorate(hit) if isinstance(hit.get("data"), dict) else hit
        score = boosted(float(hit.get("score") or 0.0), _epoch(record.get("happened_at")),
                        record.get("effective_confidence", record.get("confidence")))  # fmt: skip
        return {**record, "layer": VERIFIED_FACT, "score": score}

    @staticmethod
    def _hit(hit: dict[str, Any], layer: str) -> dict[str, Any]:
        score = boosted(float(hit.get("score") or 0.0), _epoch(hit.get("happened_at")), None)
        return {**hit, "layer": layer, "score": score}

    @staticmethod
    def _merge(per_layer: dict[str, list[dict[str, Any]]], limit: int, priority: str | None = None) -> list[dict[str, Any]]:
        """Each layer that matched gets a fair share first (the `priority` layer all
        it can, leaving one slot to each other layer); the rest goes by score."""
        matched = {k: sorted(v, key=lambda h: -h["score"]) for k, v in per_layer.items() if v}
        if not matched:
            return []
        share = max(1, math.ceil(limit / len(matched)))
        chosen: dict[str, dict[str, Any]] = {}
        for layer, hits in matched.items():
            take = max(share, limit - (len(matched) - 1)) if layer == priority else share
            for hit in hits[:take]:
                chosen.setdefault(hit["id"], hit)
        rest = sorted((h for hits in matched.values() for h in hits[share:]), key=lambda h: -h["score"])
        for hit in rest:
            if len(chosen) >= limit:
                break
            chosen.setdefault(hit["id"], hit)
        ordered = sorted(chosen.values(), key=lambda h: (h["layer"] != priority, -h["score"]))
        return ordered[:limit]

    def _most_recent(self, conn, view, request: MemorySearch, layers: list[str]) -> list[dict[str, Any]]:
        """The last step of the fallback chain: the latest facts and events in scope."""
        out: list[dict[str, Any]] = []
        finder = self.model.finder
        if VERIFIED_FACT in layers:
            out += [{**decorate(h), "layer": VERIFIED_FACT, "match": "recent", "score": 0.0}
                    for h in finder.recent(conn, view, filters=_layer_filters(request, VERIFIED_FACT),
                                           limit=request.limit)]  # fmt: skip
        if EVENT_LOG in layers:
            out += [{**h, "layer": EVENT_LOG, "match": "recent", "score": 0.0}
                    for h in finder.recent(conn, view, filters=_layer_filters(request, EVENT_LOG),
                                           limit=request.limit)]  # fmt: skip
        out.sort(key=lambda h: -(h.get("happened_at") or 0))
        return out[: request.limit]

    def recall(self, request: MemorySearch) -> dict[str, Any]:
        """Identity in full, then search results: the identity never depends on the search."""
        identity = self.model.identity.context_items(request.project or "")
        try:
            results = self.search(request)
            error = None
        except RecordError:
            raise
        except Exception as exc:  # the search failing must not cost the identity
            log.exception("search failed during recall")
            results, error = [], f"search failed: {type(exc).__name__}"
        return {"identity": identity, "results": results, "error": error}


def _epoch(value: Any) -> float | None:
    return value if isinstance(value, (int, float)) else None
