"""What Claude sees: the SessionStart context and per-prompt recall."""

from __future__ import annotations

from aiohttp import web

from memory_anchor.projects import project_for_cwd
from memory_anchor.schemas.events import RecallRequest
from worker.api.middleware import read_json_object
from worker.api.params import branch_param, int_param
from worker.context import ContextRequest, build_context, write_cache
from worker.openapi import request_model
from worker.recall import recall_for_prompt

routes = web.RouteTableDef()


@routes.get("/api/v1/context")
async def get_context(request: web.Request) -> web.Response:
    """The text SessionStart injects for `project` (or `cwd`), within the token budget."""
    services = request.app["services"]
    project = request.query.get("project") or project_for_cwd(request.query.get("cwd"))
    session_id = request.query.get("session_id") or None
    branch = request.query.get("branch") or (services.session_branch(session_id) if session_id else None)
    context_request = ContextRequest(
        project=project,
        source=request.query.get("source", "startup"),
        session_id=session_id,
        branch=branch or branch_param(request),
        agent_id=request.query.get("agent_id") or None,
        budget=int_param(request, "budget", services.settings.context_token_budget, low=100, high=200_000),
        services=services,
    )

    def build():
        built = build_context(context_request, services.db.reader())
        write_cache(services.data_dir, project, built.text)
        return built

    built = await services.run(build)
    return web.json_response({"context": built.text, "tokens": built.tokens, "sections": built.sections})


@routes.post("/api/v1/recall")
@request_model(RecallRequest)
async def recall(request: web.Request) -> web.Response:
    """A few memories relevant to a prompt, or an empty context when nothing clears the threshold."""
    services = request.app["services"]
    body = RecallRequest.model_validate(await read_json_object(request))
    result = await services.run(recall_for_prompt, services, body)
    return web.json_response(result)
