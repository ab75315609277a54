"""Hook events in (the durable inbox) and the spool hand-over."""

from __future__ import annotations

from aiohttp import web

from memory_anchor import paths
from memory_anchor.schemas.events import AGENT_HEADER, BRANCH_HEADER, EVENT_ID_HEADER, HOOK_EVENTS
from worker.api.middleware import read_json_object
from worker.capture import sanitize_event
from worker.inbox import Arrival
from worker.store.records import RecordError, validate_branch_name

routes = web.RouteTableDef()


@routes.post("/api/v1/events")
async def post_event(request: web.Request) -> web.Response:
    """Accept a hook payload exactly as Claude Code sent it; 202 once it is committed."""
    services = request.app["services"]
    payload = await read_json_object(request)
    name = payload.get("hook_event_name")
    if name not in HOOK_EVENTS:
        raise RecordError(
            f"unknown hook event {name!r}; expected one of {', '.join(HOOK_EVENTS)}", code="unknown_event"
        )
    if not isinstance(payload.get("session_id", ""), str):
        raise RecordError("session_id must be a string", code="invalid_event")
    branch = request.headers.get(BRANCH_HEADER) or None
    if branch:
        validate_branch_name(branch)
    arrival = Arrival(
        sanitize_event(payload, services.settings),
        event_id=request.headers.get(EVENT_ID_HEADER),
        branch=branch,
        agent_id=request.headers.get(AGENT_HEADER) or None,
    )
    inbox_id, duplicate = await services.event_commits.submit(arrival)
    pipeline = request.app.get("pipeline")
    if pipeline is not None:
        pipeline.captured()
    return web.json_response({"status": "accepted", "id": inbox_id, "duplicate": duplicate}, status=202)


@routes.post("/api/v1/spool/ingest")
async def ingest_spool(request: web.Request) -> web.Response:
    """Move events that hooks spooled while the worker was unreachable into the inbox."""
    services = request.app["services"]
    count = await services.run(services.inbox.ingest_spool, paths.spool_path(services.data_dir))
    pipeline = request.app.get("pipeline")
    if pipeline is not None and count:
        pipeline.wake()
    return web.json_response({"ingested": count})


@routes.get("/api/v1/inbox")
async def inbox_status(request: web.Request) -> web.Response:
    """How many captured events are pending, done or parked as failed."""
    return web.json_response({"counts": request.app["services"].inbox.counts()})
