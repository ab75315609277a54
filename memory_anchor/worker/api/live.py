"""The timeline as server-sent events: the viewer's live updates."""

from __future__ import annotations

import json
import time

from aiohttp import web

from memory_anchor.worker.api.openapi import responses
from memory_anchor.worker.api.params import branch_param, int_param
from memory_anchor.worker.capture.live import BATCH, latest_seq, records_after
from memory_anchor.worker.store.present import record_to_wire

routes = web.RouteTableDef()

KEEP_ALIVE_SECONDS = 15.0
SSE_RESPONSE = {
    "200": {
        "description": "With `Accept: text/event-stream`, a stream of `record` events (id: the record's seq; "
        "data: the record as JSON); otherwise one page of the records after `after`, and the seq to resume from",
        "content": {
            "text/event-stream": {"schema": {"type": "string"}},
            "application/json": {
                "schema": {
                    "type": "object",
                    "properties": {"results": {"type": "array", "items": {"type": "object"}}, "last_seq": {"type": "integer"}},
                }
            },
        },
    }
}


@routes.get("/api/v1/timeline/stream")
@responses(SSE_RESPONSE)
async def timeline_stream(request: web.Request) -> web.StreamResponse:
    """New timeline records as they are written (server-sent events), after `after` or `Last-Event-ID`.

    Without either, the stream starts with what is written from now on. Filters:
    project, session_id, branch (as for the timeline). A client that does not
    accept `text/event-stream` gets one JSON page instead (polling, and tools
    that cannot read a stream that never ends).
    """
    services = request.app["services"]
    feed = request.app["live"]
    project = request.query.get("project") or None
    session_id = request.query.get("session_id") or None
    branch = branch_param(request)
    resume = request.headers.get("Last-Event-ID") or request.query.get("after")
    if resume is not None and request.query.get("after") is not None:
        after = int_param(request, "after", 0, high=2**62)
    elif resume is not None and resume.isdigit():
        after = int(resume)
    else:
        after = await services.run(latest_seq, services.db)

    if "text/event-stream" not in request.headers.get("Accept", ""):
        page = await services.run(records_after, services.db, after, project=project, session_id=session_id,
                                  branch=branch)  # fmt: skip
        last = max([after, *(int(r["seq"]) for r in page)])
        return web.json_response({"results": [record_to_wire(r) for r in page], "last_seq": last})

    response = web.StreamResponse(
        headers={"Content-Type": "text/event-stream", "Cache-Control": "no-store", "X-Accel-Buffering": "no"}
    )
    await response.prepare(request)
    await response.write(b"retry: 1000\n: connected\n\n")
    last_write = time.monotonic()
    try:
        while not feed.closing:
            page = await services.run(records_after, services.db, after, project=project, session_id=session_id,
                                      branch=branch)  # fmt: skip
            for record in page:
                after = max(after, int(record["seq"]))
                data = json.dumps(record_to_wire(record), ensure_ascii=False, default=str)
                await response.write(f"event: record\nid: {record['seq']}\ndata: {data}\n\n".encode())
                last_write = time.monotonic()
            if len(page) == BATCH:
                continue
            if time.monotonic() - last_write > KEEP_ALIVE_SECONDS:
                await response.write(b": keep-alive\n\n")
                last_write = time.monotonic()
            await feed.wait()
    except (ConnectionResetError, ConnectionError):
        pass  # the viewer went away
    return response
