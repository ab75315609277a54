"""The mem0-compatible memory API: add, search, get, update, delete, history."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from memory_anchor.schemas.common import NOT_BLANK_PATTERN
from memory_anchor.schemas.filters import AsOf, FilterObject, Timestamp, filters_field


class Message(BaseModel):
    """One message to remember, as mem0 takes it (here and on mem0's platform routes)."""

    role: str = Field("user", max_length=100)
    content: str = Field(description="The message text")


class AddMemoryRequest(BaseModel):
    """`POST /api/v1/memories`: `messages` or `content`, scoped by mem0 ids."""

    # The document says what _needs_text checks: messages (non-empty) or content (not blank).
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"anyOf": [
            {"required": ["messages"], "properties": {"messages": {"type": "array"}}},
            {"required": ["content"], "properties": {"content": {"type": "string", "pattern": NOT_BLANK_PATTERN}}},
        ]},  # fmt: skip
    )

    messages: list[Message] | None = Field(None, json_schema_extra={"minItems": 1})
    content: str | None = Field(None, json_schema_extra={"pattern": NOT_BLANK_PATTERN})
    user_id: str | None = None
    agent_id: str | None = None
    run_id: str | None = None
    project: str | None = None
    branch: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    infer: bool = True
    timestamp: Timestamp | None = Field(None, description="When it happened: ISO 8601 or epoch seconds (default: now)")

    @model_validator(mode="after")
    def _needs_text(self) -> "AddMemoryRequest":
        if not self.messages and not (self.content and self.content.strip()):
            raise ValueError("give `messages` (a non-empty list) or `content` (a non-empty string)")
        return self

    def texts(self) -> list[tuple[str, str]]:
        """(role, text) pairs to store, skipping empty ones."""
        if self.messages:
            return [(m.role, m.content) for m in self.messages if m.content.strip()]
        return [("user", self.content or "")]


class MemoryEvent(BaseModel):
    """What an add did to one memory."""

    id: str
    memory: str
    event: Literal["ADD", "UPDATE", "DELETE", "NONE"]
    previous_memory: str | None = None


class AddMemoryResponse(BaseModel):
    """mem0's v1.1 format: the answer of `POST /api/v1/memories` and of mem0's `POST /v3/memories/add/`."""

    results: list[MemoryEvent]


class SearchRequest(BaseModel):
    """`POST /api/v1/memories/search`."""

    model_config = ConfigDict(extra="forbid")

    query: str = Field(min_length=1)
    filters: FilterObject = filters_field(
        "mem0 filters: scope ids, kind/layer/type, metadata keys, operators and AND/OR/NOT (see Filters)"
    )
    top_k: int = Field(10, ge=1, le=200)
    threshold: float | None = None
    mode: Literal["hybrid", "vector", "keyword"] = "hybrid"
    branch: str | None = None
    as_of: AsOf | None = Field(None, description="Search as of a seq, a snapshot label or a timestamp")
    after: Timestamp | None = Field(None, description="Only memories that happened after this")
    before: Timestamp | None = Field(None, description="Only memories that happened before this")
    # mem0 clients send these top-level too
    user_id: str | None = None
    agent_id: str | None = None
    run_id: str | None = None


class UpdateMemoryRequest(BaseModel):
    """`PUT /api/v1/memories/{id}`: writes a new version."""

    model_config = ConfigDict(extra="forbid")

    text: str = Field(min_length=1)
    metadata: dict[str, Any] | None = None
