"""Maintenance endpoints (`memory-anchor reindex`)."""

from __future__ import annotations

import time

from aiohttp import web

from memory_anchor.schemas.portability import ReindexResult

routes = web.RouteTableDef()


@routes.post("/api/v1/admin/reindex")
async def reindex(request: web.Request) -> web.Response:
    """Drop every vector and re-embed every stored record version from SQLite (the source of truth)."""
    services = request.app["services"]
    started = time.monotonic()
    indexed = await services.run(services.indexer.rebuild)
    await services.run(services.reembedder.mark_current)  # every vector is now this model's
    result = ReindexResult(indexed=indexed, seconds=round(time.monotonic() - started, 3))
    return web.json_response(result.model_dump())
