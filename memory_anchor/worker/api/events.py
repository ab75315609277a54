"""Hook events in (the durable inbox) and the spool hand-over."""

from __future__ import annotations

from aiohttp import web

from memory_anchor.core import paths
from memory_anchor.schemas.events import (
    AGENT_HEADER,
    BRANCH_HEADER,
    EVENT_ID_HEADER,
    HOOK_EVENTS,
    EventRefused,
    HookPayload,
    accepted_event,
)
from memory_anchor.worker.api.middleware import read_json_object
from memory_anchor.worker.api.openapi import request_model
from memory_anchor.worker.api.params import int_path
from memory_anchor.schemas.history import HistoryImportRequest, checked_batch
from memory_anchor.worker.capture.backfill import accept_history
from memory_anchor.worker.capture.inbox import Arrival
from memory_anchor.worker.capture.sanitize import sanitize_event
from memory_anchor.worker.store.quarantine import Quarantine
from memory_anchor.worker.store.records import RecordError, validate_branch_name

routes = web.RouteTableDef()


@routes.post("/api/v1/events")
@request_model(HookPayload)
async def post_event(request: web.Request) -> web.Response:
    """Accept a hook payload exactly as Claude Code sent it; 202 once it is committed.

    400 names the event kind and the field when a field the worker reads has the
    wrong type; fields it does not know are kept as they are.
    """
    services = request.app["services"]
    payload = await read_json_object(request)
    try:
        payload = accepted_event(payload)
    except EventRefused as exc:
        code = "unknown_event" if payload.get("hook_event_name") not in HOOK_EVENTS else "invalid_event"
        raise RecordError(str(exc), code=code)
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


@routes.post("/api/v1/events/history")
@request_model(HistoryImportRequest)
async def post_history(request: web.Request) -> web.Response:
    """Events read from Claude Code's transcripts (`memory-anchor import-history`), with their original times.

    The same door as a hook's event (checked, redacted, into the inbox); distilled
    locally unless `claude` is true. Events of sessions a hook captured live are
    left out, events already imported are duplicates: importing again adds nothing. Each event
    is checked on its own: a malformed one is listed in `refused` with its reason, and the rest
    are taken (422 only when the batch itself is malformed).
    """
    services = request.app["services"]
    batch, indexes, refused = checked_batch(await read_json_object(request))
    outcome = await services.run(accept_history, services.inbox, services.settings, batch, indexes, refused)
    pipeline = request.app.get("pipeline")
    if pipeline is not None and outcome.accepted:
        pipeline.wake()
    return web.json_response(outcome.model_dump())


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
    """How many captured events are pending, done or quarantined, and what is quarantined (with its error)."""
    services = request.app["services"]
    return web.json_response(
        {"counts": services.inbox.counts(), "quarantined": Quarantine(services.capture_db).items()}
    )


@routes.post("/api/v1/inbox/quarantine/{quarantine_id}/retry")
async def retry_quarantined(request: web.Request) -> web.Response:
    """Put a quarantined item back in line (after fixing what made it fail)."""
    services = request.app["services"]
    quarantine_id = int_path(request, "quarantine_id", "quarantine id")
    item = await services.run(Quarantine(services.capture_db).retry, quarantine_id)
    pipeline = request.app.get("pipeline")
    if pipeline is not None:
        pipeline.wake()
    return web.json_response(item)


@routes.delete("/api/v1/inbox/quarantine/{quarantine_id}")
async def drop_quarantined(request: web.Request) -> web.Response:
    """Discard a quarantined item for good."""
    services = request.app["services"]
    quarantine_id = int_path(request, "quarantine_id", "quarantine id")
    return web.json_response(await services.run(Quarantine(services.capture_db).drop, quarantine_id))

