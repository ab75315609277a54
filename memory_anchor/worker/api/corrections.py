"""REST endpoints that correct memory in one step: forget or edit a fact or an open
next step, settle a fact that waits for the user with their answer, list the open
next steps and the forgotten list.

Thin handlers over `services.memory.corrections` (memory_anchor/worker/memory/corrections.py).
A fact is named by its id or the first characters the briefing shows
(`fact 1a2b3c4d` → /facts/1a2b3c4d/forget); a next step by its number
(`step 12` → /next-steps/12/forget). Who corrects: a person (the viewer, the CLI:
`actor`, default the worker's OS account) or an agent on the user's word (the MCP
tool: `agent_id` or the agent header); a read-only agent is refused.
"""

from __future__ import annotations

from aiohttp import web

from memory_anchor.schemas.corrections import (
    AnswerOut,
    AnswerRequest,
    CorrectionBy,
    CorrectionOut,
    EditRequest,
    ForgetRequest,
    ForgottenPage,
    NextStepsPage,
    PurgeOut,
    item_ref,
)
from memory_anchor.schemas.events import AGENT_HEADER
from memory_anchor.worker.api.middleware import read_json_object
from memory_anchor.worker.api.openapi import query_param, request_model, response_model
from memory_anchor.worker.api.params import branch_param, int_param, int_path
from memory_anchor.worker.api.waiting import wait_while
from memory_anchor.worker.memory.common import agent_actor, human_actor
from memory_anchor.worker.store.records import RecordError

routes = web.RouteTableDef()

# Seconds an answer waits for the user's reply to leave the inbox (the pipeline takes milliseconds).
ANSWER_WAIT = 5.0


def _corrections(request: web.Request):
    return request.app["services"].memory.corrections


async def _run(request: web.Request, func, *args, **kwargs):
    return await request.app["services"].run(func, *args, **kwargs)


async def _body(request: web.Request, model):
    return model.model_validate(await read_json_object(request) if request.can_read_body else {})


def _actor(request: web.Request, body: CorrectionBy) -> str:
    """`agent:<id>` for an agent (refused when it is read-only), else `human:<name>`."""
    agent = body.agent_id or request.headers.get(AGENT_HEADER)
    if not agent and (body.actor or "").startswith("agent:"):
        agent = body.actor.split(":", 1)[1]
    if not agent:
        return human_actor(body.actor)
    if request.app["services"].memory.policy.is_read_only(agent):
        raise RecordError(f"agent {agent!r} is read-only: it cannot change memory", code="read_only_agent", status=403)
    return agent_actor(agent)


# --- facts ------------------------------------------------------------------------------------------


@routes.post("/api/v1/facts/{fact_ref}/forget")
@request_model(ForgetRequest, required=False)
@response_model(CorrectionOut)
async def forget_fact(request: web.Request) -> web.Response:
    """Forget a fact (rule, decision, preference, root cause): a version with status `forgotten`.

    Gone from the briefing, recall and search at once; extraction of the same words
    (the same prompt again, a re-import, Claude proposing it) does not bring it back.
    `fact_ref` is the whole id or the first characters the briefing shows (at least 4).
    """
    body = await _body(request, ForgetRequest)
    out = await _run(request, _corrections(request).forget_fact, request.match_info["fact_ref"], actor=_actor(request, body),
                     reason=body.reason, project=body.project, branch=body.branch or branch_param(request))  # fmt: skip
    return web.json_response(out)


@routes.post("/api/v1/facts/{fact_ref}/edit")
@request_model(EditRequest)
@response_model(CorrectionOut)
async def edit_fact(request: web.Request) -> web.Response:
    """Replace a fact's text with the user's words: a new version, its category kept.

    The old wording joins the forgotten list, so a later extraction of it does not
    overwrite the edit; an agent cannot replace a fact a person edited.
    """
    body = await _body(request, EditRequest)
    out = await _run(request, _corrections(request).edit_fact, request.match_info["fact_ref"], body.text,
                     actor=_actor(request, body), reason=body.reason, project=body.project,
                     branch=body.branch or branch_param(request))  # fmt: skip
    return web.json_response(out)


@routes.post("/api/v1/facts/{fact_ref}/answer")
@request_model(AnswerRequest)
@response_model(AnswerOut)
async def answer_fact(request: web.Request) -> web.Response:
    """Settle a fact that waits for the user with the answer they gave in a session: it holds
    (active, a standing fact now) or not (rejected).

    For a fact a person would otherwise approve in Approvals: a reply to Claude's options or an
    instruction said once. `user_words` must be in one of the user's last three prompts (of
    `session_id`, else of the fact's project): Claude carries the user's answer, it cannot give one.
    """
    body = await _body(request, AnswerRequest)
    services = request.app["services"]
    if body.session_id:  # the reply may still be in the inbox: wait for it, as briefly as the pipeline takes
        await wait_while(lambda: services.inbox.has_pending(body.session_id), ANSWER_WAIT)
    out = await _run(request, _corrections(request).answer_fact, request.match_info["fact_ref"], holds=body.holds,
                     words=body.user_words, actor=_actor(request, body), session_id=body.session_id, project=body.project,
                     branch=body.branch or branch_param(request))  # fmt: skip
    return web.json_response(out)


# --- next steps -------------------------------------------------------------------------------------


@routes.get("/api/v1/next-steps")
@query_param("project", {"type": "string"}, "The project (default: every project)")
@query_param("status", {"type": "string", "enum": ["open", "closed"], "default": "open"},
             "open: what the briefing lists; closed: done, forgotten or edited, newest first")  # fmt: skip
@query_param("limit", {"type": "integer", "minimum": 1, "maximum": 1000, "default": 100})
@response_model(NextStepsPage)
async def list_next_steps(request: web.Request) -> web.Response:
    """The next steps sessions left, each with the number the briefing shows (`step 12`)."""
    status = request.query.get("status", "open")
    if status not in ("open", "closed"):
        raise RecordError("status must be open or closed")
    limit = int_param(request, "limit", 100, low=1, high=1000)
    items = await _run(request, _corrections(request).steps, request.query.get("project"), closed=status == "closed",
                       limit=limit)  # fmt: skip
    return web.json_response({"results": [{**item, "ref": item_ref("next_step", item["id"])} for item in items]})


@routes.post("/api/v1/next-steps/{step_id}/forget")
@request_model(ForgetRequest, required=False)
@response_model(CorrectionOut)
async def forget_next_step(request: web.Request) -> web.Response:
    """Forget an open next step: closed, and the same step restated by a later session stays closed."""
    body = await _body(request, ForgetRequest)
    step = int_path(request, "step_id", "step id")
    out = await _run(request, _corrections(request).forget_step, step, actor=_actor(request, body), reason=body.reason,
                     project=body.project)  # fmt: skip
    return web.json_response(out)


@routes.post("/api/v1/next-steps/{step_id}/edit")
@request_model(EditRequest)
@response_model(CorrectionOut)
async def edit_next_step(request: web.Request) -> web.Response:
    """Reword an open next step: it is closed and the user's wording opens in its place (a new number)."""
    body = await _body(request, EditRequest)
    step = int_path(request, "step_id", "step id")
    out = await _run(request, _corrections(request).edit_step, step, body.text, actor=_actor(request, body),
                     reason=body.reason, project=body.project)  # fmt: skip
    return web.json_response(out)


# --- the forgotten list -------------------------------------------------------------------------------


@routes.post("/api/v1/forgotten/{forgotten_id}/purge")
@response_model(PurgeOut)
async def purge_forgotten(request: web.Request) -> web.Response:
    """Erase a forgotten wording for good: its text leaves every version of the item, the keyword
    indexes, the vectors and the forgotten list (a hash of it stays, so the same words stay out).

    On SQLite the freed bytes are zeroed (secure_delete) and the write-ahead log is truncated.
    A team database refuses (409): its members may not rewrite rows.
    """
    services = request.app["services"]
    forgotten_id = int_path(request, "forgotten_id", "forgotten entry id")
    out = await _run(request, _corrections(request).purge, forgotten_id)
    seqs = out.pop("seqs")
    if seqs:
        await _run(request, services.vectors.delete, seqs)
    return web.json_response({**out, "vectors": len(seqs)})


@routes.get("/api/v1/forgotten")
@query_param("project", {"type": "string"}, "The project (default: every project)")
@query_param("kind", {"type": "string", "enum": ["fact", "next_step"]})
@query_param("limit", {"type": "integer", "minimum": 1, "maximum": 1000, "default": 100})
@response_model(ForgottenPage)
async def list_forgotten(request: web.Request) -> web.Response:
    """Every correction, newest first: what was forgotten or edited away, by whom, when and why."""
    kind = request.query.get("kind")
    if kind not in (None, "fact", "next_step"):
        raise RecordError("kind must be fact or next_step")
    rows = await _run(request, _corrections(request).forgotten.list, request.query.get("project"), kind,
                      limit=int_param(request, "limit", 100, low=1, high=1000))  # fmt: skip
    return web.json_response({"results": rows})
