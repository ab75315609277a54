"""Hook events: Claude Code's payloads as the worker accepts them."""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal, Union

from memory_anchor.hookkit import origin
from memory_anchor.hookkit.fields import MAX_DEPTH, MAX_SESSION_ID, nesting_depth
from memory_anchor.schemas.common import ID_PATTERN
from pydantic import BaseModel, ConfigDict, Field, RootModel, StrictBool, StrictFloat, StrictInt, StrictStr, ValidationError

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


# --- hook payloads, one wire model per event kind ---------------------------
#
# Each model types every field the worker reads, strictly (a number is not a
# string), and nothing more: fields Claude Code adds in later versions are kept
# as they are (extra="allow"), and every field may be missing. The hooks, which
# cannot import pydantic, check the same types with the stdlib table in
# memory_anchor/hookkit/fields.py; tests/test_event_validation.py proves the two agree.


# A session id names rows, branches and inbox keys: bounded, and without control characters.
# (memory_anchor/hookkit/fields.py checks the same for the hooks.)
SessionId = Annotated[StrictStr, Field(max_length=MAX_SESSION_ID, pattern=ID_PATTERN)]


class HookEvent(BaseModel):
    """What every hook payload carries."""

    model_config = ConfigDict(extra="allow", strict=True)

    hook_event_name: StrictStr
    session_id: SessionId | None = None
    transcript_path: StrictStr | None = None
    cwd: StrictStr | None = None
    permission_mode: StrictStr | None = None


class SessionStartEvent(HookEvent):
    hook_event_name: Literal["SessionStart"]
    source: StrictStr | None = None
    # A resume or fork of 2.1.332 also sends seconds_since_last_response, context_tokens,
    # prompt_cache_likely_expired and estimated_cache_write_usd: kept as sent, not read. They
    # speak of the conversation's prompt cache, and the briefing does not depend on it: the
    # resumed conversation carries its first briefing either way (both versions, verified),
    # and a fresh one brings what other sessions learnt meanwhile.
    parent_session_id: SessionId | None = None
    forked_from_session_id: SessionId | None = None


class UserPromptSubmitEvent(HookEvent):
    hook_event_name: Literal["UserPromptSubmit"]
    prompt: StrictStr | None = None
    # Who sent it: user, sdk (`claude -p`), system, loop_wakeup, ... (declared by 2.1.332, not yet sent).
    source: StrictStr | None = None


class PostToolUseEvent(HookEvent):
    hook_event_name: Literal["PostToolUse"]
    tool_name: StrictStr | None = None
    tool_input: dict[str, Any] | None = None
    # An object for built-in tools, a list of content blocks for MCP tools.
    tool_response: dict[str, Any] | list[Any] | StrictStr | None = None
    tool_use_id: StrictStr | None = None
    duration_ms: StrictInt | StrictFloat | None = None
    # A subagent's tool use carries its agent (2.1.x); the main conversation's has neither.
    agent_id: StrictStr | None = None
    agent_type: StrictStr | None = None
    # An MCP tool's server, `{"name": "plugin:<plugin>:<server>", "source": "plugin"}` (2.1.332).
    mcp_server: dict[str, Any] | None = None


class PreCompactEvent(HookEvent):
    hook_event_name: Literal["PreCompact"]
    trigger: StrictStr | None = None
    custom_instructions: StrictStr | None = None


class StopEvent(HookEvent):
    hook_event_name: Literal["Stop"]
    stop_hook_active: StrictBool | None = None
    last_assistant_message: StrictStr | None = None
    # Work still in flight (a background subagent, 2.1.198+): the session is paused, not done.
    background_tasks: list[Any] | None = None
    # Not Claude Code's: every text of Claude's in the turn, as the history importer read it from the
    # transcript (a live Stop's are read from `transcript_path` by the worker). Any array, as the hooks'
    # check reads it: an item that is not text is skipped where the texts are read (pipeline/sessions.py).
    assistant_messages: list[Any] | None = None


class SessionEndEvent(HookEvent):
    hook_event_name: Literal["SessionEnd"]
    reason: StrictStr | None = None


EVENT_MODELS: dict[str, type[HookEvent]] = {
    "SessionStart": SessionStartEvent,
    "UserPromptSubmit": UserPromptSubmitEvent,
    "PostToolUse": PostToolUseEvent,
    "PreCompact": PreCompactEvent,
    "Stop": StopEvent,
    "SessionEnd": SessionEndEvent,
}


class HookPayload(RootModel[Annotated[Union[tuple(EVENT_MODELS.values())], Field(discriminator="hook_event_name")]]):  # type: ignore[misc]
    """`POST /api/v1/events`: one hook payload, its kind named by `hook_event_name`
    (for the document; the handler checks it with accepted_event, which names the field)."""


def typed_by_person(value: dict[str, Any]) -> bool:
    """Did a person ask this? `value`: a UserPromptSubmit payload (its `source` and prompt) or a
    prompt record (`data.prompt_source` and its text). A prompt Claude Code sent on its own (a
    background agent's notification, a schedule, a wake-up) is not the user's ask: it never
    becomes their rule, nor what a session line says they asked (memory_anchor/hookkit/origin.py)."""
    if "hook_event_name" in value:
        return origin.typed_by_person(value.get("source"), value.get("prompt"))
    data = value.get("data") if isinstance(value.get("data"), dict) else {}
    return origin.typed_by_person(data.get("prompt_source"), value.get("text"))


class EventRefused(ValueError):
    """A hook payload the worker cannot accept; the message names the event kind and the field."""


def accepted_event(payload: dict[str, Any]) -> dict[str, Any]:
    """The payload to store, checked against its kind's wire model; raises EventRefused.

    Lone surrogates ("\\ud800" escapes, which no UTF-8 store can hold) are
    replaced by U+FFFD first: a stray one in a tool's output is no reason to
    lose the event.
    """
    name = payload.get("hook_event_name")
    model = EVENT_MODELS.get(name) if isinstance(name, str) else None
    if model is None:
        raise EventRefused(f"unknown hook event {name!r}; expected one of {', '.join(HOOK_EVENTS)}")
    if nesting_depth(payload) > MAX_DEPTH:
        raise EventRefused(f"{name} event refused: nested deeper than {MAX_DEPTH} levels")
    try:
        model.model_validate(payload)
    except ValidationError as exc:
        if any(error["type"] == "string_unicode" for error in exc.errors()):
            return accepted_event(scrub_surrogates(payload))
        problems = []
        for error in exc.errors()[:3]:
            field = ".".join(str(part) for part in error["loc"][:1]) or "payload"
            if error["type"] in ("string_too_long", "string_pattern_mismatch"):  # the right type, a wrong value
                problems.append(f"field {field!r} " + ("holds a control character" if error["type"] == "string_pattern_mismatch"
                                                       else f"is longer than {MAX_SESSION_ID} characters"))
            else:
                problems.append(f"field {field!r} {_expected(model, field)}, got {type(payload.get(field)).__name__}")
        raise EventRefused(f"{name} event refused: " + "; ".join(dict.fromkeys(problems))) from None
    return payload


def event_refusal(payload: dict[str, Any]) -> str | None:
    """Why this hook payload cannot be accepted, naming the event kind and the field; None if it can."""
    try:
        accepted_event(payload)
    except EventRefused as exc:
        return str(exc)
    return None


def scrub_surrogates(payload: dict[str, Any]) -> dict[str, Any]:
    """`payload` with each lone surrogate replaced by U+FFFD (a copy; JSON-walked, so no recursion limit here)."""
    text = json.dumps(payload, ensure_ascii=False, default=str)
    try:
        text.encode("utf-8")
        return payload
    except UnicodeEncodeError:
        return json.loads(text.encode("utf-8", "surrogatepass").decode("utf-8", "replace"))


def _expected(model: type[HookEvent], field: str) -> str:
    types = json_types(model).get(field)
    if not types:
        return "is invalid"
    named = [t for t in types if t != "null"]
    return "must be " + " or ".join(named) + (" (or null)" if "null" in types else "")


_JSON_TYPE = {"string": "string", "integer": "integer", "number": "number", "boolean": "boolean",
              "object": "object", "array": "array", "null": "null"}  # fmt: skip


def json_types(model: type[HookEvent]) -> dict[str, tuple[str, ...]]:
    """{field: the JSON types it accepts}, read from the model's JSON schema (what the hooks' table must match)."""
    out: dict[str, tuple[str, ...]] = {}
    for field, spec in model.model_json_schema()["properties"].items():
        options = spec.get("anyOf", [spec])
        kinds = []
        for option in options:
            if "const" in option or "enum" in option:
                kinds.append("string")
            elif "type" in option:
                kinds.append(_JSON_TYPE[option["type"]])
            else:  # Any
                kinds.extend(["string", "integer", "number", "boolean", "object", "array", "null"])
        out[field] = tuple(sorted(set(kinds)))
    return out


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
