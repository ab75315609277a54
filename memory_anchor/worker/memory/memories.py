"""The mem0-compatible memory service: add, search, get, list, update, delete, history.

Memories written here are records of kind `memory`, scoped by mem0's
user_id/agent_id/run_id (and optionally a project), on the caller's branch.
"""

from __future__ import annotations

import json
from typing import Any

from memory_anchor.schemas.memories import AddMemoryRequest, SearchRequest, UpdateMemoryRequest
from memory_anchor.worker.store import filters as filter_language
from memory_anchor.worker.store.dialect import dialect_of
from memory_anchor.worker.store.filters import Filter
from memory_anchor.worker.store.records import MAIN, NotFound, RecordError, Records, ids_with_prefix, parse_time, resolve_view

SCOPE_KEYS = ("user_id", "agent_id", "run_id", "session_id", "project")
LIST_LIMIT_MAX = 1000


class MemoryService:
    def __init__(self, services):
        self.services = services
        self.db = services.db

    # --- writes ---------------------------------------------------------------

    def add(self, request: AddMemoryRequest, *, actor: str | None = None) -> list[dict[str, Any]]:
        """Store each message as a memory (infer=false) or let fact management decide (infer=true);
        returns once the new memories are searchable."""
        if self.infers(request):
            inferred = self._infer(request, request.branch or MAIN, _happened(request), actor)
            if inferred is not None:
                return inferred
        [(results, seqs)] = self.store_many([(request, actor)])
        self.services.indexer.flush(seqs)
        return results

    def infers(self, request: AddMemoryRequest) -> bool:
        """Whether this add goes through fact extraction rather than being stored as given."""
        return bool(request.infer) and getattr(self.services, "facts", None) is not None and self.services.llm.available

    def store_many(self, adds: list[tuple[AddMemoryRequest, str | None]]) -> list[tuple[list[dict[str, Any]], list[int]]]:
        """Store several adds' messages as given, in one transaction (concurrent adds share a
        commit: services.memory_adds); for each add, its results and the seqs to embed."""
        from memory_anchor.core.redact import redact, redact_text

        out = []
        with self.db.transaction() as conn:
            for request, actor in adds:
                happened = _happened(request)
                branch = request.branch or MAIN
                resolve_view(conn, branch)  # a clear 404 for an unknown branch
                results, seqs = [], []
                for role, text in request.texts():
                    record = Records.put(
                        conn,
                        "memory",
                        redact_text(text),
                        branch=branch,
                        actor=actor or request.agent_id or request.user_id or "api",
                        project=request.project or "",
                        user_id=request.user_id,
                        agent_id=request.agent_id,
                        run_id=request.run_id,
                        metadata=redact({**request.metadata, "role": role}),
                        happened_at=happened,
                    )
                    seqs.append(record["seq"])
                    results.append({"id": record["id"], "memory": record["text"], "event": "ADD"})
                out.append((results, seqs))
        return out

    def make_searchable(self, seqs: list[int]) -> None:
        """Have these versions embedded: on one machine the indexer's thread does it for every add
        waiting (searches wait for it); a team database's follower embeds them now."""
        soon = getattr(self.services.indexer, "index_soon", None)
        if soon is not None:
            soon(seqs)
        else:
            self.services.indexer.flush(seqs)

    def _infer(self, request: AddMemoryRequest, branch: str, happened: float | None, actor: str | None):
        """Fact extraction with Claude when it is available; None means store as given."""
        manager = getattr(self.services, "facts", None)
        if manager is None or not self.services.llm.available:
            return None
        return manager.add_from_messages(request, branch=branch, happened_at=happened, actor=actor)

    def update(self, memory_id: str, request: UpdateMemoryRequest, *, branch: str = MAIN, actor: str | None = None):
        from memory_anchor.core.redact import redact, redact_text

        changes: dict[str, Any] = {"text": redact_text(request.text)}
        with self.db.transaction() as conn:
            if request.metadata is not None:
                current = Records.get(conn, memory_id, resolve_view(conn, branch))
                if current is None:
                    raise NotFound(f"memory {memory_id} not found")
                changes["metadata"] = redact({**current["metadata"], **request.metadata})
            record = Records.update(conn, memory_id, branch=branch, actor=actor or "api", **changes)
        self.services.indexer.flush([record["seq"]])
        return record

    def delete(self, memory_id: str, *, branch: str = MAIN, actor: str | None = None) -> dict[str, Any]:
        with self.db.transaction() as conn:
            return Records.delete(conn, memory_id, branch=branch, actor=actor or "api")

    def delete_all(self, filters: dict[str, Any], *, branch: str = MAIN, actor: str | None = None) -> int:
        scope, expr = _scope_and_expr(filters)
        if not scope and expr is None:
            raise RecordError("delete_all needs at least one of user_id, agent_id, run_id, project (or other filters)")
        count = 0
        with self.db.transaction() as conn:
            extra = _filter_sql(conn, expr)
            view = resolve_view(conn, branch)
            while True:
                page, _ = Records.query(
                    conn, view, filters={"kind": "memory", **scope}, statuses=None, limit=500,
                    extra_where=extra[0], extra_params=extra[1],
                )  # fmt: skip
                if not page:
                    break
                for record in page:
                    Records.delete(conn, record["id"], branch=branch, actor=actor or "api", view=view)
                    count += 1
        return count

    # --- reads ----------------------------------------------------------------

    def get(self, memory_id: str, *, branch: str = MAIN, as_of: Any = None) -> dict[str, Any]:
        conn = self.db.reader()
        view = resolve_view(conn, branch, as_of)
        record = Records.get(conn, self._whole_id(conn, memory_id), view)
        if record is None:
            raise NotFound(f"memory {memory_id} not found")
        return record

    def history(self, memory_id: str, *, branch: str = MAIN, as_of: Any = None) -> list[dict[str, Any]]:
        conn = self.db.reader()
        versions = Records.history(conn, self._whole_id(conn, memory_id), resolve_view(conn, branch, as_of))
        if not versions:
            raise NotFound(f"memory {memory_id} not found")
        return versions

    @staticmethod
    def _whole_id(conn, memory_id: str) -> str:
        """A whole id as given; the first characters of one (as `search` and the briefing print
        them) when they name exactly one record. Two or more: a 409 that lists them."""
        if len(memory_id) >= 36 or len(memory_id) < 4:
            return memory_id
        ids = ids_with_prefix(conn, memory_id, limit=11)  # enough to say it names more than one
        if len(ids) > 1:
            raise RecordError(f"{memory_id} names {len(ids)} memories ({', '.join(ids[:5])}): give more of the id",
                              code="ambiguous_id", status=409)  # fmt: skip
        return ids[0] if ids else memory_id

    def list(
        self,
        filters: dict[str, Any],
        *,
        branch: str = MAIN,
        as_of: Any = None,
        limit: int = 100,
        offset: int = 0,
        kinds: tuple[str, ...] = ("memory",),
    ) -> tuple[list[dict[str, Any]], int]:
        if not 1 <= limit <= LIST_LIMIT_MAX:
            raise RecordError(f"limit must be between 1 and {LIST_LIMIT_MAX}")
        conn = self.db.reader()
        scope, expr = _scope_and_expr(filters)
        extra = _filter_sql(conn, expr)
        return Records.query(
            conn, resolve_view(conn, branch, as_of), filters={"kind": list(kinds), **scope}, limit=limit, offset=offset,
            extra_where=extra[0], extra_params=extra[1],
        )  # fmt: skip

    def search(self, request: SearchRequest) -> list[dict[str, Any]]:
        conn = self.db.reader()
        view = resolve_view(conn, request.branch or MAIN, request.as_of)
        filters = {k: v for k, v in request.filters.items() if v is not None}
        for key in ("user_id", "agent_id", "run_id"):
            if getattr(request, key) and key not in filters:
                filters[key] = getattr(request, key)
        if "kind" not in filters:
            filters["kind"] = DEFAULT_SEARCH_KINDS
        try:
            after = parse_time(request.after) if request.after is not None else None
            before = parse_time(request.before) if request.before is not None else None
        except ValueError as exc:
            raise RecordError(str(exc), code="invalid_timestamp")
        return self.services.search.search(
            request.query,
            view,
            filters=filters,
            top_k=request.top_k,
            threshold=request.threshold,
            mode=request.mode,
            time_range=(after, before),
        )


# What a search covers unless `filters.kind` says otherwise. Identity is never searched.
DEFAULT_SEARCH_KINDS = ["memory", "observation", "summary", "event", "fact", "relation", "operation", "prompt", "transcript"]


def _happened(request: AddMemoryRequest) -> float | None:
    try:
        return parse_time(request.timestamp) if request.timestamp is not None else None
    except ValueError as exc:
        raise RecordError(str(exc), code="invalid_timestamp")


def _scope_and_expr(filters: dict[str, Any]) -> tuple[dict[str, Any], Filter | None]:
    """mem0 filters as (scope ids the record index narrows on, the rest compiled to SQL)."""
    plain, rest = filter_language.split({k: v for k, v in filters.items() if v is not None})
    scope = {k: v for k, v in plain.items() if k in SCOPE_KEYS and v not in ("", [])}
    others = {k: v for k, v in plain.items() if k not in scope}
    if others:
        rest = {"AND": [rest, others]} if rest else others
    return scope, (filter_language.parse(rest) if rest else None)


def _filter_sql(conn, expr: Filter | None) -> tuple[str, list[Any]]:
    """The compiled filter as a WHERE fragment over `records r`, in the connection's dialect."""
    return expr.sql("r", dialect_of(conn)) if expr is not None else ("", [])


def filters_from_query(query: dict[str, str]) -> dict[str, Any]:
    """Scope filters from a query string (`?user_id=...&metadata={...}`)."""
    filters: dict[str, Any] = {k: query[k] for k in SCOPE_KEYS if query.get(k)}
    if query.get("metadata"):
        try:
            filters["metadata"] = json.loads(query["metadata"])
        except json.JSONDecodeError:
            raise RecordError("metadata must be a JSON object")
    return filters
