"""`POST /api/v1/verify`: every memory of a project checked against its working tree (memory_anchor/worker/memory/verification.py)."""

from __future__ import annotations

from aiohttp import web

from memory_anchor.schemas.verify import VerifyReport, VerifyRequest
from memory_anchor.worker.api.middleware import read_json_object
from memory_anchor.worker.api.openapi import request_model, response_model
from memory_anchor.worker.memory.verification import Verification

routes = web.RouteTableDef()


@routes.post("/api/v1/verify")
@request_model(VerifyRequest)
@response_model(VerifyReport)
async def verify(request: web.Request) -> web.Response:
    """What is stale and why; with `fix`, facts whose files are gone are demoted and steps commits did are closed."""
    services = request.app["services"]
    body = VerifyRequest.model_validate(await read_json_object(request))
    project = body.project or services.project_for_cwd(body.cwd)
    verification = Verification(services.db, services.codebase, services.memory)
    report = await services.run(verification.verify, project, cwd=body.cwd, branch=body.branch, fix=body.fix,
                                include_fresh=body.include_fresh)  # fmt: skip
    return web.json_response(report.model_dump(mode="json"))
