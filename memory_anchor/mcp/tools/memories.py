"""The memory tools under seed 004 §3.1's names: write a fact or an observation, search, timeline.

Other agents and orchestrators written against the seed's MCP interface call
these names; `search`/`timeline`/`get_observations` (tools/search.py) are the
token-thrifty path for Claude Code itself.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field

from memory_anchor.schemas.observations import WriteObservationRequest
from memory_anchor.mcp import render
from memory_anchor.mcp.app import mcp
from memory_anchor.mcp.tools.search import SearchMode, _search
from memory_anchor.mcp.worker_gateway import branch_scope, call, current_project, session_id

ObservationKind = Literal["tool_use", "discovery", "decision", "error"]
# The seed's observation types, as the worker's observation types.
_OBSERVATION_TYPE = {"tool_use": "event", "discovery": "discovery", "decision": "decision", "error": "bugfix"}


class TimeRange(BaseModel):
    after: str | None = Field(None, description="ISO 8601 date/time or a phrase like 'last week'")
    before: str | None = Field(None, description="ISO 8601 date/time")


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


@mcp.tool(structured_output=False)  # plain text: compact for the model
def memory_write_observation(
    observation_type: ObservationKind,
    summary: Annotated[str, Field(min_length=1, max_length=2000, description="What happened / was found")],
    tool_name: str | None = None,
    raw_input: Annotated[str | None, Field(max_length=20_000)] = None,
    raw_output: Annotated[str | None, Field(max_length=20_000)] = None,
    branch: str | None = None,
) -> str:
    """Record an observation that the automatic capture cannot see.

    Tool uses are captured automatically; use this for what happens in your head
    or outside a tool: a discovery ("the flaky test depends on wall-clock time"),
    a decision and its reason, an error and its root cause.
    """
    body = WriteObservationRequest(
        type=_OBSERVATION_TYPE[observation_type],
        summary=summary,
        tool_name=tool_name,
        raw_input=raw_input,
        raw_output=raw_output,
        branch=branch_scope(branch),
        project=current_project() or "",
        session_id=session_id(),
    )
    answer = call("POST", "/api/v1/observations", body.model_dump(exclude_none=True))
    return f"observation {answer.get('id', '')} stored".strip()


@mcp.tool(structured_output=False)  # plain text: compact for the model
def memory_search(
    query: Annotated[str, Field(min_length=1)],
    search_type: SearchMode = "hybrid",
    branch: str | None = None,
    category: Annotated[str | None, Field(description="Observation type or record kind to keep")] = None,
    limit: Annotated[int, Field(ge=1, le=50)] = 10,
    time_range: TimeRange | None = None,
) -> str:
    """Search memory and get each hit with its text (hybrid, vector-only or keyword-only).

    Like `search` but returns the memory text too (more tokens per hit); use
    `search_type="keyword"` for exact identifiers, error codes and file names.
    """
    kind = category if category in ("observation", "prompt", "summary", "fact", "event", "memory") else None
    hits = _search(
        query, limit=limit, mode=search_type, branch=branch, kind=kind,
        type=None if kind else category,
        date_start=time_range.after if time_range else None,
        date_end=time_range.before if time_range else None,
    )  # fmt: skip
    if not hits:
        return f"No memories match {query!r}."
    return "\n".join(render.text_line(hit) for hit in hits)


@mcp.tool(structured_output=False)  # plain text: compact for the model
def memory_timeline(
    session_id: str | None = None,
    branch: str | None = None,
    after: Annotated[str | None, Field(description="Only records created after this ISO 8601 time")] = None,
    before: Annotated[str | None, Field(description="Memory as it was at this ISO 8601 time")] = None,
    limit: Annotated[int, Field(ge=1, le=200)] = 20,
) -> str:
    """List what happened, newest first: prompts, observations, summaries, facts.

    Use it for "what did we do yesterday / in session X?" and to catch up at the
    start of a task; give a session_id to replay one session.
    """
    answer = call(
        "GET", "/api/v1/timeline",
        project=current_project(), session_id=session_id, branch=branch_scope(branch), as_of=before, limit=limit,
    )  # fmt: skip
    records = [render.record(r) for r in answer.get("results", [])]
    if after:
        records = [r for r in records if (r.happened_at or r.created_at or "") > after]
    if not records:
        return "Nothing recorded in that range."
    return "\n".join(render.text_line(r) for r in records)
