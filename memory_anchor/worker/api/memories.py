"""mem0-compatible memory endpoints under /api/v1/memories."""

from __future__ import annotations

from aiohttp import web

from memory_anchor.schemas.memories import AddMemoryRequest, AddMemoryResponse, SearchRequest, UpdateMemoryRequest
from memory_anchor.worker.api.freshness import wire_with_freshness
from memory_anchor.worker.api.middleware import read_json_object
from memory_anchor.worker.api.openapi import query_object, query_param, request_model, response_model
from memory_anchor.worker.api.params import actor, as_of_param, branch_param, int_param
from memory_anchor.worker.memory.memories import MemoryService, filters_from_query
from memory_anchor.worker.store.present import record_to_wire

routes = web.RouteTableDef()


def _service(request: web.Request) -> MemoryService:
    return MemoryService(request.app["services"])


@routes.post("/api/v1/memories")
@request_model(AddMemoryRequest)
@response_model(AddMemoryResponse)
async def add_memory(request: web.Request) -> web.Response:
    """Add memories from `messages` or `content`; `infer: false` stores them as given."""
    body = AddMemoryRequest.model_validate(await read_json_object(request))
    if body.branch is None:
        body.branch = branch_param(request)
    services = request.app["services"]
    service = _service(request)
    if body.infer and await services.run(service.infers, body):
        results = await services.run(service.add, body, actor=actor(request))
        return web.json_response({"results": results})
    # Stored as given: concurrent adds share one commit, and the reply waits for it (durable), not
    # for the embedding, which the indexer makes for them together right after (searchable).
    results, seqs = await services.memory_adds.submit((body, actor(request)))
    await services.run(service.make_searchable, seqs)
    return web.json_response({"results": results})


@routes.post("/api/v1/memories/search")
@request_model(SearchRequest)
async def search_memories(request: web.Request) -> web.Response:
    """Hybrid search scoped by filters; `top_k`, `threshold`, `branch`, `as_of`."""
    body = SearchRequest.model_validate(await read_json_object(request))
    if body.branch is None:
        body.branch = branch_param(request)
    services = request.app["services"]
    hits = await services.run(_service(request).search, body)
    return web.json_response({"results": await services.run(wire_with_freshness, services, hits)})


SCOPE = {key: {"type": "string", "minLength": 1} for key in ("user_id", "agent_id", "run_id", "session_id", "project")}


@routes.get("/api/v1/memories")
@query_object("scope", SCOPE)
@query_param("limit", {"type": "integer", "minimum": 1, "maximum": 1000, "default": 100})
@query_param("offset", {"type": "integer", "minimum": 0, "maximum": 10**9, "default": 0})
async def list_memories(request: web.Request) -> web.Response:
    """Every live memory in a scope (`user_id`, `agent_id`, `run_id`, `project`)."""
    page, total = await request.app["services"].run(
        _service(request).list,
        filters_from_query(dict(request.query)),
        branch=branch_param(request),
        as_of=as_of_param(request),
        limit=int_param(request, "limit", 100, low=1, high=1000),
        offset=int_param(request, "offset", 0, high=10**9),
    )
    wired = await request.app["services"].run(wire_with_freshness, request.app["services"], page)
    return web.json_response({"results": wired, "total": total})


@routes.delete("/api/v1/memories")
@query_object("scope", SCOPE, min_properties=1, description="At least one scope id")
async def delete_all_memories(request: web.Request) -> web.Response:
    """Delete every memory in a scope (a scope id is required)."""
    count = await request.app["services"].run(
        _service(request).delete_all,
        filters_from_query(dict(request.query)),
        branch=branch_param(request),
        actor=actor(request),
    )
    return web.json_response({"message": f"deleted {count} memories", "deleted": count})


@routes.get("/api/v1/memories/{memory_id}")
async def get_memory(request: web.Request) -> web.Response:
    record = await request.app["services"].run(
        _service(request).get, request.match_info["memory_id"], branch=branch_param(request), as_of=as_of_param(request)
    )
    [wired] = await request.app["services"].run(wire_with_freshness, request.app["services"], [record])
    return web.json_response(wired)


@routes.put("/api/v1/memories/{memory_id}")
@request_model(UpdateMemoryRequest)
async def update_memory(request: web.Request) -> web.Response:
    """Write a new version of a memory; the old one stays in its history."""
    body = UpdateMemoryRequest.model_validate(await read_json_object(request))
    record = await request.app["services"].run(
        _service(request).update, request.match_info["memory_id"], body, branch=branch_param(request), actor=actor(request)
    )
    return web.json_response({"message": "memory updated", **record_to_wire(record)})


@routes.delete("/api/v1/memories/{memory_id}")
async def delete_memory(request: web.Request) -> web.Response:
    await request.app["services"].run(
        _service(request).delete, request.match_info["memory_id"], branch=branch_param(request), actor=actor(request)
    )
    return web.json_response({"message": "memory deleted", "id": request.match_info["memory_id"]})


@routes.get("/api/v1/memories/{memory_id}/history")
async def memory_history(request: web.Request) -> web.Response:
    """Every version of a record, oldest first, with who wrote it, when and why."""
    versions = await request.app["services"].run(
        _service(request).history, request.match_info["memory_id"], branch=branch_param(request), as_of=as_of_param(request)
    )
    return web.json_response({"results": [record_to_wire(v) for v in versions]})
