"""The hook payload checks, in the standard library (hooks cannot import pydantic).

The same field types as the wire models in memory_anchor/schemas/events.py, as a
plain table; tests/test_event_validation.py fails if the two ever disagree.
A hook uses it before spooling an event, so a payload the worker would refuse
is logged and dropped instead of waiting in the spool.
"""

from __future__ import annotations

_S = ("null", "string")
_COMMON = {"hook_event_name": ("string",), "session_id": _S, "transcript_path": _S, "cwd": _S, "permission_mode": _S}

# {event kind: {field: JSON types it accepts}}; fields not listed are free.
FIELD_TYPES: dict[str, dict[str, tuple[str, ...]]] = {
    "SessionStart": {**_COMMON, "source": _S, "parent_session_id": _S, "forked_from_session_id": _S},
    "UserPromptSubmit": {**_COMMON, "prompt": _S, "source": _S},
    "PostToolUse": {
        **_COMMON,
        "tool_name": _S,
        "tool_input": ("null", "object"),
        "tool_response": ("array", "null", "object", "string"),
        "tool_use_id": _S,
        "duration_ms": ("integer", "null", "number"),
        "agent_id": _S,
        "agent_type": _S,
        "mcp_server": ("null", "object"),
    },
    "PreCompact": {**_COMMON, "trigger": _S, "custom_instructions": _S},
    "Stop": {**_COMMON, "stop_hook_active": ("boolean", "null"), "last_assistant_message": _S,
             "background_tasks": ("array", "null"), "assistant_messages": ("array", "null")},
    "SessionEnd": {**_COMMON, "reason": _S},
}


# A session id names rows, branches and inbox keys: at most this long, and no control characters
# (Claude Code's are UUIDs; 5,000 characters or a NUL is not an id).
MAX_SESSION_ID = 200
SESSION_ID_FIELDS = ("session_id", "parent_session_id", "forked_from_session_id")


def session_id_problem(value: str) -> str | None:
    """What is wrong with a session id string, or None."""
    if len(value) > MAX_SESSION_ID:
        return f"is longer than {MAX_SESSION_ID} characters"
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in value):
        return "holds a control character"
    return None


# Deeper than this is not a hook payload but an attack on every recursive walk
# after the door (redaction, storage, distilling), so it is refused.
MAX_DEPTH = 64


def nesting_depth(value: object, limit: int = MAX_DEPTH) -> int:
    """How deeply lists and objects nest in `value` (counting stops past `limit`); no recursion."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            item = list(item.values())
        elif not isinstance(item, list):
            continue
        depth += 1
        deepest = max(deepest, depth)
        if deepest > limit:
            return deepest
        stack.extend((child, depth) for child in item)
    return deepest


def json_type(value: object) -> str:
    """The JSON type name of a parsed JSON value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def refusal(payload: dict) -> str | None:
    """Why the worker would refuse this payload (event kind and field named), or None."""
    name = payload.get("hook_event_name")
    table = FIELD_TYPES.get(name) if isinstance(name, str) else None
    if table is None:
        return f"unknown hook event {name!r}"
    for field, allowed in table.items():
        if field not in payload:
            continue
        kind = json_type(payload[field])
        if kind not in allowed and not (kind == "integer" and "number" in allowed):
            return f"{name} event refused: field {field!r} must be {' or '.join(allowed)}, got {kind}"
        if field in SESSION_ID_FIELDS and kind == "string" and (problem := session_id_problem(payload[field])):
            return f"{name} event refused: field {field!r} {problem}"
    if nesting_depth(payload) > MAX_DEPTH:
        return f"{name} event refused: nested deeper than {MAX_DEPTH} levels"
    return None
