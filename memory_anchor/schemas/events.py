"""Hook events: Claude Code's payloads as the worker accepts them."""

from __future__ import annotations

from pydantic import BaseModel

HOOK_EVENTS = (
    "SessionStart",
    "UserPromptSubmit",
    "PostToolUse",
    "PreCompact",
    "Stop",
    "SessionEnd",
)

# Headers a hook adds to the payload it forwards unchanged.
EVENT_ID_HEADER = "X-Memory-Anchor-Event-Id"
BRANCH_HEADER = "X-Memory-Anchor-Branch"
AGENT_HEADER = "X-Memory-Anchor-Agent"


class EventAccepted(BaseModel):
    """202: the event is durably in the inbox (or was already)."""

    status: str = "accepted"
    id: int
    duplicate: bool = False


class ContextResponse(BaseModel):
    """`GET /api/v1/context`: what SessionStart injects."""

    context: str
    tokens: int
    sections: list[str] = []


class RecallRequest(BaseModel):
    prompt: str
    project: str | None = None
    session_id: str | None = None
    cwd: str | None = None


class RecallResponse(BaseModel):
    context: str
    results: list[dict] = []
