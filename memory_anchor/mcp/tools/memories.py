"""Writing to memory: a lasting fact about the project.

Everything else memory holds is captured by the hooks. Other agents and orchestrators
write observations, events and memories through the REST API (`POST /api/v1/observations`,
`/api/v1/event-log`, `/api/v1/memories`) and the CLI (`memory-anchor add`).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from memory_anchor.mcp.app import mcp
from memory_anchor.mcp.worker_gateway import branch_scope, call, current_project, session_id


@mcp.tool(structured_output=False)  # plain text: compact for the model
def memory_write_fact(
    fact_text: Annotated[str, Field(min_length=1, max_length=5000, description="One standalone statement")],
    category: Annotated[str | None, Field(description="e.g. architecture, convention, dependency")] = None,
    confidence: Annotated[float, Field(ge=0.0, le=1.0)] = 0.9,
    branch: str | None = None,
) -> str:
    """Remember a lasting fact about this project (verified-fact layer).

    Use it when you have established something future sessions should know and
    that is true beyond this task: "the API uses FastAPI + SQLAlchemy", "tests
    need REDIS_URL", "we chose argon2 for passwords". Confidence >= 0.9 is
    stored, 0.7-0.9 waits for a human's approval, below 0.7 is rejected. A fact
    that contradicts an existing one supersedes it or opens a conflict.
    """
    body = {
        "text": fact_text,
        "category": category,
        "confidence": confidence,
        "branch": branch_scope(branch),
        "project": current_project(),
        "session_id": session_id(),
        "source": "ai",
    }
    answer = call("POST", "/api/v1/facts", {k: v for k, v in body.items() if v is not None})
    status = answer.get("status") or answer.get("event") or "stored"
    why = f": {answer['reason']}" if status in ("forgotten", "rejected") and answer.get("reason") else ""
    return " ".join(part for part in ("fact", answer.get("id"), status) if part) + why
