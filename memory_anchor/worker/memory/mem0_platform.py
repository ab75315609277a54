"""mem0's platform API over the memory service: the same records, mem0's shapes.

Everything here translates: mem0's requests into MemoryService calls, and
records into mem0's memory, page, history and entity objects. app_id, which
has no column here, lives in the memory's metadata.
"""

from __future__ import annotations

import ast
import json
from typing import Any

from memory_anchor.schemas.mem0 import Mem0AddRequest, Mem0SearchRequest, Mem0UpdateRequest
from memory_anchor.schemas.memories import AddMemoryRequest, SearchRequest, UpdateMemoryRequest
from memory_anchor.worker.memory.memories import MemoryService
from memory_anchor.worker.store.records import MAIN, NotFound, RecordError, Records, first_written, iso, resolve_view

ENTITY_KEYS = ("user_id", "agent_id", "app_id", "run_id")
ENTITY_TYPES = {"user": "user_id", "agent": "agent_id", "app": "app_id", "run": "run_id"}


class Mem0Platform:
    def __init__(self, services):
        self.services = services
        self.memories = MemoryService(services)

    # --- writes ---------------------------------------------------------------

    def add(self, body: Mem0AddRequest, *, branch: str = MAIN, actor: str | None = None) -> list[dict[str, Any]]:
        ids = {key: getattr(body, key) for key in ENTITY_KEYS}
        for key in ENTITY_KEYS:  # the v3 API takes the entity ids inside `filters`
            if ids[key] is None and isinstance(body.filters.get(key), str):
                ids[key] = body.filters[key]
        metadata = dict(body.metadata)
        if ids["app_id"]:
            metadata["app_id"] = ids["app_id"]
        request = AddMemoryRequest(
            messages=[{"role": m.role, "content": m.content} for m in body.messages],
            user_id=ids["user_id"], agent_id=ids["agent_id"], run_id=ids["run_id"],
            metadata=metadata, infer=body.infer, timestamp=body.timestamp, branch=branch,
        )  # fmt: skip
        return self.memories.add(request, actor=actor)

    def update(self, memory_id: str, body: Mem0UpdateRequest, *, branch: str = MAIN, actor: str | None = None):
        if body.text is None and body.metadata is None:  # only fields without meaning here: nothing changes
            return self.get(memory_id, branch=branch)
        text = body.text if body.text is not None else self.memories.get(memory_id, branch=branch)["text"]
        record = self.memories.update(
            memory_id, UpdateMemoryRequest(text=text, metadata=body.metadata), branch=branch, actor=actor
        )
        return self.memory(record)

    def delete_entity(self, entity_type: str, name: str, *, branch: str = MAIN, actor: str | None = None) -> int:
        key = ENTITY_TYPES.get(entity_type)
        if key is None:
            raise RecordError(f"entity type must be one of {', '.join(ENTITY_TYPES)}, not {entity_type!r}")
        # No 404 for an entity with nothing left: reset() deletes users, agents and apps
        # in turn, and a memory owned by two of them is gone after the first.
        return self.memories.delete_all({key: name}, branch=branch, actor=actor)

    def batch_update(self, items, *, branch: str = MAIN, actor: str | None = None) -> int:
        with self.services.db.transaction() as conn:
            view = resolve_view(conn, branch)
            seqs = []
            for item in items:
                current = Records.get(conn, item.memory_id, view)
                if current is None:
                    raise NotFound(f"memory {item.memory_id} not found")
                changes: dict[str, Any] = {}
                if item.text is not None:
                    from memory_anchor.core.redact import redact_text

                    changes["text"] = redact_text(item.text)
                if item.metadata is not None:
                    changes["metadata"] = {**current["metadata"], **item.metadata}
                record = Records.update(conn, item.memory_id, branch=branch, actor=actor or "api", view=view, **changes)
                seqs.append(record["seq"])
        self.services.indexer.flush(seqs)
        return len(seqs)

    def batch_delete(self, ids: list[str], *, branch: str = MAIN, actor: str | None = None) -> int:
        with self.services.db.transaction() as conn:
            view = resolve_view(conn, branch)
            for memory_id in ids:
                if Records.get(conn, memory_id, view) is None:
                    raise NotFound(f"memory {memory_id} not found")
                Records.delete(conn, memory_id, branch=branch, actor=actor or "api", view=view)
        return len(ids)

    # --- reads ----------------------------------------------------------------

    def get(self, memory_id: str, *, branch: str = MAIN) -> dict[str, Any]:
        return self.memory(self.memories.get(memory_id, branch=branch))

    def page(self, filters: dict[str, Any], *, page: int, page_size: int, branch: str = MAIN):
        records, total = self.memories.list(
            filters, branch=branch, limit=page_size, offset=(page - 1) * page_size
        )
        return [self.memory(r, first) for r, first in zip(records, self._first_stored(records))], total

    def search(self, body: Mem0SearchRequest, *, branch: str = MAIN) -> list[dict[str, Any]]:
        request = SearchRequest(
            query=body.query, filters=body.filters, top_k=body.top_k, threshold=body.threshold,
            mode="keyword" if body.keyword_search else "hybrid", branch=branch,
        )  # fmt: skip
        hits = self.memories.search(request)
        return [self.memory(h, first) for h, first in zip(hits, self._first_stored(hits))]

    def history(self, memory_id: str, *, branch: str = MAIN) -> list[dict[str, Any]]:
        versions = self.memories.history(memory_id, branch=branch)
        out, previous = [], None
        for version in versions:
            deleted = version["op"] == "delete"
            event = "DELETE" if deleted else ("ADD" if previous is None else "UPDATE")
            out.append({
                "id": f"{memory_id}:{version['version']}",
                "memory_id": memory_id,
                "event": event,
                "old_memory": previous,
                "new_memory": None if deleted else version["text"],
                "user_id": version.get("user_id"),
                "agent_id": version.get("agent_id"),
                "run_id": version.get("run_id"),
                "metadata": version.get("metadata") or {},
                "actor": version.get("actor"),
                "created_at": iso(versions[0]["created_at"]),
                "updated_at": iso(version["created_at"]),
            })  # fmt: skip
            previous = None if deleted else version["text"]
        return out

    def entities(self, *, branch: str = MAIN) -> list[dict[str, Any]]:
        """Every user, agent, app and run that owns live memories, with counts."""
        conn = self.services.db.reader()
        records, _ = Records.query(conn, resolve_view(conn, branch), filters={"kind": "memory"}, limit=-1)
        found: dict[tuple[str, str], dict[str, Any]] = {}
        for record in records:
            for entity_type, key in ENTITY_TYPES.items():
                name = (record.get("metadata") or {}).get(key) if key == "app_id" else record.get(key)
                if not name or not isinstance(name, str):
                    continue
                entry = found.setdefault((entity_type, name), {"n": 0, "first": record["created_at"], "last": 0.0})
                entry["n"] += 1
                entry["first"] = min(entry["first"], record["created_at"])
                entry["last"] = max(entry["last"], record["created_at"])
        return [
            {"id": f"{t}:{name}", "name": name, "type": t, "total_memories": e["n"],
             "created_at": iso(e["first"]), "updated_at": iso(e["last"])}
            for (t, name), e in sorted(found.items())
        ]  # fmt: skip

    # --- shapes ---------------------------------------------------------------

    def memory(self, record: dict[str, Any], first_stored: float | None = None) -> dict[str, Any]:
        """A record as mem0's memory object."""
        metadata = dict(record.get("metadata") or {})
        app_id = metadata.pop("app_id", None)
        if first_stored is None:
            first_stored = self._first_stored([record])[0]
        out = {
            "id": record["id"],
            "memory": record.get("text", ""),
            "user_id": record.get("user_id"),
            "agent_id": record.get("agent_id"),
            "app_id": app_id if isinstance(app_id, str) else None,
            "run_id": record.get("run_id"),
            "hash": record.get("content_hash"),
            "metadata": metadata,
            "categories": [],
            "created_at": iso(first_stored),
            "updated_at": iso(record.get("created_at")),
            "immutable": False,
            "expiration_date": None,
        }
        if "score" in record:
            out["score"] = round(float(record["score"]), 6)
        return out

    def _first_stored(self, records: list[dict[str, Any]]) -> list[float | None]:
        """When each record's first version was stored (mem0's created_at)."""
        ids = list({r["id"] for r in records})
        if not ids:
            return []
        conn = self.services.db.reader()
        first = first_written(conn, ids)
        return [first.get(r["id"]) for r in records]


def filters_from_params(query: dict[str, str]) -> dict[str, Any]:
    """delete_all's filters: entity ids as query parameters, or `filters` as JSON.

    mem0's SDK puts a `filters` dict into the query string with Python's str(),
    so a Python literal is read too (with literal_eval, which runs no code).
    """
    filters: dict[str, Any] = {k: query[k] for k in ENTITY_KEYS if query.get(k)}
    raw = query.get("filters")
    if raw:
        try:
            parsed = json.loads(raw)
        except ValueError:
            try:
                parsed = ast.literal_eval(raw)
            except (ValueError, SyntaxError, MemoryError, RecursionError):
                raise RecordError("filters must be a JSON object", code="invalid_filter")
        if not isinstance(parsed, dict):
            raise RecordError("filters must be a JSON object", code="invalid_filter")
        filters = {**parsed, **filters}
    return filters
