"""Branches, merges, snapshots, session branches and time travel.

Branch names may contain '/', so routes that take one use `{name:.+}`; the
more specific routes (`.../diff`, `.../merge`) are listed first.
"""

from __future__ import annotations

import logging
import time
from functools import partial

from aiohttp import web

from memory_anchor.schemas.branches import (
    NAME_SCHEMA,
    BranchCreate,
    BranchUpdate,
    BranchSwitch,
    MergeRequest,
    SessionFork,
    SnapshotCreate,
    TimeTravelRequest,
)
from memory_anchor.worker.api.middleware import read_json_object
from memory_anchor.worker.api.openapi import query_param, request_model
from memory_anchor.worker.api.params import actor, int_param, session_path
from memory_anchor.worker.api.waiting import wait_while
from memory_anchor.worker.branching.service import BranchService
from memory_anchor.worker.store.records import MAIN, RecordError

log = logging.getLogger(__name__)
routes = web.RouteTableDef()

# Seconds a fork's announcement waits for its parent's last events to be processed. Only a fork
# made while they are still in the inbox waits at all (its SessionStart hook allows FORK_TIMEOUT).
FORK_WAIT = 3.0


def _service(request: web.Request) -> BranchService:
    return BranchService(request.app["services"])


async def _run(request: web.Request, func, *args, **kwargs):
    return await request.app["services"].run(func, *args, **kwargs)


def _kinds(request: web.Request) -> list[str] | None:
    raw = request.query.get("kinds") or request.query.get("kind")
    return [k.strip() for k in raw.split(",") if k.strip()] if raw else None


# --- branches ---------------------------------------------------------------------


@routes.get("/api/v1/branches")
async def list_branches(request: web.Request) -> web.Response:
    """Every branch (`?status=active|merged|archived`), main first, with write and session counts."""
    results = await _run(request, _service(request).list, request.query.get("status") or None)
    return web.json_response({"results": results})


@routes.post("/api/v1/branches")
@request_model(BranchCreate)
async def create_branch(request: web.Request) -> web.Response:
    """Create a branch from `parent` (default main) at its head, at `as_of`, or `from_snapshot`."""
    body = BranchCreate.model_validate(await read_json_object(request))
    branch = await _run(request, _service(request).create, body, actor=actor(request))
    return web.json_response(branch, status=201)


@routes.get("/api/v1/branches/{name:.+}/diff")
async def diff_branches(request: web.Request) -> web.Response:
    """What `name` changed since it last shared each record with `?target=` (default main), and conflicts."""
    diff = await _run(
        request, _service(request).diff, request.match_info["name"], request.query.get("target") or MAIN,
        kinds=_kinds(request), limit=int_param(request, "limit", 500, low=1, high=100_000),
    )  # fmt: skip
    return web.json_response(diff)


@routes.post("/api/v1/branches/{name:.+}/merge")
@request_model(MergeRequest)
async def merge_branch(request: web.Request) -> web.Response:
    """Merge `name` into `target` with a strategy: auto, cherry_pick (items), squash, accept, skip."""
    body = MergeRequest.model_validate(await read_json_object(request))
    result = await _run(request, _service(request).merge, request.match_info["name"], body, actor=actor(request))
    return web.json_response(result)


@routes.get("/api/v1/branches/{name:.+}")
async def get_branch(request: web.Request) -> web.Response:
    """One branch: parent, fork point, status, counts."""
    return web.json_response(await _run(request, _service(request).get, request.match_info["name"]))


@routes.patch("/api/v1/branches/{name:.+}")
@request_model(BranchUpdate)
async def update_branch(request: web.Request) -> web.Response:
    """Archive (`{"status": "archived"}`), restore (`"active"`) or re-describe a branch."""
    body = await read_json_object(request)
    unknown = set(body) - {"status", "description"}
    if unknown or not body:
        raise RecordError("send {\"status\": \"archived\"|\"active\"} and/or {\"description\": \"...\"}")
    name, service = request.match_info["name"], _service(request)
    if "description" in body:
        if not isinstance(body["description"], str):
            raise RecordError("description must be a string")
        await _run(request, service.describe, name, body["description"])
    if "status" in body:
        await _run(request, service.set_status, name, body["status"])
    return web.json_response(await _run(request, service.get, name))


@routes.delete("/api/v1/branches/{name:.+}")
async def delete_branch(request: web.Request) -> web.Response:
    """Delete a branch and its own versions; what was merged from it stays on the target."""
    return web.json_response(await _run(request, _service(request).delete, request.match_info["name"]))


# --- merge history -------------------------------------------------------------------


@routes.get("/api/v1/merges")
async def list_merges(request: web.Request) -> web.Response:
    """Merge history, newest first (`?branch=` as source or target)."""
    results = await _run(
        request, _service(request).merges, request.query.get("branch") or None,
        int_param(request, "limit", 50, low=1, high=1000),
    )  # fmt: skip
    return web.json_response({"results": results})


@routes.get("/api/v1/merges/{merge_id}")
async def get_merge(request: web.Request) -> web.Response:
    """One merge: items merged and rejected, and how each conflict was resolved."""
    return web.json_response(await _run(request, _service(request).merge_record, request.match_info["merge_id"]))


# --- which branch a session writes to ---------------------------------------------------


@routes.get("/api/v1/sessions/{session_id}/branch")
async def session_branch(request: web.Request) -> web.Response:
    """The branch a session writes to, and what chose it (switch|env|fork|default)."""
    return web.json_response(await _run(request, _service(request).session_branch, session_path(request)))


@routes.post("/api/v1/sessions/{session_id}/fork")
@request_model(SessionFork)
async def fork_session(request: web.Request) -> web.Response:
    """This session is a fork of `parent_session_id`: it writes to its own branch, made from the parent's.

    The SessionStart hook says so before the fork's first event (no payload names the parent).
    The branch starts from the parent's as it is once the parent's events received before
    this request are processed, so the fork sees all its parent did; that wait is bounded
    (FORK_WAIT), and costs one inbox query when nothing of the parent is pending.
    """
    session_id = session_path(request)
    body = SessionFork.model_validate(await read_json_object(request))
    services = request.app["services"]
    forked_at = time.time()
    parent_busy = partial(services.inbox.has_pending, body.parent_session_id, received_before=forked_at)
    if parent_busy():
        pipeline = request.app.get("pipeline")
        if pipeline is not None:
            pipeline.wake()
        if not await wait_while(parent_busy, FORK_WAIT):
            log.warning("session %s forks %s before the parent's last events were processed (%.1f s): its branch "
                        "starts without them", session_id, body.parent_session_id, FORK_WAIT)  # fmt: skip
    return web.json_response(
        await _run(request, _service(request).fork_session, session_id, body.parent_session_id)
    )


@routes.post("/api/v1/branches/switch")
@request_model(BranchSwitch)
async def switch_branch(request: web.Request) -> web.Response:
    """Send a session's later writes to `branch` (`create: true` makes it from `parent`)."""
    body = BranchSwitch.model_validate(await read_json_object(request))
    result = await _run(
        request, _service(request).switch, body.session_id, body.branch, create=body.create, parent=body.parent,
        actor=actor(request),
    )  # fmt: skip
    return web.json_response(result)


# --- snapshots and time travel ------------------------------------------------------------


@routes.get("/api/v1/snapshots")
async def list_snapshots(request: web.Request) -> web.Response:
    """Snapshots, oldest first (`?branch=`)."""
    return web.json_response({"results": await _run(request, _service(request).snapshots, request.query.get("branch"))})


@routes.post("/api/v1/snapshots")
@request_model(SnapshotCreate)
async def create_snapshot(request: web.Request) -> web.Response:
    """Name the current state of a branch; use the label as `as_of` in any read."""
    body = SnapshotCreate.model_validate(await read_json_object(request))
    return web.json_response(await _run(request, _service(request).snapshot, body, actor=actor(request)), status=201)


@routes.delete("/api/v1/snapshots/{label:.+}")
async def delete_snapshot(request: web.Request) -> web.Response:
    """Forget a snapshot's name (the memory it pointed at is unaffected)."""
    return web.json_response(await _run(request, _service(request).delete_snapshot, request.match_info["label"]))


@routes.get("/api/v1/time-travel")
@query_param("as_of", {"type": "string", "minLength": 1}, "A seq, a snapshot label or a timestamp", required=True)
@query_param("query", {"type": "string", "minLength": 1}, required=True)
@query_param("branch", {"type": "string", **NAME_SCHEMA})
@query_param("top_k", {"type": "integer", "minimum": 1, "maximum": 100, "default": 10})
async def time_travel_get(request: web.Request) -> web.Response:
    """Search memory as it was at `?as_of=` (seq, snapshot label or timestamp): `?query=&branch=&project=&top_k=`."""
    if not request.query.get("as_of"):
        raise RecordError("as_of is required: a sequence number, a snapshot label or a timestamp")
    body = TimeTravelRequest(
        query=request.query.get("query", ""), as_of=request.query["as_of"],
        branch=request.query.get("branch") or MAIN, project=request.query.get("project") or None,
        top_k=int_param(request, "top_k", 10, low=1, high=100),
    )  # fmt: skip
    return web.json_response(await _run(request, _service(request).time_travel, body))


@routes.post("/api/v1/time-travel")
@request_model(TimeTravelRequest)
async def time_travel_post(request: web.Request) -> web.Response:
    """The same as GET, with a JSON body."""
    body = TimeTravelRequest.model_validate(await read_json_object(request))
    return web.json_response(await _run(request, _service(request).time_travel, body))
