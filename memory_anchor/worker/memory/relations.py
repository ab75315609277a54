"""Relations: entity -relation-> entity, with properties, confidence and a validity
interval. Invalidating a relation sets `valid_to` (status `invalidated`); it is
never deleted, so the graph "as it was" stays answerable.

Each relation is a record of kind `relation`; its `fact_key` is
`subject|relation|object` (normalised) so that writing the same triple again
updates it instead of duplicating it. Graph queries walk records in the caller's
view (branch + as_of), breadth first, up to `depth` hops, in both directions.
"""

from __future__ import annotations

from typing import Any

from memory_anchor.core.redact import redact_text
from memory_anchor.schemas.memory_model import GraphQuery, RelationIn
from memory_anchor.worker.memory.common import DEFAULT_AGENT, agent_actor, now, to_epoch
from memory_anchor.worker.store.db import Database
from memory_anchor.worker.store.dialect import data_key_in, dialect_of
from memory_anchor.worker.store.records import MAIN, NotFound, RecordError, Records, resolve_view


def entity_key(name: str) -> str:
    return " ".join(name.strip().lower().split())


def relation_key(name: str) -> str:
    return "_".join(name.strip().lower().replace("-", "_").split())


class RelationStore:
    def __init__(self, db: Database):
        self.db = db

    def write(self, relation: RelationIn, *, actor: str | None = None, conn=None) -> dict[str, Any]:
        if conn is None:
            with self.db.transaction() as c:
                return self.write(relation, actor=actor, conn=c)
        agent_id = relation.agent_id or DEFAULT_AGENT
        actor = actor or agent_actor(agent_id)
        branch = relation.branch or MAIN
        view = resolve_view(conn, branch)
        # Redacted before the keys are made of them: a key is the words lower-cased, which the
        # storage door's redaction could no longer recognise as the secret they were.
        relation = relation.model_copy(update={"subject": redact_text(relation.subject), "object": redact_text(relation.object)})
        subject, rel, obj = entity_key(relation.subject), relation_key(relation.relation), entity_key(relation.object)
        key = f"{subject}|{rel}|{obj}"
        existing, _ = Records.query(conn, view, filters={"kind": "relation", "fact_key": key, "project": relation.project}, limit=1)
        if relation.valid_from is not None:
            valid_from = to_epoch(relation.valid_from, "valid_from")
        else:  # re-stating a known relation keeps the time it became true
            valid_from = float(existing[0]["data"].get("valid_from") or now()) if existing else now()
        values = dict(
            text=f"{relation.subject} {rel.replace('_', ' ')} {relation.object}", layer=None, status="active",
            project=relation.project, agent_id=agent_id, type=rel, title=rel, confidence=relation.confidence,
            fact_key=key, happened_at=valid_from,
            data={"subject": relation.subject, "relation": rel, "object": relation.object, "subject_key": subject,
                  "object_key": obj, "properties": relation.properties, "valid_from": valid_from, "valid_to": None},
        )  # fmt: skip
        if existing:
            return Records.update(conn, existing[0]["id"], branch=branch, actor=actor, reason="UPDATE", view=view, **values)
        return Records.put(conn, "relation", values.pop("text"), branch=branch, actor=actor, reason="ADD", **values)

    def invalidate(self, relation_id: str, *, actor: str, reason: str = "INVALIDATE", branch: str = MAIN,
                   valid_to: Any = None) -> dict[str, Any]:  # fmt: skip
        with self.db.transaction() as conn:
            view = resolve_view(conn, branch)
            current = Records.get(conn, relation_id, view)
            if current is None or current["kind"] != "relation":
                raise NotFound(f"relation {relation_id} not found")
            if current["status"] != "active":
                raise RecordError("this relation is already invalidated", code="conflict", status=409)
            end = to_epoch(valid_to, "valid_to") if valid_to is not None else now()
            data = {**current["data"], "valid_to": end}
            return Records.update(conn, relation_id, branch=branch, actor=actor, reason=reason, view=view,
                                  status="invalidated", data=data)  # fmt: skip

    def graph(self, query: GraphQuery) -> dict[str, Any]:
        """Relations reachable from `entity` within `depth` hops, valid at `at` (default now)."""
        conn = self.db.reader()
        view = resolve_view(conn, query.branch or MAIN, query.as_of)
        at = to_epoch(query.at, "at") if query.at is not None else now()
        rel_filter = relation_key(query.relation_type) if query.relation_type else None
        start = entity_key(query.entity)
        frontier, seen_entities = {start}, {start}
        edges: dict[str, dict[str, Any]] = {}
        for hop in range(1, query.depth + 1):
            if not frontier:
                break
            names = list(frontier)
            extra = data_key_in(dialect_of(conn), "r", ["subject_key", "object_key"], len(names))
            filters: dict[str, Any] = {"kind": "relation"}
            if query.project is not None:
                filters["project"] = query.project
            if rel_filter:
                filters["type"] = rel_filter
            rows, _ = Records.query(conn, view, filters=filters, statuses=("active", "invalidated"), limit=10_000,
                                    extra_where=extra, extra_params=[*names, *names])  # fmt: skip
            next_frontier: set[str] = set()
            for row in rows:
                data = row["data"]
                valid_to = data.get("valid_to")
                if float(data.get("valid_from") or 0) > at or (valid_to is not None and float(valid_to) <= at):
                    continue
                if row["id"] not in edges:
                    edges[row["id"]] = {
                        "id": row["id"], "subject": data["subject"], "relation": data["relation"], "object": data["object"],
                        "properties": data.get("properties") or {}, "confidence": row["confidence"],
                        "valid_from": data.get("valid_from"), "valid_to": valid_to, "depth": hop, "status": row["status"],
                    }  # fmt: skip
                for key in (data["subject_key"], data["object_key"]):
                    if key not in seen_entities:
                        seen_entities.add(key)
                        next_frontier.add(key)
            frontier = next_frontier
        return {"entity": query.entity, "relations": list(edges.values()), "entities": sorted(seen_entities)}
