"""Health, status and the OpenAPI document."""

from __future__ import annotations

import os
import time

from aiohttp import web

from memory_anchor.core.version import __version__
from memory_anchor.worker.store.pending_vectors import pending_count
from memory_anchor.worker.store.records import versions_by_kind

routes = web.RouteTableDef()


@routes.get("/api/health")
async def health(request: web.Request) -> web.Response:
    """Liveness, without a token: hooks and `worker status` use it."""
    services = request.app["services"]
    return web.json_response(
        {"status": "ok", "version": __version__, "pid": os.getpid(), "uptime": round(time.time() - services.started_at, 1)}
    )


@routes.get("/api/v1/status")
async def status(request: web.Request) -> web.Response:
    """What the worker holds and how far its pipeline has got."""
    services = request.app["services"]
    store = await services.run(services.store_description)
    kinds: dict[str, int] = {}
    pending_vectors = None
    if store["reachable"]:  # an unreachable team store is said as such; the rest of the page still answers
        kinds = await services.run(_record_counts, services.db)
        pending_vectors = await services.run(_pending_vectors, services)
    llm = await services.run(services.llm_status)
    return web.json_response(
        {
            "version": __version__,
            "data_dir": str(services.data_dir),
            "store": store,
            "records": kinds,
            "inbox": services.inbox.counts(),
            "pending_vectors": pending_vectors,
            "llm": llm,
            "rss_mb": round(_memory_bytes("VmRSS") / 2**20, 1),
            "peak_rss_mb": round(_memory_bytes("VmHWM") / 2**20, 1),
            "vectors_loaded": services.vectors.loaded,
            "reembedding": services.reembedding(),  # after a model change: {"from", "to", "done", "total"}
        }
    )


@routes.get("/api/v1/openapi.json")
async def openapi(request: web.Request) -> web.Response:
    """The OpenAPI 3.1 description of every route this worker serves."""
    from memory_anchor.worker.api.openapi import build_openapi

    return web.json_response(build_openapi(request.app))


def _record_counts(db) -> dict[str, int]:
    """Record versions by kind."""
    return versions_by_kind(db.reader())


def _pending_vectors(services) -> int:
    """Versions not yet in this worker's vector index (on one machine, the queue's length, read
    without building the indexer; on a team database, how far its follower is behind the log)."""
    if services.shared_store:
        return services.indexer.pending_count()
    return pending_count(services.db.reader())


def _memory_bytes(field: str) -> int:
    """The worker's resident memory now (VmRSS) or at its highest since start (VmHWM)."""
    try:
        with open("/proc/self/status") as handle:
            for line in handle:
                if line.startswith(f"{field}:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    import resource  # no /proc: the peak is all we can get

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
