"""mem0's platform routes, so that mem0's own `MemoryClient` works against the worker.

    MemoryClient(api_key=<worker token>, host=<worker URL>)

The SDK authenticates with `Authorization: Token <key>` (see middleware) and
calls the routes below; each maps onto the same MemoryService as /api/v1.
"""

from __future__ import annotations

from urllib.parse import urlencode

from aiohttp import web

from memory_anchor.schemas.mem0 import (
    Mem0AddRequest,
    Mem0BatchDelete,
    Mem0BatchUpdate,
    Mem0EntityList,
    Mem0GetAllRequest,
    Mem0HistoryEntry,
    Mem0Memory,
    Mem0Page,
    Mem0Ping,
    Mem0SearchRequest,
    Mem0SearchResponse,
    Mem0Status,
    Mem0UpdateRequest,
)
from memory_anchor.schemas.memories import AddMemoryResponse
from memory_anchor.worker.api.middleware import read_json_object
from memory_anchor.worker.api.openapi import query_object, query_param, request_model, response_model
from memory_anchor.worker.api.params import actor, branch_param, int_param
from memory_anchor.worker.memory.mem0_platform import Mem0Platform, filters_from_params

routes = web.RouteTableDef()
PAGE_SIZE_MAX = 1000


def _platform(request: web.Request) -> Mem0Platform:
    return Mem0Platform(request.app["services"])


async def _run(request: web.Request, fn, *args, **kwargs):
    return await request.app["services"].run(fn, *args, **kwargs)


@routes.get("/v1/ping/")
@response_model(Mem0Ping)
async def mem0_ping(request: web.Request) -> web.Response:
    """mem0's key check: answers when the token is this worker's."""
    return web.json_response(Mem0Ping(message="Memory Anchor worker: mem0 platform API").model_dump())


@routes.post("/v3/memories/add/")
@request_model(Mem0AddRequest)
@response_model(AddMemoryResponse)
async def mem0_add(request: web.Request) -> web.Response:
    """Add memories (mem0 `client.add`); answers in mem0's v1.1 format."""
    body = Mem0AddRequest.model_validate(await read_json_object(request))
    results = await _run(request, _platform(request).add, body, branch=branch_param(request), actor=actor(request))
    return web.json_response({"results": results})


@routes.post("/v3/memories/")
@request_model(Mem0GetAllRequest, required=False)
@query_param("page", {"type": "integer", "minimum": 1, "maximum": 10**9, "default": 1})
@query_param("page_size", {"type": "integer", "minimum": 1, "maximum": PAGE_SIZE_MAX, "default": 100})
@response_model(Mem0Page)
async def mem0_get_all(request: web.Request) -> web.Response:
    """One page of the memories matching `filters` (mem0 `client.get_all`)."""
    raw = await read_json_object(request) if request.can_read_body else {}
    body = Mem0GetAllRequest.model_validate(raw)
    page = int_param(request, "page", 1, low=1, high=10**9)
    size = int_param(request, "page_size", 100, low=1, high=PAGE_SIZE_MAX)
    results, total = await _run(
        request, _platform(request).page, body.filters, page=page, page_size=size, branch=branch_param(request)
    )

    def link(n: int) -> str:
        return str(request.url.with_query(urlencode({**request.query, "page": n, "page_size": size})))

    return web.json_response({
        "count": total,
        "next": link(page + 1) if page * size < total else None,
        "previous": link(page - 1) if page > 1 else None,
        "results": results,
    })  # fmt: skip


@routes.post("/v3/memories/search/")
@request_model(Mem0SearchRequest)
@response_model(Mem0SearchResponse)
async def mem0_search(request: web.Request) -> web.Response:
    """Hybrid search within `filters` (mem0 `client.search`)."""
    body = Mem0SearchRequest.model_validate(await read_json_object(request))
    return web.json_response({"results": await _run(request, _platform(request).search, body, branch=branch_param(request))})


@routes.get("/v1/memories/{memory_id}/")
@response_model(Mem0Memory)
async def mem0_get(request: web.Request) -> web.Response:
    """One memory (mem0 `client.get`)."""
    return web.json_response(await _run(request, _platform(request).get, request.match_info["memory_id"], branch=branch_param(request)))


@routes.put("/v1/memories/{memory_id}/")
@request_model(Mem0UpdateRequest)
@response_model(Mem0Memory)
async def mem0_update(request: web.Request) -> web.Response:
    """A new version of a memory with this text and/or merged metadata (mem0 `client.update`)."""
    body = Mem0UpdateRequest.model_validate(await read_json_object(request))
    memory = await _run(
        request, _platform(request).update, request.match_info["memory_id"], body,
        branch=branch_param(request), actor=actor(request),
    )  # fmt: skip
    return web.json_response(memory)


@routes.delete("/v1/memories/{memory_id}/")
@query_param("delete_linked", {"type": "boolean"}, "Accepted; versions are kept in the history either way")
@response_model(Mem0Status)
async def mem0_delete(request: web.Request) -> web.Response:
    """Delete one memory; its history stays (mem0 `client.delete`)."""
    platform = _platform(request)
    await _run(request, platform.memories.delete, request.match_info["memory_id"], branch=branch_param(request), actor=actor(request))
    return web.json_response({"message": "Memory deleted successfully!"})


@routes.get("/v1/memories/{memory_id}/history/")
@response_model(Mem0HistoryEntry, array=True)
async def mem0_history(request: web.Request) -> web.Response:
    """Every version of a memory, oldest first (mem0 `client.history`)."""
    return web.json_response(await _run(request, _platform(request).history, request.match_info["memory_id"], branch=branch_param(request)))


@routes.delete("/v1/memories/")
@query_object(
    "entity", {key: {"type": "string", "minLength": 1} for key in ("user_id", "agent_id", "app_id", "run_id")},
    min_properties=1, description="At least one entity id",
)  # fmt: skip
@response_model(Mem0Status)
async def mem0_delete_all(request: web.Request) -> web.Response:
    """Delete every memory of an entity (mem0 `client.delete_all`); at least one id is required."""
    filters = filters_from_params(dict(request.query))
    count = await _run(request, _platform(request).memories.delete_all, filters, branch=branch_param(request), actor=actor(request))
    return web.json_response({"message": f"Memories deleted successfully! ({count})"})


@routes.get("/v1/entities/")
@response_model(Mem0EntityList)
async def mem0_entities(request: web.Request) -> web.Response:
    """The users, agents, apps and runs that own memories (mem0 `client.users`)."""
    results = await _run(request, _platform(request).entities, branch=branch_param(request))
    return web.json_response({"count": len(results), "results": results})


@routes.delete("/v2/entities/{entity_type}/{name}/")
@response_model(Mem0Status)
async def mem0_delete_entity(request: web.Request) -> web.Response:
    """Delete an entity's memories (mem0 `client.delete_users`, `client.reset`)."""
    await _run(
        request, _platform(request).delete_entity, request.match_info["entity_type"], request.match_info["name"],
        branch=branch_param(request), actor=actor(request),
    )  # fmt: skip
    return web.json_response({"message": "Entity deleted successfully."})


@routes.put("/v1/batch/")
@request_model(Mem0BatchUpdate)
@response_model(Mem0Status)
async def mem0_batch_update(request: web.Request) -> web.Response:
    """Update many memories at once, all or none (mem0 `client.batch_update`)."""
    body = Mem0BatchUpdate.model_validate(await read_json_object(request))
    count = await _run(request, _platform(request).batch_update, body.memories, branch=branch_param(request), actor=actor(request))
    return web.json_response({"message": f"Successfully updated {count} memories"})


@routes.delete("/v1/batch/")
@request_model(Mem0BatchDelete)
@response_model(Mem0Status)
async def mem0_batch_delete(request: web.Request) -> web.Response:
    """Delete many memories at once, all or none (mem0 `client.batch_delete`)."""
    body = Mem0BatchDelete.model_validate(await read_json_object(request))
    ids = [item.memory_id for item in body.memories]
    count = await _run(request, _platform(request).batch_delete, ids, branch=branch_param(request), actor=actor(request))
    return web.json_response({"message": f"Successfully deleted {count} memories"})
