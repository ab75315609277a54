"""Maintenance endpoints (`memory-anchor reindex`)."""

from __future__ import annotations

import time

from aiohttp import web

from memory_anchor.schemas.portability import ReindexResult
from memory_anchor.worker.store.records import RecordError

routes = web.RouteTableDef()


@routes.post("/api/v1/admin/reindex")
async def reindex(request: web.Request) -> web.Response:
    """Drop every vector and re-embed every stored record version from SQLite (the source of truth)."""
    services = request.app["services"]
    if services.shared_store:
        # The vectors are the team database's, shared by every member's worker (one member cannot
        # drop the others'); this worker reads them, and embeds what has none, as it follows the log.
        raise RecordError(
            "on team storage the vectors live in the team database, shared by every member's worker; "
            "this worker reads them from there (restart it to read them all again)",
            code="team_storage",
            status=409,
        )
    started = time.monotonic()
    indexed = await services.run(services.indexer.rebuild)
    await services.run(services.reembedder.mark_current)  # every vector is now this model's
    result = ReindexResult(indexed=indexed, seconds=round(time.monotonic() - started, 3))
    return web.json_response(result.model_dump())
