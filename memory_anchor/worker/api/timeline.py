"""Observations, prompts, sessions and the timeline: what was captured, newest first."""

from __future__ import annotations

from aiohttp import web

from memory_anchor.worker.api.middleware import read_json_object
from memory_anchor.schemas.observations import ObservationsBatch, WriteObservationRequest
from memory_anchor.worker.api.openapi import request_model
from memory_anchor.worker.api.params import actor, as_of_param, branch_param, int_param, session_path
from memory_anchor.worker.capture.timeline import TIMELINE_KINDS, Timeline
from memory_anchor.worker.pipeline import observations
from memory_anchor.worker.store.iso import iso_fields
from memory_anchor.worker.api.freshness import wire_with_freshness
from memory_anchor.worker.store.present import record_to_wire

routes = web.RouteTableDef()


def _page(request: web.Request, kinds: list[str]) -> dict:
    return dict(
        project=request.query.get("project") or None,
        session_id=request.query.get("session_id") or None,
        agent_id=request.query.get("agent_id") or None,
        branch=branch_param(request),
        as_of=as_of_param(request),
        limit=int_param(request, "limit", 50, low=1, high=1000),
        offset=int_param(request, "offset", 0, high=10**9),
        kinds=kinds,
    )


async def _list(request: web.Request, kinds: list[str]) -> web.Response:
    services = request.app["services"]
    args = _page(request, kinds)
    page, total = await services.run(Timeline(services.db).records, args.pop("kinds"), **args)
    return web.json_response({"results": await services.run(wire_with_freshness, services, page), "total": total})


@routes.get("/api/v1/observations")
async def list_observations(request: web.Request) -> web.Response:
    """Observations (compressed tool uses), filterable by session and project."""
    return await _list(request, ["observation"])


@routes.post("/api/v1/observations")
@request_model(WriteObservationRequest)
async def write_observation(request: web.Request) -> web.Response:
    """Record an observation on purpose (a discovery, decision or root cause no tool shows)."""
    services = request.app["services"]
    body = WriteObservationRequest.model_validate(await read_json_object(request))
    if body.branch is None:
        body.branch = branch_param(request)
    record = await services.run(observations.write_observation, services.db, body, actor=actor(request))
    if request.app.get("pipeline") is not None:
        request.app["pipeline"].wake()  # embeds it within the next pass
    return web.json_response({"id": record["id"], **record_to_wire(record)}, status=201)


@routes.post("/api/v1/observations/batch")
async def get_observations(request: web.Request) -> web.Response:
    """Full details for the ids asked for (progressive disclosure's last step)."""
    body = ObservationsBatch.model_validate(await read_json_object(request))
    services = request.app["services"]
    found = await services.run(
        Timeline(services.db).by_ids, body.ids, branch=body.branch or branch_param(request), as_of=body.as_of
    )
    return web.json_response({"results": await services.run(wire_with_freshness, services, found)})


@routes.get("/api/v1/prompts")
async def list_prompts(request: web.Request) -> web.Response:
    """The user's prompts, as captured by UserPromptSubmit."""
    return await _list(request, ["prompt"])


@routes.get("/api/v1/summaries")
async def list_summaries(request: web.Request) -> web.Response:
    """Session summaries written at Stop and SessionEnd."""
    return await _list(request, ["summary"])


@routes.get("/api/v1/timeline")
async def timeline(request: web.Request) -> web.Response:
    """Every kind of record interleaved, newest first; or around `anchor` with depth_before/after."""
    services = request.app["services"]
    anchor = request.query.get("anchor")
    if anchor:
        result = await services.run(
            Timeline(services.db).around,
            anchor,
            depth_before=int_param(request, "depth_before", 5, high=100),
            depth_after=int_param(request, "depth_after", 5, high=100),
            branch=branch_param(request),
            as_of=as_of_param(request),
        )
        window = [result["anchor"], *result["before"], *result["after"]]
        wired = dict(zip((r["id"] for r in window), await services.run(wire_with_freshness, services, window)))
        return web.json_response({"anchor": wired[result["anchor"]["id"]], "before": [wired[r["id"]] for r in result["before"]],
                                  "after": [wired[r["id"]] for r in result["after"]]})  # fmt: skip
    return await _list(request, TIMELINE_KINDS)


@routes.get("/api/v1/sessions")
async def list_sessions(request: web.Request) -> web.Response:
    services = request.app["services"]
    rows, total = await services.run(
        Timeline(services.db).sessions,
        project=request.query.get("project") or None,
        limit=int_param(request, "limit", 50, low=1, high=1000),
        offset=int_param(request, "offset", 0, high=10**9),
    )
    return web.json_response({"results": [iso_fields(r) for r in rows], "total": total})


@routes.get("/api/v1/sessions/{session_id}")
async def get_session(request: web.Request) -> web.Response:
    services = request.app["services"]
    row = await services.run(Timeline(services.db).session, session_path(request))
    return web.json_response(iso_fields(row))
