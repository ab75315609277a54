"""Records as they travel over the wire."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class RecordOut(BaseModel):
    """One version of any record (memory, observation, prompt, summary, fact, ...)."""

    model_config = ConfigDict(extra="allow")

    id: str
    seq: int = Field(description="Position in the global write sequence")
    version: int
    kind: str
    layer: str | None = None
    status: str = "active"
    branch: str = "main"
    project: str = ""
    user_id: str | None = None
    agent_id: str | None = None
    run_id: str | None = None
    session_id: str | None = None
    type: str | None = None
    title: str | None = None
    memory: str = Field("", description="The record's text (mem0's name for it)")
    data: dict[str, Any] = Field(default_factory=dict)
    metadata: dict[str, Any] = Field(default_factory=dict)
    confidence: float | None = None
    happened_at: str | None = None
    created_at: str | None = None
    actor: str | None = None
    reason: str | None = None
    deleted: bool = False
    score: float | None = None


class ResultsPage(BaseModel):
    results: list[dict[str, Any]]
    total: int | None = None
