"""Records as they travel over the wire, and the field types wire models share."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from memory_anchor.schemas.codebase import Freshness

# A session id as the API takes it in a path (`/api/v1/sessions/{session_id}/...`): Claude Code's
# are UUIDs; anything up to this long without control characters (a NUL, a newline) is served.
SESSION_ID_MAX_CHARS = 200
SESSION_ID_PATTERN = r"^[^\x00-\x1f\x7f]+$"


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
    freshness: Freshness | None = Field(
        None, description="A memory about code: its files compared with the working tree now (absent when it names none)")


class ResultsPage(BaseModel):
    results: list[dict[str, Any]]
    total: int | None = None


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be blank")
    return value


# "Has a character that is not whitespace", as a JSON Schema (ECMA 262) pattern that agrees
# with Python's str.strip(): ECMA's \s lacks the separators \x1c-\x1f and NEL (\x85), which
# Python counts as whitespace.
NOT_BLANK_PATTERN = r"[^\s\x1c-\x1f\x85]"

# A string with something besides whitespace in it: the document says so with a pattern,
# the model with a clear "must not be blank".
NonBlank = Annotated[str, AfterValidator(_not_blank), Field(json_schema_extra={"pattern": NOT_BLANK_PATTERN})]


def documented(*, required: tuple[str, ...] = (), any_of: list[dict[str, Any]] | None = None):
    """A model's `json_schema_extra` for rules its fields cannot carry: fields that have a
    default but are required in effect (the service refuses the default), and alternatives
    (`anyOf`) that a model_validator or the service checks."""

    def extra(schema: dict[str, Any]) -> None:
        for name in required:
            schema["properties"][name].pop("default", None)
            if name not in schema.setdefault("required", []):
                schema["required"].append(name)
        if any_of:
            schema["anyOf"] = any_of

    return extra


# An id a client gives (an event's id, a session's): printable, no control characters, bounded.
# Claude Code's are UUIDs; anything longer or with a NUL in it is not an id but a payload.
ID_PATTERN = r"^[^\x00-\x1f\x7f]*$"


def refusal_text(exc: ValidationError, limit: int = 3) -> str:
    """A validation error as one line a person can act on: the field and what was wrong with it."""
    parts = []
    for error in exc.errors()[:limit]:
        where = ".".join(str(part) for part in error["loc"]) or "value"
        parts.append(f"{where}: {error['msg']}")
    return "; ".join(dict.fromkeys(parts))
