"""What Claude sees: the SessionStart context and per-prompt recall."""

from __future__ import annotations

from aiohttp import web

from memory_anchor.schemas.events import RecallRequest
from memory_anchor.worker.api.middleware import read_json_object
from memory_anchor.worker.api.openapi import request_model
from memory_anchor.worker.api.params import branch_param, int_param
from memory_anchor.worker.api.waiting import wait_while
from memory_anchor.worker.capture.history_offer import importable_sessions, offer_line
from memory_anchor.worker.context import ContextRequest, build_context, write_cache
from memory_anchor.worker.context.model import estimate_tokens
from memory_anchor.worker.context.recall import recall_for_prompt
from memory_anchor.worker.store.records import MAIN

routes = web.RouteTableDef()


@routes.get("/api/v1/context")
async def get_context(request: web.Request) -> web.Response:
    """The text SessionStart injects for `project` (or `cwd`), within the token budget."""
    services = request.app["services"]
    project = request.query.get("project") or services.project_for_cwd(request.query.get("cwd"))
    session_id = request.query.get("session_id") or None
    if session_id and _may_branch(services, request.query.get("source", "startup")):
        await _wait_for_session(services, session_id)
    branch = (services.session_branch(session_id) if session_id else None) or request.query.get("branch")
    source = request.query.get("source", "startup")
    note = None
    if source == "startup" and request.query.get("transcript_path"):  # a new session: its project's older ones?
        count = await services.run(importable_sessions, services.inbox, request.query["transcript_path"], session_id,
                                   services.data_dir)  # fmt: skip
        note = offer_line(count) if count else None
    context_request = ContextRequest(
        project=project,
        source=source,
        session_id=session_id,
        branch=branch or branch_param(request),
        agent_id=request.query.get("agent_id") or None,
        budget=int_param(request, "budget", services.settings.context_token_budget, low=100, high=200_000),
        services=services.context_services,
    )
    if note:  # said after the briefing, within Claude Code's cap; not cached: it is about this moment
        context_request.max_chars -= len(note) + 2

    def build():
        built = build_context(context_request, services.db.reader())
        write_cache(services.data_dir, project, built.text)
        return built

    built = await services.run(build)
    text = f"{built.text}\n\n{note}" if note else built.text
    # The offer is also said to the user (the hook's systemMessage): they are the one to run the import.
    return web.json_response({"context": text, "tokens": estimate_tokens(text), "sections": built.sections, "notice": note})


def _may_branch(services, source: str) -> bool:
    """Whether processing this SessionStart may put the session on a branch the request cannot name.

    A switch is stored before the session (re)starts and MEMORY_ANCHOR_BRANCH
    comes with the request, so only a fork (always a resumed session, see
    memory_anchor/worker/branching/sessions.py) or a non-main default branch is worth
    waiting for; a plain new session gets its context at once.
    """
    return source in ("resume", "fork") or (services.settings.default_branch or MAIN) != MAIN


async def _wait_for_session(services, session_id: str, timeout: float = 1.0) -> None:
    """Give the pipeline a moment to register a session whose SessionStart was just posted.

    The hook posts the event, then asks for the context; the session's branch
    (a fork's own branch, a switch) is only known once that event is processed.
    """
    await wait_while(lambda: services.session_branch(session_id) is None and services.inbox.has_pending(session_id),
                     timeout)  # fmt: skip


@routes.post("/api/v1/recall")
@request_model(RecallRequest)
async def recall(request: web.Request) -> web.Response:
    """A few memories relevant to a prompt, or an empty context when nothing clears the threshold."""
    services = request.app["services"]
    body = RecallRequest.model_validate(await read_json_object(request))
    project = body.project or services.project_for_cwd(body.cwd)
    branch = services.session_branch(body.session_id) if body.session_id else None
    result = await services.run(recall_for_prompt, services.context_services, body, project=project, branch=branch)
    return web.json_response(result)
