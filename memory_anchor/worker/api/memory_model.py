"""REST endpoints of the memory model (docs/memory-model.md): identity, active context, event log,
facts, conflicts, approvals, relations, operations and cross-layer search.

Thin handlers: parse with the wire models of memory_anchor/schemas/memory_model.py,
run the work in `services.memory` (memory_anchor/worker/memory/), return JSON. Who is calling:
an agent sends `X-Memory-Anchor-Agent` (or `agent_id` in the body); identity
writes, approvals and conflict resolutions are for humans (the CLI) and are
refused when an agent header is present.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from memory_anchor.schemas.events import AGENT_HEADER
from memory_anchor.schemas.memory_model import (
    ActiveContextEnd,
    ActiveContextSet,
    AddMemoryIn,
    ConflictResolve,
    Decision,
    EventIn,
    EventSearch,
    ExtractRequest,
    FactIn,
    FactUpdate,
    GraphQuery,
    IdentityAdd,
    IdentityEdit,
    IdentityProposal,
    IdentityWrite,
    MemorySearch,
    OperationsReindex,
    PromoteRequest,
    RelationIn,
)
from memory_anchor.worker.api.middleware import read_json_object
from memory_anchor.worker.api.openapi import query_param
from memory_anchor.worker.api.params import as_of_param, branch_param, int_param, int_path
from memory_anchor.worker.memory.common import DEFAULT_AGENT, agent_actor, human_actor
from memory_anchor.worker.memory.extraction import Material
from memory_anchor.worker.memory.identity import refuse_agent_identity_write
from memory_anchor.worker.store.present import record_to_wire
from memory_anchor.worker.store.records import RecordError

routes = web.RouteTableDef()


def _memory(request: web.Request):
    return request.app["services"].memory


async def _run(request: web.Request, func, *args, **kwargs):
    return await request.app["services"].run(func, *args, **kwargs)


def _agent(request: web.Request, body: dict[str, Any] | None = None) -> str:
    return (body or {}).get("agent_id") or request.headers.get(AGENT_HEADER) or request.query.get("agent_id") or DEFAULT_AGENT


async def _agent_body(request: web.Request) -> dict[str, Any]:
    """The JSON body with agent_id filled in from the header (every write carries one)."""
    body = await read_json_object(request)
    body["agent_id"] = _agent(request, body)
    return body


def _human_only(request: web.Request) -> None:
    if request.headers.get(AGENT_HEADER):
        refuse_agent_identity_write(request.headers.get(AGENT_HEADER))


def _wire(record: dict[str, Any] | None) -> dict[str, Any] | None:
    if record is None:
        return None
    out = record_to_wire(record)
    out["text"] = record.get("text", "")
    for key in ("effective_confidence", "needs_verification", "layer", "match", "path", "similarity"):
        if key in record:
            out[key] = record[key]
    return out


def _stored(result: dict[str, Any]) -> dict[str, Any]:
    """A write's answer: {id, status, record?, approval_id?, message?}."""
    record = result.get("record")
    out = {k: v for k, v in result.items() if k not in ("record", "approval")}
    out["id"] = (record or {}).get("id")
    out["record"] = _wire(record)
    if result.get("approval"):
        out["approval_id"] = result["approval"]["id"]
    return out


def _json(value: Any, status: int = 200) -> web.Response:
    return web.json_response(value, status=status, dumps=_dumps)


def _dumps(value: Any) -> str:
    import json

    return json.dumps(value, ensure_ascii=False, default=str)


# --- L0 identity ---------------------------------------------------------------------------


@routes.get("/api/v1/identity")
async def list_identity(request: web.Request) -> web.Response:
    """The identity items a project sees (its own and the global ones), by priority."""
    include_removed = request.query.get("include_removed") in ("1", "true", "yes")
    items = await _run(request, _memory(request).identity.items, request.query.get("project", ""),
                       include_removed=include_removed, as_of=as_of_param(request))  # fmt: skip
    return _json({"results": [_wire(i) for i in items]})


@routes.get("/api/v1/constitution")
async def get_constitution(request: web.Request) -> web.Response:
    """get_constitution: the identity layer, in full (alias of GET /identity)."""
    items = await _run(request, _memory(request).identity.context_items, request.query.get("project", ""))
    return _json({"results": [_wire(i) for i in items]})


@routes.post("/api/v1/identity")
async def add_identity(request: web.Request) -> web.Response:
    _human_only(request)
    body = IdentityAdd.model_validate(await read_json_object(request))
    return _json(_wire(await _run(request, _memory(request).identity.add, body)), status=201)


@routes.put("/api/v1/identity/{item_id}")
async def edit_identity(request: web.Request) -> web.Response:
    _human_only(request)
    body = IdentityEdit.model_validate(await read_json_object(request))
    return _json(_wire(await _run(request, _memory(request).identity.edit, request.match_info["item_id"], body)))


@routes.post("/api/v1/identity/{item_id}/remove")
async def remove_identity(request: web.Request) -> web.Response:
    """Soft delete (restorable for 7 days); POST because it carries the confirmations."""
    _human_only(request)
    body = IdentityWrite.model_validate(await read_json_object(request))
    return _json(_wire(await _run(request, _memory(request).identity.remove, request.match_info["item_id"], body)))


@routes.post("/api/v1/identity/{item_id}/restore")
async def restore_identity(request: web.Request) -> web.Response:
    _human_only(request)
    body = IdentityWrite.model_validate(await read_json_object(request))
    return _json(_wire(await _run(request, _memory(request).identity.restore, request.match_info["item_id"], body)))


@routes.get("/api/v1/identity/{item_id}/history")
async def identity_history(request: web.Request) -> web.Response:
    versions = await _run(request, _memory(request).identity.history, request.match_info["item_id"])
    return _json({"results": [_wire(v) for v in versions]})


@routes.post("/api/v1/identity/proposals")
async def propose_identity_change(request: web.Request) -> web.Response:
    """An agent's proposal to change L0; it waits in the approvals queue."""
    body = IdentityProposal.model_validate(await _agent_body(request))
    return _json(await _run(request, _memory(request).propose_identity_change, body), status=202)


# --- L1 active context --------------------------------------------------------------------------


@routes.get("/api/v1/active-context")
@query_param("session_id", {"type": "string", "minLength": 1}, "The session whose working memory to read", required=True)
@query_param("key", {"type": "string"}, "One key only (default: every live key)")
@query_param("agent_id", {"type": "string"}, "The agent whose working memory it is (default: the header's, else the default agent)")
async def get_active_context(request: web.Request) -> web.Response:
    session_id = request.query.get("session_id")
    if not session_id:
        raise RecordError("session_id is required")
    values = _memory(request).active.get(session_id, request.query.get("key"), agent_id=_agent(request))
    return _json({"session_id": session_id, "values": values})


@routes.post("/api/v1/active-context")
async def set_active_context(request: web.Request) -> web.Response:
    body = ActiveContextSet.model_validate(await _agent_body(request))
    return _json(_memory(request).active.set(body.session_id, body.key, body.value, ttl_seconds=body.ttl_seconds,
                                             agent_id=body.agent_id))  # fmt: skip


@routes.post("/api/v1/active-context/end")
async def end_active_context(request: web.Request) -> web.Response:
    body = ActiveContextEnd.model_validate(await _agent_body(request))
    out = await _run(request, _memory(request).end_session, body.session_id, agent_id=body.agent_id,
                     project=body.project, branch=branch_param(request), write_event=body.write_event)  # fmt: skip
    return _json(out)


# --- L2 event log ----------------------------------------------------------------------------------


@routes.post("/api/v1/event-log")
async def log_event(request: web.Request) -> web.Response:
    body = EventIn.model_validate(await _agent_body(request))
    if body.branch is None:
        body.branch = branch_param(request)
    return _json(_stored(await _run(request, _memory(request).log_event, body)), status=201)


@routes.post("/api/v1/event-log/search")
async def search_events(request: web.Request) -> web.Response:
    raw = await read_json_object(request)
    raw.setdefault("agent_id", _agent(request, raw))
    body = EventSearch.model_validate(raw)
    if body.branch is None:
        body.branch = branch_param(request)
    hits = await _run(request, _memory(request).events.search, body)
    return _json({"results": [_wire(h) for h in hits]})


@routes.get("/api/v1/event-log/archive")
async def list_archive(request: web.Request) -> web.Response:
    rows = await _run(request, _memory(request).events.archived, request.query.get("project"),
                      int_param(request, "limit", 100, low=1, high=1000))  # fmt: skip
    return _json({"results": rows})


@routes.post("/api/v1/event-log/archive/run")
async def run_maintenance(request: web.Request) -> web.Response:
    """Run the periodic job now: archive expired events, purge old identity removals."""
    return _json(await _run(request, _memory(request).maintain))


@routes.post("/api/v1/event-log/archive/{archive_id}/restore")
async def restore_event(request: web.Request) -> web.Response:
    raw = await read_json_object(request) if request.can_read_body else {}
    archive_id = int_path(request, "archive_id", "archive id")
    record = await _run(request, _memory(request).events.restore, archive_id,
                        actor=human_actor(raw.get("actor")) if raw.get("actor") else agent_actor(_agent(request)),
                        ttl_days=raw.get("ttl_days"))  # fmt: skip
    return _json(_wire(record))


@routes.get("/api/v1/event-log/{event_id}")
async def get_event(request: web.Request) -> web.Response:
    record = await _run(request, _memory(request).events.get, request.match_info["event_id"],
                        branch=branch_param(request), as_of=as_of_param(request))  # fmt: skip
    return _json(_wire(record))


@routes.post("/api/v1/event-log/{event_id}/promote")
async def promote_to_fact(request: web.Request) -> web.Response:
    body = PromoteRequest.model_validate(await _agent_body(request))
    if body.branch is None:
        body.branch = branch_param(request)
    result = await _run(request, _memory(request).promote_to_fact, request.match_info["event_id"], body)
    return _json(_stored(result), status=201)


# --- L3 facts ------------------------------------------------------------------------------------------


@routes.get("/api/v1/facts")
async def list_facts(request: web.Request) -> web.Response:
    statuses = tuple(s for s in request.query.get("status", "active").split(",") if s)
    needs = request.query.get("needs_verification")
    facts = await _run(
        request, _memory(request).facts.list, project=request.query.get("project"), statuses=statuses,
        branch=branch_param(request), as_of=as_of_param(request),
        needs_verification=None if needs is None else needs in ("1", "true", "yes"),
        limit=int_param(request, "limit", 100, low=1, high=1000),
    )  # fmt: skip
    return _json({"results": [_wire(f) for f in facts]})


@routes.post("/api/v1/facts")
async def add_fact(request: web.Request) -> web.Response:
    """Store a fact by confidence: >= 0.9 active, 0.7-0.9 pending approval, < 0.7 rejected (logged)."""
    body = FactIn.model_validate(await _agent_body(request))
    if body.branch is None:
        body.branch = branch_param(request)
    return _json(_stored(await _run(request, _memory(request).add_fact, body)), status=201)


@routes.post("/api/v1/facts/extract")
async def extract_facts(request: web.Request) -> web.Response:
    """Run fact extraction now on observations and/or a text (summary, transcript)."""
    body = ExtractRequest.model_validate(await _agent_body(request))
    material = Material(source=body.source, text=body.text or "", observations=body.observations, project=body.project,
                        agent_id=body.agent_id, session_id=body.session_id, branch=body.branch or branch_param(request))  # fmt: skip
    outcome = await _run(request, _memory(request).extract, material)
    return _json(outcome.model_dump())


@routes.get("/api/v1/facts/{fact_id}")
async def get_fact(request: web.Request) -> web.Response:
    fact = await _run(request, _memory(request).facts.get, request.match_info["fact_id"],
                      branch=branch_param(request), as_of=as_of_param(request))  # fmt: skip
    return _json(_wire(fact))


@routes.get("/api/v1/facts/{fact_id}/history")
async def fact_history(request: web.Request) -> web.Response:
    """Every version of a fact, oldest first, with actor, time and reason."""
    versions = await _run(request, _memory(request).facts.history, request.match_info["fact_id"], branch=branch_param(request))
    return _json({"results": [_wire(v) for v in versions]})


@routes.put("/api/v1/facts/{fact_id}")
async def update_fact(request: web.Request) -> web.Response:
    body = FactUpdate.model_validate(await _agent_body(request))
    model = _memory(request)
    if model.policy.is_read_only(body.agent_id):
        raise RecordError(f"agent {body.agent_id!r} is read-only", code="read_only_agent", status=403)

    def update():
        with model.db.transaction() as conn:
            return model.facts.supersede(conn, request.match_info["fact_id"], body.text, confidence=body.confidence,
                                         actor=agent_actor(body.agent_id), reason=body.reason,
                                         branch=body.branch or branch_param(request))  # fmt: skip

    return _json(_wire(await _run(request, update)))


@routes.post("/api/v1/facts/{fact_id}/verify")
async def verify_fact(request: web.Request) -> web.Response:
    raw = await read_json_object(request) if request.can_read_body else {}
    actor = human_actor(raw["actor"]) if raw.get("actor") else agent_actor(_agent(request, raw))
    fact = await _run(request, _memory(request).facts.verify, request.match_info["fact_id"], actor=actor,
                      branch=branch_param(request), confidence=raw.get("confidence"))  # fmt: skip
    return _json(_wire(fact))


@routes.post("/api/v1/facts/{fact_id}/invalidate")
async def invalidate_fact(request: web.Request) -> web.Response:
    raw = await read_json_object(request) if request.can_read_body else {}
    model = _memory(request)
    agent = _agent(request, raw)
    if model.policy.is_read_only(agent) and not raw.get("actor"):
        raise RecordError(f"agent {agent!r} is read-only", code="read_only_agent", status=403)
    actor = human_actor(raw["actor"]) if raw.get("actor") else agent_actor(agent)

    def invalidate():
        with model.db.transaction() as conn:
            return model.facts.invalidate(conn, request.match_info["fact_id"], actor=actor,
                                          reason=f"DELETE: {raw.get('reason') or 'invalidated'}", branch=branch_param(request))  # fmt: skip

    return _json(_wire(await _run(request, invalidate)))


# --- search across layers and add_memory ----------------------------------------------------------------


@routes.post("/api/v1/memory-model/search")
async def search_memory(request: web.Request) -> web.Response:
    """search_memory: L2/L3/L4 with the fallback chain (identity is never searched)."""
    raw = await read_json_object(request)
    raw.setdefault("agent_id", _agent(request, raw))
    body = MemorySearch.model_validate(raw)
    if body.branch is None:
        body.branch = branch_param(request)
    hits = await _run(request, _memory(request).retrieval.search, body)
    return _json({"results": [_wire(h) for h in hits]})


@routes.post("/api/v1/memory-model/recall")
async def recall(request: web.Request) -> web.Response:
    """Identity in full plus search results: what an agent should know about `query`."""
    raw = await read_json_object(request)
    raw.setdefault("agent_id", _agent(request, raw))
    body = MemorySearch.model_validate(raw)
    out = await _run(request, _memory(request).retrieval.recall, body)
    return _json({"identity": [_wire(i) for i in out["identity"]], "results": [_wire(h) for h in out["results"]],
                  "error": out["error"]})  # fmt: skip


@routes.post("/api/v1/memory-model/add")
async def add_memory(request: web.Request) -> web.Response:
    """add_memory: into event_log or verified_fact; the identity layer is refused (403)."""
    body = AddMemoryIn.model_validate(await _agent_body(request))
    if body.branch is None:
        body.branch = branch_param(request)
    return _json(_stored(await _run(request, _memory(request).add_memory, body)), status=201)


# --- approvals and conflicts -----------------------------------------------------------------------------


@routes.get("/api/v1/approvals")
async def list_approvals(request: web.Request) -> web.Response:
    status = request.query.get("status", "pending")
    rows = await _run(request, _memory(request).approvals.list, None if status == "all" else status,
                      request.query.get("kind"), int_param(request, "limit", 100, low=1, high=1000))  # fmt: skip
    return _json({"results": rows})


def _approval_id(request: web.Request) -> int:
    return int_path(request, "approval_id", "approval id")


@routes.post("/api/v1/approvals/{approval_id}/approve")
async def approve(request: web.Request) -> web.Response:
    _human_only(request)
    body = Decision.model_validate(await read_json_object(request))
    return _json(await _run(request, _memory(request).approvals.approve, _approval_id(request), body))


@routes.post("/api/v1/approvals/{approval_id}/reject")
async def reject(request: web.Request) -> web.Response:
    _human_only(request)
    body = Decision.model_validate(await read_json_object(request))
    return _json(await _run(request, _memory(request).approvals.reject, _approval_id(request), body))


@routes.get("/api/v1/conflicts")
async def list_conflicts(request: web.Request) -> web.Response:
    status = request.query.get("status", "open")
    rows = await _run(request, _memory(request).conflicts.list, None if status == "all" else status,
                      request.query.get("project"))  # fmt: skip
    return _json({"results": rows})


@routes.post("/api/v1/conflicts/{conflict_id}/resolve")
async def resolve_conflict(request: web.Request) -> web.Response:
    _human_only(request)
    body = ConflictResolve.model_validate(await read_json_object(request))
    conflict_id = int_path(request, "conflict_id", "conflict id")
    return _json(await _run(request, _memory(request).conflicts.resolve, conflict_id, body))


# --- relations and operations ---------------------------------------------------------------------------------


@routes.post("/api/v1/relations")
async def write_relation(request: web.Request) -> web.Response:
    body = RelationIn.model_validate(await _agent_body(request))
    if body.branch is None:
        body.branch = branch_param(request)
    return _json(_stored(await _run(request, _memory(request).write_relation, body)), status=201)


@routes.post("/api/v1/relations/{relation_id}/invalidate")
async def invalidate_relation(request: web.Request) -> web.Response:
    raw = await read_json_object(request) if request.can_read_body else {}
    agent = _agent(request, raw)
    if _memory(request).policy.is_read_only(agent) and not raw.get("actor"):
        raise RecordError(f"agent {agent!r} is read-only", code="read_only_agent", status=403)
    actor = human_actor(raw["actor"]) if raw.get("actor") else agent_actor(agent)
    record = await _run(request, _memory(request).relations.invalidate, request.match_info["relation_id"], actor=actor,
                        reason=f"INVALIDATE: {raw.get('reason') or ''}".strip(), branch=branch_param(request),
                        valid_to=raw.get("valid_to"))  # fmt: skip
    return _json(_wire(record))


@routes.post("/api/v1/graph")
async def graph_query(request: web.Request) -> web.Response:
    body = GraphQuery.model_validate(await read_json_object(request))
    if body.branch is None:
        body.branch = branch_param(request)
    return _json(await _run(request, _memory(request).relations.graph, body))


@routes.get("/api/v1/operations")
@query_param("project", {"type": "string", "minLength": 1}, "The project directory (it holds .ai/operations/)", required=True)
@query_param("q", {"type": "string"}, "What to look for (default: everything)")
@query_param("limit", {"type": "integer", "minimum": 1, "maximum": 50, "default": 5})
async def search_operations(request: web.Request) -> web.Response:
    project = request.query.get("project")
    if not project:
        raise RecordError("project is required (the directory holding .ai/operations/)")
    hits = await _run(request, _memory(request).operations.search, request.query.get("q", ""), project,
                      limit=int_param(request, "limit", 5, low=1, high=50))  # fmt: skip
    return _json({"results": [_wire(h) for h in hits]})


@routes.post("/api/v1/operations/reindex")
async def reindex_operations(request: web.Request) -> web.Response:
    body = OperationsReindex.model_validate(await read_json_object(request))
    return _json(await _run(request, _memory(request).operations.sync, body.project))
